"""The benchmark's report: interleaved sampling, the statistics, and the
Markdown rows, kept in REPORT for docs/PERFORMANCE.md."""
import statistics
from pathlib import Path

REPORT = []


def out(line=""):
    print(line, flush=True)
    REPORT.append(line)


def write_between_markers(path: Path):
    """Puts the report into `path` between its bench:begin and bench:end
    markers, the text around them kept."""
    text = path.read_text() if path.exists() else "<!-- bench:begin -->\n<!-- bench:end -->\n"
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"bench: {path} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(head + begin + "\n" + "\n".join(REPORT) + "\n" + end + tail)


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


