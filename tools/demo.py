#!/usr/bin/env python3
"""The demonstration: the real pam_localauth.so in real libpam (pam_wrapper)
against a real fprintd with libfprint's virtual fingerprint device, for the
test user alice, printing each conversation as a terminal user sees it: the
password first after a boot; a match; three misses then the password; the lockout after five misses and
its unlock by the password; touch or type (the password typed while the
reader waits); logind reporting the lid closed and the screen
locked; then the password's own back-off; then two
apps over the LocalAuthentication library (Examples/) and `localauth
evaluate`, run as an unprivileged user through the setuid helper in a
private mount namespace."""
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from fprint_rig import FprintRig  # noqa: E402
from logind_mock import LogindMock, Session  # noqa: E402
from pamenv import PASSWORDS, PamEnv, build, localauth_command, parse_run, run_in_terminal, swift_bin  # noqa: E402
from private_world import PrivateWorld  # noqa: E402
from terminal import TerminalSession  # noqa: E402

NAMES = {0: "PAM_SUCCESS", 7: "PAM_AUTH_ERR", 19: "PAM_CONV_ERR", 9: "PAM_AUTHINFO_UNAVAIL", 25: "PAM_IGNORE"}


def show(title, run, answers, scans=()):
    print(f"\n$ {title}")
    if scans:
        print("  (the virtual sensor is fed: " + ", ".join(scans) + ")")
    typed = iter(answers)
    for style, text in run.messages:
        if style.startswith("prompt"):
            answer = next(typed, None)
            shown = "" if answer is None else ("*" * len(answer) if style == "prompt-off" else answer)
            print(f"  {text}{shown}" + ("   [Enter]" if answer == "" else "") + ("   [Ctrl-D]" if answer is None else ""))
        elif style in ("info", "error"):
            print(f"  {text}")
    print(f"  -> {NAMES.get(run.code, run.code)}")


def on_terminal(pam, rig, answers=(), typed=(), scans=()):
    """One sudo prompt, the harness on a terminal of its own named as
    PAM_TTY, as sudo runs: `answers` go to its conversation's prompts,
    `typed` is typed on the terminal when a line ends with ":" (while the
    reader waits), `scans` are fed to the reader."""
    if scans:
        rig.feed(list(scans))
    _, output = run_in_terminal(lambda: pam.harness_args("sudo", "alice", answers, tty=os.ttyname(0)),
                                pam.env(rig.env()), typed)
    if scans:
        rig.feed_wait(timeout=30)
    return parse_run(output)


def fingerprint_part(pam, rig):
    good = PASSWORDS["alice"]
    match, miss = "SCAN finger-alice", "SCAN some-other-finger"

    def prompt(title, answers, scans):
        run = on_terminal(pam, rig, answers=answers, scans=scans)
        show(title, run, answers, [s.replace("SCAN ", "") for s in scans])
        return run

    print("\n== fingerprint first (sudo in a terminal) ==")
    prompt("sudo -v   # restart: the first prompt of a boot asks the password first", [good], [])
    prompt("sudo -v   # alice's finger", [], [match])
    prompt("sudo -v   # three misses, then the password", [good], [miss] * 3)
    prompt("sudo -v   # three misses and a wrong password", ["wrong"], [miss] * 3)
    prompt("sudo -v   # the next prompt allows two more", ["wrong again"], [miss] * 2)
    record = pam.record()
    print(f"\n  on disk: F={record.F} (locked at 5) P={record.P}")
    prompt("sudo -v   # locked: the sensor is skipped, only the password unlocks", [good], [])
    record = pam.record()
    print(f"\n  on disk: F={record.F} P={record.P}")
    prompt("sudo -v   # the finger works again", [], [match])


def touch_or_type_part(pam, rig):
    """The harness as the session leader of a terminal of its own, naming
    it as PAM_TTY, as sudo does: the module reads the keys while the reader
    waits."""
    good = PASSWORDS["alice"]

    def prompt(title, typed, scans):
        show(title, on_terminal(pam, rig, typed=typed, scans=scans), [], [scan.replace("SCAN ", "") for scan in scans])
        if typed:
            print(f"  (typed while the reader waited, nothing shown: {'*' * len(typed[0])} and Enter)")

    print("\n== touch or type (sudo on its own terminal) ==")
    prompt("sudo -v   # the password typed at once, while the reader waits", [good], [])
    prompt("sudo -v   # a touch", [], ["SCAN finger-alice"])


def lid_part(pam, rig):
    """logind (python-dbusmock's template on the rig's bus) reports the lid."""
    if not Session.available():
        print("\n(no cgroup2 hierarchy at /sys/fs/cgroup/unified: the logind part is skipped)")
        return
    good = PASSWORDS["alice"]
    print("\n== whose touch: logind on the system bus (mocked), alice's active session on seat0 ==")
    with LogindMock(rig) as logind:
        session = logind.add_session("demo1", 1001, "alice")
        logind.set_lid(True)
        show("sudo -v   # lid closed: the password", pam.run(answers=[good], env=rig.env(), wrapper=session.prefix()), [good])
        logind.set_lid(False)
        rig.feed(["SCAN finger-alice"])
        run = pam.run(answers=[], env=rig.env(), wrapper=session.prefix())
        rig.feed_wait(timeout=30)
        show("sudo -v   # lid open again: the finger", run, [], ["finger-alice"])
        logind.set_locked("demo1", True)
        show("sudo -v   # the screen is locked: the touch is the locker's, sudo gets the password",
             pam.run(answers=[good], env=rig.env(), wrapper=session.prefix()), [good])


def app_part(rig, base):
    """The examples on a terminal, as appuser, through localauth-helper."""
    user, uid, password = "appuser", 4320, "app-pw-7"
    rig.enroll(user)
    world = PrivateWorld(base, rig, users={user: (uid, password)})
    match, miss = f"SCAN finger-{user}", "SCAN some-other-finger"

    def session(title, command, steps, scans=()):
        print(f"\n$ {title}")
        if scans:
            print("  (the virtual sensor is fed: " + ", ".join(s.replace("SCAN ", "") for s in scans) + ")")
        if scans:
            rig.feed(list(scans))
        argv = world.argv(*command, uid=uid)
        argv[0] = "/usr/bin/unshare"
        term = TerminalSession(argv, world.env(user))
        try:
            for wait_for, keys in steps:
                if callable(wait_for):
                    wait_for()
                else:
                    term.expect(wait_for)
                if keys:
                    term.send(keys)
            code = term.wait()
        finally:
            term.close()
        if scans:
            rig.feed_wait(timeout=30)
        typed = {"\r": "[Enter]", "\x03": "[Ctrl-C]"}
        for line in term.text.splitlines():
            if line.strip():
                print("  " + line.replace(password, "*" * len(password)))
        print(f"  (keys: {' '.join(typed.get(k, '<typed>') for _, k in steps if k)}) -> exit {code}")
        if "open sesame" in term.text:
            print("  (the vault's own password is the app's business: the example reads it with echo on)")
        record = world.record(uid)
        print(f"  on disk: F={record.F if record else 0} P={record.P if record else 0}")

    print("\n== apps: LocalAuthentication for Linux (Examples/), as appuser through localauth-helper ==")
    world.password_entered(user)
    print("  (appuser has typed the password once since this boot, so the finger is enough)")
    try:
        from fprint_rig import FPRINT_NAME, _Client
        listener = _Client(rig.bus_address)
        seen = []
        listener.subscribe(FPRINT_NAME, None, None, None, lambda s, p, i, m, a: seen.append((m, a)))

        def reader_waits(times):
            return lambda: listener.pump(lambda: sum(m == "VerifyFingerSelected" for m, _ in seen) >= times, 20)

        def fresh():
            """Forget the signals of the run before (read what is queued first)."""
            listener.pump(lambda: False, 0.3)
            seen.clear()
        try:
            session("localauth-example-payment 12.50   # the sheet: the reader at once, only Cancel; the finger",
                    [swift_bin() / "localauth-example-payment", "12.50 EUR"], [("confirmed", None)], [match])
            fresh()
            session("localauth-example-payment   # a miss offers the app's fallback title; Enter, then the password",
                    [swift_bin() / "localauth-example-payment"],
                    [("[Enter: Use Password]", None), (reader_waits(2), "\r"), ("Use Password:", password + "\r"),
                     ("confirmed", None)], [miss])
            fresh()
            session("localauth-example-fingerprint-only   # the fallback hidden (empty title): three misses end it",
                    [swift_bin() / "localauth-example-fingerprint-only"], [("not approved", None)], [miss] * 3)
            fresh()
            session("localauth-example-wrapper   # four callbacks: success",
                    [swift_bin() / "localauth-example-wrapper"], [("success:", None)], [match])
            fresh()
            session("localauth-example-unlock   # biometrics only: a miss, Enter for the app's own password",
                    [swift_bin() / "localauth-example-unlock"],
                    [("[Enter: Enter Vault Password]", None), (reader_waits(2), "\r"),
                     ("Vault password:", "open sesame\r"), ("unlocked", None)], [miss])
        finally:
            listener.close()
        print("\n$ localauth evaluate --policy biometrics --non-interactive --json   # never asks")
        import subprocess
        proc = subprocess.run(world.argv(localauth_command(), "evaluate", "--policy", "biometrics", "--non-interactive", "--json",
                                         uid=uid), env=world.env(user), capture_output=True, text=True, timeout=60)
        print(f"  {proc.stdout.strip()} -> exit {proc.returncode}")
    finally:
        world.close()


def main():
    build()
    with tempfile.TemporaryDirectory(prefix="localauth-demo-") as base, FprintRig() as rig:
        rig.enroll("alice")
        pam = PamEnv(Path(base))
        pam.write_owner_stack("sudo", args="mode=terminal passcode_backoff=5:3s,6:1m")
        print("localauth demonstration: service sudo, user alice, policy owner,")
        print("a real fprintd with libfprint's virtual device, the password checked by pam_matrix")
        fingerprint_part(pam, rig)
        touch_or_type_part(pam, rig)
        lid_part(pam, rig)
        rig.stop_fprintd()
        print("\n== the password's back-off (fprintd stopped; shortened to 3 s for the demonstration) ==")
        good = PASSWORDS["alice"]
        run = pam.run(answers=[good])
        show("sudo -v   # the right password", run, [good])
        for attempt in range(5):
            wrong = f"guess{attempt}"
            show(f"sudo -v   # wrong password {attempt + 1}", pam.run(answers=[wrong]), [wrong])
        record = pam.record()
        print(f"\n  on disk: F={record.F} P={record.P} wait={record.backoff_ms / 1000:.0f} s")
        show("sudo -v   # refused without asking", pam.run(answers=[good]), [])
        print("\n  ... waiting for the back-off to end ...")
        deadline = time.monotonic() + 15
        while not (run := pam.run(answers=[good])).prompts() and time.monotonic() < deadline:
            time.sleep(0.25)
        show("sudo -v   # the right password after the wait", run, [good])
        record = pam.record()
        print(f"\n  on disk: F={record.F} P={record.P}")
        show("sudo -v   # Enter on an empty line cancels, nothing counted", pam.run(answers=[""]), [""])
        show("login nosuchuser   # unknown users look like users without a fingerprint",
             pam.run(user="nosuchuser", answers=["guess"]), ["guess"])
        rig.start_fprintd()
        apps = Path(base) / "apps"
        apps.mkdir()
        os.chmod(apps, 0o755)
        app_part(rig, apps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
