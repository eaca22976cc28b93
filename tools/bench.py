#!/usr/bin/env python3
"""Benchmark (not a test: nothing here asserts on time). `make bench`.

Prints one table of ratios, ours / theirs, each row naming its reference,
from medians of interleaved runs (the sides alternate round by round, so
drift hits both alike), with p90, min and max; then the footprint, the
scale and the breakdown of one match and one password by phase. With
--write FILE the same report goes into FILE between its "bench:begin" and
"bench:end" markers (docs/PERFORMANCE.md), the analysis around them kept.

Latency is the time from just before pam_authenticate() to its return in
the libpam client (tests/support/programs/pamharness.c -L, CLOCK_MONOTONIC; pam_start's
module loading is outside); "whole process" is spawn to exit of that
client as seen from here. Every side runs in the same private PAM world
(pam_wrapper), against the same real fprintd + virtual device
(tests/support/fprint_rig.py), whose matching scan is fed on cue
(VerifyFingerSelected), so the rig's reaction is in both figures alike.

Usage: make bench   (or tools/bench.py [-n N] [--warmup W] [--write FILE]) as root.
"""
import argparse
import os
import platform
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fprint_rig import FprintRig  # noqa: E402
from pamenv import (HARNESS, MODULE, OFFSET_CHECKSUM, parse_run, run_in_terminal, OFFSET_NAME, OFFSET_NAME_LENGTH, OFFSET_UID, PAM_FPRINTD,  # noqa: E402
                    PAM_MATRIX, PAM_MODULE_DIR, PASSWORDS, SLOT_SIZE, PamEnv, current_slot, fnv1a64, prompt_timings,
                    reseal_record, sync_mark)

import test_real_programs as real_programs  # noqa: E402  (the real sudo's private world)

MATCH = "SCAN finger-alice"
ALICE = PASSWORDS["alice"]
PAM_FAILLOCK = PAM_MODULE_DIR / "pam_faillock.so"
NOSYNC_MODULE = ROOT / ".build" / "bench-nosync" / "pam_localauth.so"
LOADTIME = ROOT / ".build" / "bench" / "loadtime"
RELEASE_PROBE = ROOT / ".build" / "bench-probe" / "release" / "la-store-probe"
# No back-off within a benchmark's wrong passwords; the attempts are still
# charged and counted exactly as in production.
BENCH_ARGS = "mode=terminal passcode_backoff=1000:1s"

REPORT = []


def out(line=""):
    print(line, flush=True)
    REPORT.append(line)


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------- the stacks

def write_services(pam, faillock_dir):
    def ours(name, module, services):
        pam.write_service(name, [  # pam.d/sudo's shape, policy owner
            f"auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] {module} state_dir={pam.state} "
            f"conf={pam.conf} services={services} {BENCH_ARGS}",
            f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
            "auth requisite pam_deny.so",
            "auth required pam_permit.so",
        ])
    ours("bench-ours", MODULE, "bench-ours")
    ours("bench-nosync", NOSYNC_MODULE, "bench-nosync")
    pam.write_service("bench-fprintd", [
        f"auth [success=2 default=ignore] {PAM_FPRINTD} max-tries=3 timeout=10",
        f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        "auth required pam_permit.so",
    ])
    # Debian's pam_faillock(8) shape: preauth, the password, authfail, authsucc.
    faillock = f"dir={faillock_dir} deny=1000 unlock_time=60"
    pam.write_service("bench-faillock", [
        f"auth required {PAM_FAILLOCK} preauth {faillock}",
        f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
        f"auth [default=die] {PAM_FAILLOCK} authfail {faillock}",
        f"auth sufficient {PAM_FAILLOCK} authsucc {faillock}",
        "auth requisite pam_deny.so",
    ])
    # pam_matrix takes a password only for the services its line names.
    extra = "".join(f"{u}:{p}:{s}\n" for u, p in PASSWORDS.items() for s in ("bench-faillock", "bench-fprintd"))
    pam.passdb.write_text(pam.passdb.read_text() + extra)


# ---------------------------------------------------------------- one run of each kind

def run_harness(pam, service, answers, env, wrapper=(), latency=True, timeout=60, unwrapped=False):
    """One harness run. `unwrapped`: libpam reads a private /etc/pam.d (a
    mount namespace binds the world's service directory there; the host's
    /etc is untouched) instead of going through pam_wrapper, which copies
    every service file at each pam_start. Our module starts a second PAM
    transaction for the password, so under pam_wrapper it would pay that
    copy inside the measured call and the reference would not."""
    if not unwrapped:
        return pam.run(service, "alice", answers, env=env, latency=latency, wrapper=wrapper, timeout=timeout)
    argv = list(wrapper) + pam.harness_args(service, "alice", answers, latency=latency)
    script = (f"mount --make-rprivate / && mount --bind {shlex.quote(str(pam.services))} /etc/pam.d && exec "
              + " ".join(shlex.quote(a) for a in argv))
    environment = pam.env(env)
    environment["LD_PRELOAD"] = "libnss_wrapper.so"
    environment.pop("PAM_WRAPPER", None)
    environment.pop("PAM_WRAPPER_SERVICE_DIR", None)
    proc = subprocess.run(["unshare", "--mount", "bash", "-c", script], env=environment, capture_output=True, text=True,
                          timeout=timeout)
    return parse_run(proc.stdout, proc.stderr)


def timed_run(pam, service, answers, env, wrapper=(), unwrapped=False):
    """One harness run; -> (in-call microseconds, whole-process microseconds, Run)."""
    start = time.perf_counter()
    run = run_harness(pam, service, answers, env, wrapper=wrapper, unwrapped=unwrapped)
    whole = (time.perf_counter() - start) * 1e6
    if run.elapsed_us is None:
        raise BenchError(f"{service}: no elapsed_us in output:\n{run.stdout}{run.stderr}")
    return run.elapsed_us, whole, run


def fingerprint_once(pam, rig, service, whole=None):
    rig.feed([MATCH])
    elapsed, process, run = timed_run(pam, service, [], rig.env())
    report = rig.feed_wait(timeout=30)
    if run.code != 0 or run.prompts() or not report.ok:
        raise BenchError(f"{service}: not a fingerprint match: code {run.code}, messages {run.messages}, "
                         f"feed {report}")
    rig.wait_until_claimable()  # pam_fprintd leaves its claim to fprintd; outside the measured window
    if whole is not None:
        whole.setdefault(service, []).append(process)
    return elapsed


def password_once(pam, service, env, answer=ALICE, expect_success=True, reset=None):
    if reset:
        reset()
    elapsed, _, run = timed_run(pam, service, [answer], env, unwrapped=True)
    if (run.code == 0) != expect_success or len(run.prompts()) != 1:
        raise BenchError(f"{service}: unexpected result: code {run.code}, messages {run.messages}")
    return elapsed


def sudo_script_once(world, stack, how):
    """A script's real sudo in a terminal (the pseudo-terminal is its
    controlling one), the password from a pipe (`-S`) or an askpass
    program (`-A`): spawn to exit, in microseconds. `stack` is written as
    the private /etc/pam.d/sudo first (ours, or sudo without localauth)."""
    (world.pamd / "sudo").write_text(stack)
    if how == "-S":
        command = f"echo {real_programs.PASSWORD} | sudo -S -k /usr/bin/id"
    else:
        command = f"SUDO_ASKPASS={world.base / 'askpass'} sudo -A -k /usr/bin/id"
    started = time.monotonic()
    argv = world.argv("sh", "-c", command)
    code, output = run_in_terminal([shutil.which(argv[0]), *argv[1:]], world.env())
    elapsed = time.monotonic() - started
    if code != 0 or real_programs.ID_ROOT not in output:
        raise BenchError(f"sudo {how} failed ({code}): {output}")
    return elapsed * 1_000_000


def script_sides(world):
    """Ours (the shipped sudo stack with the module, fprintd running with a
    finger enrolled) and sudo without localauth (the distribution's own
    stack), for a script's `sudo -S` and `sudo -A`."""
    ours = real_programs.stack_with_module("sudo", world.state, world.base / "localauth.conf")
    plain = Path("/etc/pam.d/sudo").read_text()
    askpass = world.base / "askpass"
    askpass.write_text(f"#!/bin/sh\necho {real_programs.PASSWORD}\n")
    askpass.chmod(0o755)
    return ours, plain


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


# ---------------------------------------------------------------- statistics and tables

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


# ---------------------------------------------------------------- footprint

def ldd(path):
    text = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    libs = []
    for line in text.splitlines():
        match = re.search(r"=> (/\S+)", line)
        if match:
            libs.append(match.group(1))
    return libs


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_once(module, cold):
    if cold:
        for path in [module] + ldd(module):
            drop_cache(path)
    proc = subprocess.run([str(LOADTIME), str(module)], capture_output=True, text=True, check=True)
    fields = dict(line.split(": ") for line in proc.stdout.splitlines())
    return int(fields["load_us"]), int(fields["rss_kb_added"])


def callgrind_instructions(pam, service, answers, env, rig=None):
    """Instructions (Ir) of one whole harness process under callgrind (a
    password unwrapped, as it is timed)."""
    log = pam.base / f"callgrind-{service}.log"
    wrapper = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}"]
    if rig:
        rig.feed([MATCH])
    run = run_harness(pam, service, answers, env, wrapper=wrapper, latency=False, timeout=300, unwrapped=rig is None)
    if rig:
        rig.feed_wait(timeout=60)
        rig.wait_until_claimable()
    if run.code != 0:
        raise BenchError(f"{service} under callgrind: code {run.code} {run.messages}")
    match = re.search(r"Collected\s*:\s*(\d+)", log.read_text())
    if not match:
        raise BenchError(f"no callgrind total in {log}")
    return int(match.group(1))


# ---------------------------------------------------------------- scale

def charge_processes(state, processes, each, users):
    """`processes` store probes at once, each charging `each` wrong passwords;
    one user for all, or one user each. -> (seconds, exact?)"""
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(mode=0o700)
    start = time.perf_counter()
    procs = []
    for i in range(processes):
        uid, name = (50000, "scaleuser") if users == "one" else (50000 + i, f"scaleuser{i}")
        procs.append(subprocess.Popen([str(RELEASE_PROBE), "charge", str(state), str(uid), name, str(each)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise BenchError(f"store probe failed: {err.decode()}")
    seconds = time.perf_counter() - start
    if users == "one":
        counts = [probe_count(state, 50000, "scaleuser")]
        exact = counts == [processes * each]
    else:
        counts = [probe_count(state, 50000 + i, f"scaleuser{i}") for i in range(processes)]
        exact = counts == [each] * processes
    return seconds, exact, sum(counts)


def probe_count(state, uid, name):
    proc = subprocess.run([str(RELEASE_PROBE), "inspect", str(state), str(uid), name], capture_output=True, text=True)
    match = re.search(r"P=(\d+)", proc.stdout)
    return int(match.group(1)) if match else -1


def populate_records(pam, count):
    """`count` other users' records beside alice's: copies of hers with
    another uid and name, resealed (and no lock files: users who are not
    prompting hold none)."""
    template = bytearray(current_slot(pam.record_path().read_bytes()))
    existing = len(list(pam.state.glob("6*.rec")))
    for i in range(existing, count):
        uid = 600000 + i
        name = f"u{i}".encode()
        slot = bytearray(template)
        struct.pack_into("<I", slot, OFFSET_UID, uid)
        struct.pack_into("<H", slot, OFFSET_NAME_LENGTH, len(name))
        slot[OFFSET_NAME:OFFSET_NAME + 255] = name + bytes(255 - len(name))
        struct.pack_into("<Q", slot, OFFSET_CHECKSUM, fnv1a64(bytes(slot[:OFFSET_CHECKSUM])))
        path = pam.state / f"{uid}.rec"
        path.write_bytes(bytes(slot) + bytes(SLOT_SIZE) + sync_mark(struct.unpack_from("<Q", slot, 1760)[0]))
        os.chmod(path, 0o600)


# ---------------------------------------------------------------- breakdown

CATEGORIES = [
    ("state store", lambda s, state, conf: str(state) in s),
    ("configuration", lambda s, state, conf: str(conf) in s or "localauth.conf" in s),
    ("D-Bus (fprintd, logind)", lambda s, state, conf: "system_bus_socket" in s or "no-system-bus" in s),
    ("passcode stack (PAM files, pam_matrix)", lambda s, state, conf: "/pam.d/" in s or "passdb" in s
     or "pam_matrix" in s),
]


def breakdown(pam, service, answers, env, rig=None):
    """Syscalls of one call under strace, by what they touch: count, and
    time spent inside them (-T). strace slows every syscall; read the counts
    and the long waits, not the sum."""
    trace = pam.base / f"strace-{service}.txt"
    wrapper = ["strace", "-f", "-T", "-yy", "-qq", "-o", str(trace)]
    if rig:
        rig.feed([MATCH])
    run = run_harness(pam, service, answers, env, wrapper=wrapper, unwrapped=rig is None)
    if rig:
        rig.feed_wait(timeout=30)
        rig.wait_until_claimable()
    if run.code != 0:
        raise BenchError(f"{service} under strace: code {run.code}")
    totals = {name: [0, 0.0] for name, _ in CATEGORIES}
    totals["other"] = [0, 0.0]
    waits = []
    bus_sockets = set()   # descriptors connected to the bus: strace names the path only at connect
    for line in trace.read_text().splitlines():
        match = re.search(r"<(\d+\.\d+)>$", line)
        if not match:
            continue
        seconds = float(match.group(1))
        call = re.match(r"^\d+\s+(\w+)\((\d+)?", line)
        fd = call.group(2) if call else None
        if call and call.group(1) == "connect" and ("system_bus_socket" in line or "no-system-bus" in line):
            bus_sockets.add(fd)
        name = "D-Bus (fprintd, logind)" if fd in bus_sockets else next(
            (n for n, test in CATEGORIES if test(line, pam.state, pam.conf)), "other")
        if call and call.group(1) == "close":
            bus_sockets.discard(fd)
        totals[name][0] += 1
        totals[name][1] += seconds
        call = re.sub(r"^\d+\s+", "", line).split("(")[0]
        waits.append((seconds, name, call))
    waits.sort(reverse=True)
    return run.elapsed_us, totals, waits[:6]


# ---------------------------------------------------------------- main

def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    memory = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} × {cpu}, {memory} GiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30, help="measured runs per side (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured rounds first (default 3)")
    parser.add_argument("--match-n", type=int, default=150,
                        help="measured matches per side (default 150: the rig's own time varies run to run)")
    parser.add_argument("--write", type=Path, help="put the report into this Markdown file between its markers")
    parser.add_argument("--quick", action="store_true", help="skip the 100 000-record and callgrind rows")
    opts = parser.parse_args()
    for need in (MODULE, HARNESS, PAM_FPRINTD, PAM_FAILLOCK, NOSYNC_MODULE, LOADTIME, RELEASE_PROBE):
        if not Path(need).exists():
            sys.exit(f"bench: {need} is missing (run `make bench`)")
    if os.geteuid() != 0:
        sys.exit("bench: run as root (the state directory must be root-owned)")

    base = Path(tempfile.mkdtemp(prefix="localauth-bench-"))
    base.chmod(0o755)   # the real sudo's test user runs the askpass program below it
    state_fs = subprocess.run(["df", "--output=fstype,source", str(base)], capture_output=True,
                              text=True).stdout.splitlines()[-1].split()
    try:
        pam = PamEnv(base)
        faillock_dir = base / "faillock"
        faillock_dir.mkdir(mode=0o700)
        write_services(pam, faillock_dir)
        n, warmup = opts.n, opts.warmup
        out(f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; state directory on {state_fs[0]} "
            f"({state_fs[1]}); N={n} per side after {warmup} warm-up rounds ({opts.match_n} for a match). "
            f"Command: `make bench` (tools/bench.py -n {n} --match-n {opts.match_n}).")
        out()
        with FprintRig() as rig:
            rig.enroll("alice")
            pam.password_entered("alice", rig)  # the finger is enough from here (a password this boot)
            whole = {}
            fp = interleaved(opts.match_n, warmup, [
                ("ours", lambda: fingerprint_once(pam, rig, "bench-ours", whole)),
                ("ref", lambda: fingerprint_once(pam, rig, "bench-fprintd", whole)),
            ])
            names = prompt_timings(pam, ["bob", "nosuchuser"], runs=n, warmup=warmup, env=rig.env(),
                                   service="bench-ours")
            pam.password_entered("alice", rig)
            match_breakdown = breakdown(pam, "bench-ours", [], rig.env(), rig)
            fprintd_breakdown = breakdown(pam, "bench-fprintd", [], rig.env(), rig)
            instructions = {}
            if not opts.quick:
                instructions["match ours"] = callgrind_instructions(pam, "bench-ours", [], rig.env(), rig)
                instructions["match fprintd"] = callgrind_instructions(pam, "bench-fprintd", [], rig.env(), rig)
            # A script's sudo, against sudo without localauth: fprintd
            # runs and the user has a finger, yet nothing waits for it.
            (base / "sudo-world").mkdir(mode=0o755)
            sudo_world = real_programs.World(base / "sudo-world", rig)
            sudo_world.password_entered()
            ours_stack, plain_stack = script_sides(sudo_world)
            scripts = {how: interleaved(max(5, n // 3), 1, [
                ("ours", lambda how=how: sudo_script_once(sudo_world, ours_stack, how)),
                ("ref", lambda how=how: sudo_script_once(sudo_world, plain_stack, how)),
            ]) for how in ("-S", "-A")}
            rig.stop_fprintd()
            env = rig.env()  # a system bus without fprintd, as on a machine without a reader
            faillock_tally = faillock_dir / "alice"

            def reset_ours():
                path = pam.record_path()
                path.write_bytes(reseal_record(path.read_bytes(), P=0, backoff_ms=0))

            def reset_faillock():
                if faillock_tally.exists():
                    faillock_tally.write_bytes(b"")

            right = interleaved(n, warmup, [
                ("ours", lambda: password_once(pam, "bench-ours", env)),
                ("nosync", lambda: password_once(pam, "bench-nosync", env)),
                ("ref", lambda: password_once(pam, "bench-faillock", env)),
            ])
            wrong = interleaved(n, warmup, [
                ("ours", lambda: password_once(pam, "bench-ours", env, "wrong", False, reset_ours)),
                ("nosync", lambda: password_once(pam, "bench-nosync", env, "wrong", False, reset_ours)),
                ("ref", lambda: password_once(pam, "bench-faillock", env, "wrong", False, reset_faillock)),
            ])
            password_breakdown = breakdown(pam, "bench-ours", [ALICE], env)
            faillock_breakdown = breakdown(pam, "bench-faillock", [ALICE], env)
            if not opts.quick:
                instructions["password ours"] = callgrind_instructions(pam, "bench-ours", [ALICE], env)
                instructions["password faillock"] = callgrind_instructions(pam, "bench-faillock", [ALICE], env)
            # Cost per prompt with other users' records on disk.
            per_records = {}
            for count in ([1, 1000] if opts.quick else [1, 1000, 100_000]):
                populate_records(pam, count - 1)
                samples = [password_once(pam, "bench-ours", env) for _ in range(warmup + n)][warmup:]
                per_records[count] = samples
        loads = interleaved(n, 1, [
            ("ours", lambda: load_once(MODULE, False)),
            ("fprintd", lambda: load_once(PAM_FPRINTD, False)),
            ("faillock", lambda: load_once(PAM_FAILLOCK, False)),
        ])
        cold = interleaved(max(5, n // 3), 0, [
            ("ours", lambda: load_once(MODULE, True)),
            ("fprintd", lambda: load_once(PAM_FPRINTD, True)),
            ("faillock", lambda: load_once(PAM_FAILLOCK, True)),
        ])
        scale = []
        for users in ("one", "many"):
            for processes in (1, 8, 32, 128):
                each = max(5, 640 // processes)
                seconds, exact, total = charge_processes(base / "scale", processes, each, users)
                scale.append((users, processes, each, seconds, exact, total))
        shutil.rmtree(base / "scale", ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    ratios = {}
    out("### Latency: ours / theirs")
    out()
    table_header()
    ratios["match"] = ratio_row("fingerprint match, `pam_authenticate`", fp["ours"], fp["ref"],
                                "pam_fprintd.so (libpam-fprintd)")
    ratio_row("fingerprint match, whole client process", whole["bench-ours"][-opts.match_n:],
              whole["bench-fprintd"][-opts.match_n:], "pam_fprintd.so, same client")
    batches = [statistics.median(fp["ours"][i:i + 30]) / statistics.median(fp["ref"][i:i + 30])
               for i in range(0, len(fp["ours"]) - 29, 30)]
    ratios["password"] = ratio_row("correct password (durable)", right["ours"], right["ref"],
                                   "pam_faillock ×3 + pam_matrix (no fsync)")
    ratios["password-nosync"] = ratio_row("correct password, benchmark build without sync", right["nosync"],
                                          right["ref"], "pam_faillock ×3 + pam_matrix")
    ratio_row("wrong password (durable)", wrong["ours"], wrong["ref"], "pam_faillock ×3 + pam_matrix (no fsync)")
    ratio_row("wrong password, benchmark build without sync", wrong["nosync"], wrong["ref"],
              "pam_faillock ×3 + pam_matrix")
    ratio_row("a script's `sudo -S` (password piped, in a terminal), whole run", scripts["-S"]["ours"], scripts["-S"]["ref"],
              "the real sudo without localauth (pam_unix)")
    ratio_row("a script's `sudo -A` (an askpass program), whole run", scripts["-A"]["ours"], scripts["-A"]["ref"],
              "the real sudo without localauth (pam_unix)")
    durability = statistics.median(right["ours"]) - statistics.median(right["nosync"])
    out()
    if batches:
        out(f"The match ratio in consecutive batches of 30: {', '.join(f'{b:.2f}×' for b in batches)}: the rig's own "
            f"time (fprintd, the virtual device, the feeder) varies from batch to batch far more than either module.")
        out()
    out(f"The price of durability (correct password, ours minus the build without sync): "
        f"{durability / 1000:.3f} ms; wrong password: "
        f"{(statistics.median(wrong['ours']) - statistics.median(wrong['nosync'])) / 1000:.3f} ms. "
        f"pam_faillock writes its tally without fsync, so a crash can lose its failures.")
    out()
    out("Unknown user names must not be told apart by time: a known user without a finger vs a name no "
        "account has, one wrong password each, fprintd running:")
    out()
    out("| | known, median ms | unknown, median ms | ratio |")
    out("|---|---|---|---|")
    for which, label in ((0, "time to the first prompt"), (1, "whole call")):
        known = statistics.median(pair[which] for pair in names["bob"]) / 1000
        unknown = statistics.median(pair[which] for pair in names["nosuchuser"]) / 1000
        out(f"| {label} | {known:.2f} | {unknown:.2f} | {unknown / known:.2f}× |")

    out()
    out("### Footprint: ours / theirs")
    out()
    sizes = {"ours": MODULE.stat().st_size, "fprintd": PAM_FPRINTD.stat().st_size,
             "faillock": PAM_FAILLOCK.stat().st_size}
    out("| what | ours | pam_fprintd.so | pam_faillock.so | ours / pam_fprintd | ours / pam_faillock |")
    out("|---|---|---|---|---|---|")
    out(f"| module file (bytes) | {sizes['ours']} | {sizes['fprintd']} | {sizes['faillock']} | "
        f"{sizes['ours'] / sizes['fprintd']:.2f}× | {sizes['ours'] / sizes['faillock']:.2f}× |")
    for label, samples in (("first load, warm cache (µs, median)", loads), ("first load, cold file (µs, median)", cold)):
        med = {k: statistics.median(v[0] for v in samples[k]) for k in samples}
        ratios.setdefault("load", med["ours"] / med["fprintd"])
        out(f"| {label} | {med['ours']:.0f} | {med['fprintd']:.0f} | {med['faillock']:.0f} | "
            f"{med['ours'] / med['fprintd']:.2f}× | {med['ours'] / med['faillock']:.2f}× |")
    rss = {k: statistics.median(v[1] for v in loads[k]) for k in loads}
    out(f"| RSS added by loading (KiB, median) | {rss['ours']:.0f} | {rss['fprintd']:.0f} | {rss['faillock']:.0f} | "
        f"{rss['ours'] / max(rss['fprintd'], 1):.2f}× | {rss['ours'] / max(rss['faillock'], 1):.2f}× |")
    if instructions:
        out(f"| instructions, whole client process, one match (callgrind Ir) | {instructions['match ours']:,} | "
            f"{instructions['match fprintd']:,} | – | {instructions['match ours'] / instructions['match fprintd']:.2f}× | – |")
        out(f"| instructions, whole client process, one correct password | {instructions['password ours']:,} | – | "
            f"{instructions['password faillock']:,} | – | "
            f"{instructions['password ours'] / instructions['password faillock']:.2f}× |")
    out()
    out("Loading is `dlopen(RTLD_NOW)` in a fresh process already linked to libpam (tools/loadtime.c); "
        "cold: the module and its libraries dropped from the page cache with posix_fadvise (pages that "
        "other processes map stay resident).")

    out()
    out("### Scale")
    out()
    out("Failures recorded per second by concurrent processes (the store probe, release build: the "
        "module's own ledger and store, one wrong-password charge per transaction, each on disk before it "
        "returns):")
    out()
    out("| users | processes | charges each | seconds | charges / s | counts on disk exact |")
    out("|---|---|---|---|---|---|")
    ratios["exact"] = True
    for users, processes, each, seconds, exact, total in scale:
        ratios["exact"] = ratios["exact"] and exact
        out(f"| {'one' if users == 'one' else 'one each'} | {processes} | {each} | {seconds:.2f} | "
            f"{total / seconds:.0f} | {'yes' if exact else 'NO'} ({total}) |")
    out()
    out("Correct password with other users' records in the state directory:")
    out()
    out("| records on disk | N | median ms | p90 ms | ratio to 1 record |")
    out("|---|---|---|---|---|")
    one = statistics.median(per_records[1])
    for count, samples in per_records.items():
        out(f"| {count:,} | {len(samples)} | {statistics.median(samples) / 1000:.2f} | {p90(samples) / 1000:.2f} | "
            f"{statistics.median(samples) / one:.2f}× |")

    out()
    out("### Where the time goes")
    out()
    out("One call each under `strace -f -T` (which slows every system call, so read the counts and the long "
        "waits, not the sums): system calls by what they touch, and the time spent inside them.")
    for title, (elapsed, totals, waits) in (("fingerprint match, ours", match_breakdown),
                                            ("fingerprint match, pam_fprintd", fprintd_breakdown),
                                            ("correct password, ours", password_breakdown),
                                            ("correct password, pam_faillock", faillock_breakdown)):
        out()
        out(f"{title} ({elapsed / 1000:.2f} ms under strace):")
        out()
        out("| touches | system calls | ms inside them |")
        out("|---|---|---|")
        for name, (count, seconds) in totals.items():
            if count:
                out(f"| {name} | {count} | {seconds * 1000:.2f} |")
        out(f"| longest | {', '.join(f'{call} {seconds * 1000:.2f} ms ({name})' for seconds, name, call in waits[:4])} | |")

    out()
    out("### Targets")
    out()
    out("| target | measured | met |")
    out("|---|---|---|")
    out(f"| match ≤ 0.9× pam_fprintd | {ratios['match']:.2f}× | {'yes' if ratios['match'] <= 0.9 else 'no'} |")
    out(f"| correct password ≤ 1.0× pam_faillock at equal durability (the build without sync) | "
        f"{ratios['password-nosync']:.2f}× (durable: {ratios['password']:.2f}×) | "
        f"{'yes' if ratios['password-nosync'] <= 1.0 else 'no'} |")
    out(f"| module < 200 KB | {sizes['ours'] / 1000:.0f} KB | {'yes' if sizes['ours'] < 200_000 else 'no'} |")
    out(f"| first load ≤ 1.5× pam_fprintd (warm) | {ratios['load']:.2f}× | {'yes' if ratios['load'] <= 1.5 else 'no'} |")
    out(f"| exact counts at 128 concurrent processes | {'exact' if ratios['exact'] else 'NOT exact'} | "
        f"{'yes' if ratios['exact'] else 'no'} |")

    if opts.write:
        text = opts.write.read_text() if opts.write.exists() else "<!-- bench:begin -->\n<!-- bench:end -->\n"
        begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
        if begin not in text or end not in text:
            sys.exit(f"bench: {opts.write} has no {begin} ... {end} markers")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        opts.write.write_text(head + begin + "\n" + "\n".join(REPORT) + "\n" + end + tail)
        print(f"\nwritten to {opts.write}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench: {e}")
