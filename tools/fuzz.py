#!/usr/bin/env python3
"""Runs the fuzz targets built by `make fuzz` (libFuzzer, ASan) for a set
time each and prints, per target, the executions, the seconds, the coverage
libFuzzer reached and what was found. Each target's corpus grows in
.build/fuzz/corpus-<target>, started from the seeds in Fuzz/corpus/<target>;
an input that crashes lands in .build/fuzz/findings/<target>/ and the
command fails, so that it can be turned into a regression test.

With --keep (`make fuzz-long`) the run works in its own corpus,
.build/fuzz/long/corpus-<target>, and at the end merges into
Fuzz/corpus/<target> the inputs that reach code the seeds there do not, so
a long run's coverage is kept in the repository; otherwise the seeds are
never written to. --jobs runs that many targets at once. Each run executes
a copy of its target, so a rebuild during a long run does not touch it.

Usage: tools/fuzz.py [--seconds N] [--jobs N] [--keep] TARGET...
       (make fuzz FUZZ_SECONDS=N; make fuzz-long)
"""
import argparse
import concurrent.futures
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build" / "fuzz"
# Seconds one input may take before it counts as a finding (a hang).
UNIT_TIMEOUT = 60


def run(target, seconds, keep):
    work = BUILD / "long" if keep else BUILD
    corpus = work / f"corpus-{target}"
    findings = work / "findings" / target
    corpus.mkdir(parents=True, exist_ok=True)
    # Each run reports its own findings: the previous run's are cleared
    # (copy them out, or into a test, before running again).
    if findings.exists():
        shutil.rmtree(findings)
    findings.mkdir(parents=True)
    seeds = ROOT / "Fuzz" / "corpus" / target
    binary = work / "running" / f"fuzz-{target}"
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUILD / f"fuzz-{target}", binary)
    command = [str(binary), f"-max_total_time={seconds}", "-print_final_stats=1",
               "-rss_limit_mb=2048", f"-timeout={UNIT_TIMEOUT}", "-max_len=8192", f"-artifact_prefix={findings}/", str(corpus), str(seeds)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 600)
    text = proc.stderr
    executed = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
    # libFuzzer's last status line: code edges reached (cov) and features
    # (ft, edges with hit counts and compared values).
    reached = re.findall(r"cov: (\d+) ft: (\d+)", text)
    merged = 0
    if keep and proc.returncode == 0:
        before = len(list(seeds.iterdir()))
        subprocess.run([str(binary), "-merge=1", f"-timeout={UNIT_TIMEOUT}", "-max_len=8192", str(seeds), str(corpus)],
                       capture_output=True, text=True, timeout=3600, check=True)
        merged = len(list(seeds.iterdir())) - before
    everything = sorted(p.name for p in findings.iterdir())
    # libFuzzer keeps inputs that took over 10 s as slow-unit-*: listed, not
    # failures (a loaded machine makes them too); one over UNIT_TIMEOUT is a
    # timeout-* finding and fails, like a crash, a leak or running out of memory.
    found = [name for name in everything if not name.startswith("slow-unit-")]
    slow = [name for name in everything if name.startswith("slow-unit-")]
    return {
        "target": target,
        "executions": int(executed.group(1)) if executed else 0,
        "seconds": seconds,
        "coverage": reached[-1] if reached else ("?", "?"),
        "merged": merged,
        "corpus": len(list(corpus.iterdir())),
        "status": proc.returncode,
        "found": found,
        "slow": slow,
        "log": text,
        "findings": findings,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=1, help="targets run at once")
    parser.add_argument("--keep", action="store_true", help="merge what the run reached into Fuzz/corpus")
    parser.add_argument("targets", nargs="+")
    opts = parser.parse_args()
    if not all((BUILD / f"fuzz-{target}").exists() for target in opts.targets):
        sys.exit("fuzz: run `make fuzz` (it builds the targets first)")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        results = list(pool.map(lambda target: run(target, opts.seconds, opts.keep), opts.targets))
    print("| target | seconds | executions | per second | edges (cov) | features (ft) | corpus | kept in Fuzz/corpus | found | slow inputs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['target']} | {r['seconds']} | {r['executions']:,} | {r['executions'] // max(r['seconds'], 1):,} | "
              f"{r['coverage'][0]} | {r['coverage'][1]} | {r['corpus']} | {r['merged'] if opts.keep else '-'} | "
              f"{', '.join(r['found']) or 'nothing'} | {len(r['slow'])} |")
    failed = [r for r in results if r["status"] != 0 or r["found"]]
    for r in failed:
        print(f"\n{r['target']}: exit {r['status']}, findings in {r['findings']}\n"
              + "\n".join(r["log"].splitlines()[-30:]), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
