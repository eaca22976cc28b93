"""The benchmark's report: interleaved sampling, the statistics, and the
Markdown rows, kept in REPORT for docs/PERFORMANCE.md."""
import statistics
from pathlib import Path

REPORT = []


def out(line=""):
    print(line, flush=True)
    REPORT.append(line)


RUNS_KEPT = 6
RUNS_HEADER = ("| run | commit | password, no sync / faillock | durable | vs faillock + asking fprintd | instructions "
               "| match / pam_fprintd | / floor | / floor with enrollment | its batches | ready / pam_fprintd | module KiB "
               "| load warm / cold | / floor under the rules | its batches | locker's password through the helper / in root's "
               "process | instructions / faillock + asking fprintd |")


def replace_between(text, name, body):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"bench: no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    old, tail = rest.split(end, 1)
    return head + begin + "\n" + body + "\n" + end + tail, old


def write_between_markers(path: Path, summary):
    """Puts the report into `path` between its bench:begin and bench:end
    markers, and `summary` (one table row) first among the rows between
    runs:begin and runs:end (the last RUNS_KEPT runs), the text around them
    kept."""
    text = path.read_text()
    text, _ = replace_between(text, "bench", "\n".join(REPORT))
    _, old = replace_between(text, "runs", "")
    # A run from before a column was added has "–" in it.
    columns = RUNS_HEADER.count(" | ") + 1
    rows = [line + " – |" * (columns - line.count(" | ") - 1) for line in old.splitlines() if line.startswith("| 20")]
    rows = [summary] + rows[:RUNS_KEPT - 1]
    text, _ = replace_between(text, "runs", "\n".join([RUNS_HEADER, "|" + "---|" * RUNS_HEADER.count(" | ") + "---|"] + rows))
    path.write_text(text)


def interleaved(n, warmup, sides):
    """sides: [(name, fn)]; -> {name: [microseconds]} with warm-up dropped.
    Each round runs every side once, the order rotating round by round."""
    samples = {name: [] for name, _ in sides}
    for i in range(warmup + n):
        shift = i % len(sides)
        for name, fn in sides[shift:] + sides[:shift]:
            value = fn()
            if i >= warmup:
                samples[name].append(value)
    return samples


def p90(values):
    ordered = sorted(values)
    return ordered[max(0, -(-9 * len(ordered) // 10) - 1)]  # nearest rank


def ratio_row(label, ours, ref, reference, unit=1000, digits=2):
    o = [v / unit for v in ours]
    r = [v / unit for v in ref]
    ratio = statistics.median(o) / statistics.median(r)
    out(f"| {label} | {reference} | {len(o)} | {statistics.median(o):.{digits}f} / {statistics.median(r):.{digits}f} "
        f"| {p90(o):.{digits}f} / {p90(r):.{digits}f} | {min(o):.{digits}f} / {min(r):.{digits}f} "
        f"| {max(o):.{digits}f} / {max(r):.{digits}f} | **{ratio:.2f}×** |")
    return ratio


def table_header(unit="ms"):
    out(f"| what | reference (theirs) | N | median {unit} ours / theirs | p90 | min | max | ratio |")
    out("|---|---|---|---|---|---|---|---|")


