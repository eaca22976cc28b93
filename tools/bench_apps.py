"""The setuid helper's side of the benchmark, in a private world
(tests/support/private_world.py) on the benchmark's rig: a secret released
by a touch (`localauth secret load`) against the same touch with no secret
(`localauth evaluate`), each a whole run at a terminal; and a password
typed at a screen locker's prompt, which reaches the module as the user
and so goes through the helper, against the same prompt in a process of
root's, where the module decides by itself: what every prompt would pay if
the module handed all of them to the helper."""
import shlex
import subprocess
import time

from bench_sides import BenchError
from sentences import PASSCODE_PROMPT  # the module's own, not pam_unix's "Password: "
from pamenv import HARNESS, localauth_command, parse_run
from private_world import PrivateWorld
from terminal import TerminalSession

USER, UID, PASSWORD = "secretbench", 4391, "secret-bench-pw"
ITEM = "bench-item"
MATCH = f"SCAN finger-{USER}"   # the print the rig enrolls for USER


# A screen locker the module serves (a service name it does not know it
# leaves to the next line: pam_unix would answer, not the helper).
LOCKER = "i3lock"


def app_world(base, rig):
    """A private world with one user, their finger enrolled, a password
    entered this boot and one secret stored (its key made with the
    password, typed at a terminal); and a screen locker's stack."""
    world = PrivateWorld(base, rig, users={USER: (UID, PASSWORD)})
    try:
        world.write_locker_stack(LOCKER)
        rig.enroll(USER)
        world.password_entered()
        store = " ".join(shlex.quote(str(part)) for part in (localauth_command(), "secret", "store", ITEM))
        session = terminal(world, f"printf %s {shlex.quote('the value')} | {store}")
        try:
            session.expect("Enter Password")
            session.send(PASSWORD + "\r")
            if session.wait(timeout=60) != 0:
                raise BenchError(f"the first secret was not stored: {session.text}")
        finally:
            session.close()
    except BaseException:
        world.close()
        raise
    return world


def terminal(world, shell):
    argv = world.argv("/bin/sh", "-c", shell, uid=UID)
    argv[0] = "/usr/bin/unshare"
    return TerminalSession(argv, world.env(USER))


def touched_once(world, rig, *command):
    """`localauth COMMAND` at a terminal with the matching scan fed on
    fprintd's cue: spawn to exit, in microseconds."""
    rig.feed([MATCH])
    line = " ".join(shlex.quote(str(part)) for part in (localauth_command(), *command))
    started = time.monotonic()
    session = terminal(world, line)
    try:
        elapsed = session.seconds_to_end(started, 60)
        code = session.wait(timeout=10)
    finally:
        session.close()
    report = rig.feed_wait(timeout=30)
    rig.wait_until_claimable()
    if code != 0 or not report.ok:
        raise BenchError(f"localauth {' '.join(command)} failed ({code}): {session.text} feed {report}")
    return elapsed * 1_000_000


def secret_sides(world, rig):
    return [
        ("ours", lambda: touched_once(world, rig, "secret", "load", ITEM)),
        ("ref", lambda: touched_once(world, rig, "evaluate")),
    ]


def locker_password_once(world, as_user):
    """One correct password at the locker's stack (fprintd not running):
    pam_authenticate's own time, through the helper when `as_user`."""
    argv = world.argv(HARNESS, "-s", LOCKER, "-u", USER, "-a", PASSWORD, "-L", uid=UID if as_user else None)
    proc = subprocess.run(argv, env=world.env(USER), capture_output=True, text=True, timeout=60)
    run = parse_run(proc.stdout, proc.stderr)
    if run.code != 0 or run.elapsed_us is None or run.prompts() != [PASSCODE_PROMPT]:
        raise BenchError(f"the locker's password ({'the user' if as_user else 'root'}), not the module's prompt or "
                         f"no success: code {run.code}, messages {run.messages}: {proc.stderr}")
    return run.elapsed_us


def helper_password_sides(world):
    return [
        ("ours", lambda: locker_password_once(world, as_user=True)),
        ("ref", lambda: locker_password_once(world, as_user=False)),
    ]
