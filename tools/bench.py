#!/usr/bin/env python3
"""Latency benchmark (not a test: nothing here asserts on time).

Measures, inside the libpam client, the time from just before
pam_authenticate() to its return (tests/pamharness.c -L, CLOCK_MONOTONIC;
pam_start's module loading is outside the window), each path N times with
warm-up rounds first, the two sides interleaved so drift hits both alike:

  fingerprint match   pam_localauth.so (policy owner, mode=terminal: no first
                      prompt) vs Debian's pam_fprintd.so (the reference,
                      measured there at 11 ms median), both against the same
                      real fprintd + virtual device (tests/fprint_rig.py); the
                      matching scan is fed on cue (VerifyFingerSelected), so
                      the figure includes the rig's reaction, alike for both.
  unknown user names  a known user without a finger vs a name no account has,
                      one wrong password each, fprintd running: the time to
                      the first prompt and the whole call must not tell them
                      apart (tests/test_enumeration_timing.py asserts the
                      medians within 2x; here the medians side by side).
  passcode            pam_localauth.so with a correct password checked through
                      its localauth-passcode service (pam_matrix), fprintd not
                      running, vs a stack of pam_matrix alone. Twice: a system
                      bus without fprintd, and no system bus at all.

Usage: make bench   (or: tools/bench.py [-n N] [--warmup W]) as root.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from fprint_rig import FprintRig  # noqa: E402
from pamenv import HARNESS, MODULE, PAM_FPRINTD, PAM_MATRIX, PASSWORDS, PamEnv, prompt_timings  # noqa: E402

MATCH = "SCAN finger-alice"
ALICE = PASSWORDS["alice"]
EARLIER_REFERENCE_MS = 11.0  # pam_fprintd, match, median, as first measured on this rig


class BenchError(RuntimeError):
    pass


def write_services(pam):
    ours_args = "services=bench-ours mode=terminal"
    pam.write_service("bench-ours", [  # pam.d/sudo's shape, policy owner
        pam.module_line("[success=2 ignore=ignore authinfo_unavail=ignore default=die]", ours_args),
        f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        "auth required pam_permit.so",
    ])
    pam.write_service("bench-fprintd", [
        f"auth [success=2 default=ignore] {PAM_FPRINTD} max-tries=3 timeout=10",
        f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        "auth required pam_permit.so",
    ])
    pam.write_service("bench-matrix", [f"auth required {PAM_MATRIX} passdb={pam.passdb}"])


def timed_run(pam, service, answers, env):
    """One harness run; -> (elapsed microseconds, Run)."""
    run = pam.run(service, "alice", answers, env=env, latency=True)
    if run.elapsed_us is None:
        raise BenchError(f"{service}: no elapsed_us in output:\n{run.stdout}{run.stderr}")
    return run.elapsed_us, run


def fingerprint_once(pam, rig, service):
    rig.feed([MATCH])
    elapsed, run = timed_run(pam, service, [], rig.env())
    report = rig.feed_wait(timeout=30)
    if run.code != 0 or run.prompts() or not report.ok:
        raise BenchError(f"{service}: not a fingerprint match: code {run.code}, messages {run.messages}, "
                         f"feed {report}")
    rig.wait_until_claimable()  # pam_fprintd leaves its claim to fprintd; outside the measured window
    return elapsed


def passcode_once(pam, service, env, expected_prompt):
    elapsed, run = timed_run(pam, service, [ALICE], env)
    if run.code != 0 or run.prompts() != [expected_prompt]:
        raise BenchError(f"{service}: not a passcode success: code {run.code}, messages {run.messages}")
    return elapsed


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


def row(label, values):
    ms = [v / 1000 for v in values]
    return (f"  {label:<46} {len(ms):>3} {statistics.median(ms):>9.2f} {p90(ms):>8.2f} "
            f"{min(ms):>8.2f} {max(ms):>8.2f}")


def print_table(title, ours_label, ours, ref_label, ref):
    print(f"\n{title}")
    print(f"  {'module':<46} {'N':>3} {'median ms':>9} {'p90 ms':>8} {'min ms':>8} {'max ms':>8}")
    print(row(ours_label, ours))
    print(row(ref_label, ref))
    print(f"  ratio ours/reference ({ref_label.split()[0]}): median "
          f"{statistics.median(ours) / statistics.median(ref):.2f}x, p90 {p90(ours) / p90(ref):.2f}x")


def ldd(path):
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30, help="measured runs per side (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured rounds first (default 3)")
    opts = parser.parse_args()
    for need in (MODULE, HARNESS, PAM_FPRINTD):
        if not Path(need).exists():
            sys.exit(f"bench: {need} is missing (make module {HARNESS.relative_to(ROOT)}; "
                     "libpam-fprintd for pam_fprintd.so)")
    if os.geteuid() != 0:
        sys.exit("bench: run as root (the state directory must be root-owned)")

    base = Path(tempfile.mkdtemp(prefix="localauth-bench-"))
    try:
        pam = PamEnv(base)
        write_services(pam)
        with FprintRig() as rig:
            rig.enroll("alice")
            print(f"pam_localauth bench: N={opts.n} per side after {opts.warmup} warm-up rounds; "
                  f"time = pam_authenticate() call to return, CLOCK_MONOTONIC in the client "
                  f"(tests/pamharness.c -L); {os.cpu_count()} CPUs; rig started in "
                  f"{rig.start_seconds * 1000:.0f} ms")
            fp = interleaved(opts.n, opts.warmup, [
                ("ours", lambda: fingerprint_once(pam, rig, "bench-ours")),
                ("ref", lambda: fingerprint_once(pam, rig, "bench-fprintd")),
            ])
            names = prompt_timings(pam, ["bob", "nosuchuser"], runs=opts.n, warmup=opts.warmup, env=rig.env(),
                                   service="bench-ours")
            rig.stop_fprintd()
            bus_no_fprintd = interleaved(opts.n, opts.warmup, [
                ("ours", lambda: passcode_once(pam, "bench-ours", rig.env(), "Enter Password: ")),
                ("ref", lambda: passcode_once(pam, "bench-matrix", rig.env(), "Password: ")),
            ])
        no_bus = interleaved(opts.n, opts.warmup, [  # PamEnv's default: a bus address with no socket
            ("ours", lambda: passcode_once(pam, "bench-ours", None, "Enter Password: ")),
            ("ref", lambda: passcode_once(pam, "bench-matrix", None, "Password: ")),
        ])
        record = pam.record()
        state_fs = subprocess.run(["df", "--output=fstype", str(pam.state)], capture_output=True,
                                  text=True).stdout.split()[-1]
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print_table("fingerprint match (fed on cue by the rig, alike for both)",
                "pam_localauth.so owner, mode=terminal", fp["ours"],
                "pam_fprintd.so (Debian libpam-fprintd 1.94.2)", fp["ref"])
    print(f"  (pam_fprintd was first measured at {EARLIER_REFERENCE_MS:.0f} ms median on this rig)")
    print_table("passcode, correct password via pam_matrix; system bus up, fprintd not running",
                "pam_localauth.so owner -> localauth-passcode", bus_no_fprintd["ours"],
                "pam_matrix.so alone", bus_no_fprintd["ref"])
    print_table("passcode, correct password via pam_matrix; no system bus",
                "pam_localauth.so owner -> localauth-passcode", no_bus["ours"],
                "pam_matrix.so alone", no_bus["ref"])
    print(f"  (each of our successes writes the record twice, charge then reset, with fsync; "
          f"state dir on {state_fs}; after the runs F={record.F} P={record.P})")

    print("\nunknown user names (no enumeration): known user without a finger vs a name no account has")
    print(f"  {'':<46} {'known median ms':>15} {'unknown median ms':>17} {'ratio':>6}")
    for which, label in ((0, "time to the first prompt"), (1, "whole call (one wrong password)")):
        known = statistics.median(pair[which] for pair in names["bob"]) / 1000
        unknown = statistics.median(pair[which] for pair in names["nosuchuser"]) / 1000
        print(f"  {label:<46} {known:>15.2f} {unknown:>17.2f} {unknown / known:>5.2f}x")

    print(f"\n{MODULE.relative_to(ROOT)}: {MODULE.stat().st_size} bytes "
          f"({MODULE.stat().st_size / 1024:.0f} KiB); ldd:")
    for line in ldd(MODULE):
        print(f"  {line}")
    swift = [line for line in ldd(MODULE) if "swift" in line.lower()]
    print(f"  names nothing under the Swift toolchain: {'yes' if not swift else 'NO: ' + '; '.join(swift)}")
    print(f"{PAM_FPRINTD}: {PAM_FPRINTD.stat().st_size} bytes ({PAM_FPRINTD.stat().st_size / 1024:.0f} KiB); "
          f"ldd: {', '.join(line.split()[0] for line in ldd(PAM_FPRINTD))}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench: {e}")
