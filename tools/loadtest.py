#!/usr/bin/python3
"""The load test: many PAM transactions at once through the real module and
a real fprintd, for minutes, with every attempt accounted for exactly. This
is its command; the test itself (its design, its world and its checks) is
the suite's support package tests/support/load, which
tests/faults/test_load.py runs for about 30 seconds.

Exit status 0 when everything matched, 1 on any mismatch (each one printed).
"""
import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from load import format_report, run_load  # noqa: E402
from pamenv import HARNESS, MODULE  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=300, help="how long to run rounds (default 300)")
    parser.add_argument("--group-size", type=int, default=32, help="concurrent transactions per group (default 32)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--bound", type=int, default=120, help="seconds a phase may take before it is killed")
    parser.add_argument("--json", help="also write the report as JSON to this file")
    parser.add_argument("--module", type=Path, default=MODULE, help=f"the module to load-test (default {MODULE})")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root (mount namespaces, the state directory's checks)")
    if not HARNESS.exists():
        parser.error(f"{HARNESS} is missing: run make test-artifacts")
    # A SIGTERM (timeout(1), a CI's cancel) ends the run through its
    # teardown, so that fprintd, the bus and every harness are stopped.
    for signo in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signo, lambda number, frame: sys.exit(128 + number))
    report = run_load(args.seconds, args.group_size, args.seed, args.bound,
                      log=lambda text: print(text, flush=True), module=args.module)
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 1 if report["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
