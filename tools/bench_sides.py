"""The sides of the benchmark: the private PAM world's service files (ours,
pam_fprintd's, pam_faillock's), one timed run of each kind through the
libpam harness, and the floor a match is measured against
(tools/matchfloor.c: fprintd's minimal sequence and nothing else)."""
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "tests" / "programs")]
from fprint_rig import BusMonitor  # noqa: E402
from pamenv import MODULE, PAM_FPRINTD, PAM_MATRIX, PAM_MODULE_DIR, PASSWORDS, parse_run, run_in_terminal  # noqa: E402
from terminal import TerminalSession  # noqa: E402

import test_real_programs as real_programs  # noqa: E402  (the real sudo's private world)

MATCH = "SCAN finger-alice"
ALICE = PASSWORDS["alice"]
PAM_FAILLOCK = PAM_MODULE_DIR / "pam_faillock.so"
NOSYNC_MODULE = ROOT / ".build" / "bench-nosync" / "pam_localauth.so"
LOADTIME = ROOT / ".build" / "bench" / "loadtime"
MATCH_FLOOR = ROOT / ".build" / "bench" / "matchfloor"
RELEASE_PROBE = ROOT / ".build" / "bench-probe" / "release" / "la-store-probe"
# No back-off within a benchmark's wrong passwords; the attempts are still
# charged and counted exactly as in production.
BENCH_ARGS = "mode=terminal passcode_backoff=1000:1s"


class BenchError(RuntimeError):
    pass



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


def reader_ready(report, started_us, side):
    """Microseconds from a side's start (pam_authenticate's call, or the
    floor's first step) to fprintd's VerifyFingerSelected, the signal it
    sends once VerifyStart has the reader scanning, as the rig saw it: both
    on CLOCK_MONOTONIC, the rig's reaction in every side alike."""
    if started_us is None or not report.selected_at:
        raise BenchError(f"{side}: no start time or no VerifyFingerSelected ({report})")
    return report.selected_at[0] * 1e6 - started_us


def fingerprint_once(pam, rig, service, whole=None, ready=None):
    rig.feed([MATCH])
    elapsed, process, run = timed_run(pam, service, [], rig.env())
    report = rig.feed_wait(timeout=30)
    if run.code != 0 or run.prompts() or not report.ok:
        raise BenchError(f"{service}: not a fingerprint match: code {run.code}, messages {run.messages}, "
                         f"feed {report}")
    rig.wait_until_claimable()  # pam_fprintd leaves its claim to fprintd; outside the measured window
    if whole is not None:
        whole.setdefault(service, []).append(process)
    if ready is not None:
        ready.setdefault(service, []).append(reader_ready(report, run.started_us, service))
    return elapsed


def floor_once(rig, device, whole=None, ready=None, enrolled=False, rules=None):
    """One match by tools/matchfloor.c on the same rig: its own elapsed
    time (bus opened to Release answered), like pam_authenticate's. With
    `enrolled` it asks which device holds the prints first (the side is
    then "floor+enrolled"); with `rules` (a state file on the module's
    file system) it also asks logind and charges the attempt on disk
    ("floor+rules")."""
    side, flags = ("floor+rules", ["--rules", str(rules)]) if rules else \
        ("floor+enrolled", ["--enrolled"]) if enrolled else ("floor", [])
    rig.feed([MATCH])
    start = time.perf_counter()
    proc = subprocess.run([str(MATCH_FLOOR), *flags, device, "alice"],
                          env={**os.environ, **rig.env()}, capture_output=True, text=True, timeout=60)
    process = (time.perf_counter() - start) * 1e6
    report = rig.feed_wait(timeout=30)
    fields = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    if proc.returncode != 0 or fields.get("result") != "verify-match" or not report.ok:
        raise BenchError(f"the match floor: not a match ({proc.returncode}): {proc.stdout}{proc.stderr} feed {report}")
    rig.wait_until_claimable()
    if whole is not None:
        whole.setdefault(side, []).append(process)
    if ready is not None:
        ready.setdefault(side, []).append(reader_ready(report, int(fields["started_us"]), "the match floor"))
    return int(fields["elapsed_us"])


def ask_once(env):
    """tools/matchfloor.c --ask: a new bus connection and fprintd asked for
    its devices, what every prompt that looks for a reader pays."""
    proc = subprocess.run([str(MATCH_FLOOR), "--ask"], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    fields = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    if proc.returncode != 0 or "elapsed_us" not in fields:
        raise BenchError(f"matchfloor --ask failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return int(fields["elapsed_us"])


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


def typed_while_waiting_once(world, rig, stack, reader):
    """A person's sudo at its terminal, `stack` as the private
    /etc/pam.d/sudo. With the module (`reader`), the reader waits (its
    instruction shown and fprintd's VerifyStart seen on the bus) and the
    password is typed; without it, sudo's own password prompt is answered.
    -> microseconds from the Enter to the end of sudo (its terminal closed):
    what the person waits for once they have typed."""
    (world.pamd / "sudo").write_text(stack)
    argv = world.argv("sudo", "-k", "/usr/bin/id")
    session = TerminalSession([shutil.which(argv[0]), *argv[1:]], world.env())
    try:
        if reader:
            with BusMonitor(rig) as monitor:
                session.expect(real_programs.INSTRUCTION)
                monitor.wait_for("VerifyStart")
        else:
            session.expect("password for")
        started = time.monotonic()
        session.send(real_programs.PASSWORD + "\n")
        elapsed = session.seconds_to_end(started, 10)
        code = session.wait(timeout=10)
    finally:
        session.close()
        rig.wait_until_claimable()
    if code != 0 or real_programs.ID_ROOT not in session.text:
        raise BenchError(f"sudo with the password typed failed ({code}): {session.text}")
    return elapsed * 1_000_000
