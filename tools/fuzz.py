#!/usr/bin/env python3
"""Runs the fuzz targets built by `make fuzz` (libFuzzer, ASan) for a set
time each and prints, per target, the executions, the seconds and what was
found. Each target's corpus grows in .build/fuzz/corpus-<target>, started
from the seeds in Fuzz/corpus/<target> (never written to); an input that
crashes lands in .build/fuzz/findings/<target>/ and the command fails, so
that it can be turned into a regression test.

Usage: tools/fuzz.py [--seconds N] TARGET...   (make fuzz FUZZ_SECONDS=N)
"""
import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build" / "fuzz"
# Seconds one input may take before it counts as a finding (a hang).
UNIT_TIMEOUT = 60


def run(target, seconds):
    corpus = BUILD / f"corpus-{target}"
    findings = BUILD / "findings" / target
    corpus.mkdir(parents=True, exist_ok=True)
    # Each run reports its own findings: the previous run's are cleared
    # (copy them out, or into a test, before running again).
    if findings.exists():
        shutil.rmtree(findings)
    findings.mkdir(parents=True)
    seeds = ROOT / "Fuzz" / "corpus" / target
    command = [str(BUILD / f"fuzz-{target}"), f"-max_total_time={seconds}", "-print_final_stats=1",
               "-rss_limit_mb=2048", f"-timeout={UNIT_TIMEOUT}", "-max_len=8192", f"-artifact_prefix={findings}/", str(corpus), str(seeds)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    text = proc.stderr
    executed = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
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
        "corpus": len(list(corpus.iterdir())),
        "status": proc.returncode,
        "found": found,
        "slow": slow,
        "log": text,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("targets", nargs="+")
    opts = parser.parse_args()
    if not all((BUILD / f"fuzz-{target}").exists() for target in opts.targets):
        sys.exit("fuzz: run `make fuzz` (it builds the targets first)")
    results = [run(target, opts.seconds) for target in opts.targets]
    print(f"| target | seconds | executions | per second | corpus | found | slow inputs |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['target']} | {r['seconds']} | {r['executions']:,} | {r['executions'] // max(r['seconds'], 1):,} | "
              f"{r['corpus']} | {', '.join(r['found']) or 'nothing'} | {len(r['slow'])} |")
    failed = [r for r in results if r["status"] != 0 or r["found"]]
    for r in failed:
        print(f"\n{r['target']}: exit {r['status']}, findings in {BUILD / 'findings' / r['target']}\n"
              + "\n".join(r["log"].splitlines()[-30:]), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
