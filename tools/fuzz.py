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
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build" / "fuzz"


def run(target, seconds):
    corpus = BUILD / f"corpus-{target}"
    findings = BUILD / "findings" / target
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    seeds = ROOT / "Fuzz" / "corpus" / target
    command = [str(BUILD / f"fuzz-{target}"), f"-max_total_time={seconds}", "-print_final_stats=1",
               "-rss_limit_mb=2048", "-max_len=8192", f"-artifact_prefix={findings}/", str(corpus), str(seeds)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    text = proc.stderr
    executed = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
    found = sorted(p.name for p in findings.iterdir())
    return {
        "target": target,
        "executions": int(executed.group(1)) if executed else 0,
        "seconds": seconds,
        "corpus": len(list(corpus.iterdir())),
        "status": proc.returncode,
        "found": found,
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
    print(f"| target | seconds | executions | per second | corpus | found |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['target']} | {r['seconds']} | {r['executions']:,} | {r['executions'] // max(r['seconds'], 1):,} | "
              f"{r['corpus']} | {', '.join(r['found']) or 'nothing'} |")
    failed = [r for r in results if r["status"] != 0 or r["found"]]
    for r in failed:
        print(f"\n{r['target']}: exit {r['status']}, findings in {BUILD / 'findings' / r['target']}\n"
              + "\n".join(r["log"].splitlines()[-30:]), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
