"""Apps through the LocalAuthentication library and `localauth evaluate`,
end to end as an unprivileged user in a private mount namespace
(tests/support/private_world.py): the real setuid helper, the rig's fprintd with
libfprint's virtual device, and real pam_unix against a private shadow.

The apps are the shipped examples (Examples/, on a terminal, the library's
default presenter: the payment flow with its own fallback title, the
fingerprint-only flow with the fallback hidden, the four-callback wrapper,
the vault that takes the fallback itself), la-app-probe (a scripted
presenter: the GUI case, with signals standing for its buttons and for
invalidate()), and `localauth evaluate`. All of them get Apple's sheet: the
reader at once, Cancel from the start, the fallback only after a miss. Their
failures count in the record that sudo's stack reads, through the module as
root.
"""
import json
import os
import re
import signal
import socket
import subprocess
import termios

import pytest

from fprint_rig import FPRINT_NAME, _Client
from helper_wire import CLIENT_HELLO, HELLO, REQUEST, converse, frame, read_frame, request
from logind_mock import CGROUP_ROOT, Session
from pamenv import HARNESS, ROOT, later_boot_clock, localauth_command, parse_run, swift_bin
from private_world import HELPER_PATH
from terminal import TerminalSession
from sentences import LOCKED
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)")

USER, UID, PASSWORD = "appuser", 4320, "app-pw-7"
BARE, BARE_UID, BARE_PASSWORD = "bareuser", 4321, "bare-pw-8"   # no enrolled finger
MATCH, MISS = f"SCAN finger-{USER}", "SCAN finger-nobody"

rig = shared_rig(enroll=USER)
world = shared_world("apps", users={USER: (UID, PASSWORD), BARE: (BARE_UID, BARE_PASSWORD)},
                     prepare=lambda world: world.write_locker_stack("sudo"))


@pytest.fixture
def w(world, rig):
    world.clear_state()
    world.password_entered()  # the first password of this boot: the finger is enough now
    yield world
    rig.wait_until_claimable(USER, timeout=10)


def program(name):
    return str(swift_bin() / name)


def terminal(w, *command, uid=UID, user=USER):
    argv = w.argv(*command, uid=uid)
    argv[0] = "/usr/bin/unshare"
    return TerminalSession(argv, w.env(user))


def probe(w, *args, uid=UID, user=USER, session=None, prefix=()):
    """la-app-probe as the user; `session` puts it in that logind session
    (by cgroup, which is all logind's session of a process is)."""
    return subprocess.Popen([*prefix, *w.argv(program("la-app-probe"), *args, uid=uid)], env=w.env(user),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=session.enter if session else None)


def read_until(proc, wanted, lines):
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if lines[-1].startswith(wanted):
            return lines[-1]
    raise AssertionError(f"{wanted!r} not seen: {lines}")


def finish(proc, lines):
    out, err = proc.communicate(timeout=60)
    lines += out.splitlines()
    return proc.returncode, lines, err


def watcher(rig):
    listener = _Client(rig.bus_address)
    seen = []
    listener.subscribe(FPRINT_NAME, None, None, None, lambda s, p, i, m, a: seen.append((m, a)))
    return listener, seen


def reader_waiting(listener, seen, times):
    """Until fprintd has started its `times`-th verification."""
    assert listener.pump(lambda: sum(m == "VerifyFingerSelected" for m, _ in seen) >= times, 20), seen


def miss_then_fallback(rig, session, title):
    """On the sheet: one miss, the fallback offered under `title`, and Enter
    once the reader waits again. -> the session."""
    listener, seen = watcher(rig)
    rig.feed([MISS])
    try:
        session.expect("Fingerprint not recognized. Try again.")
        session.expect(f"[Enter: {title}]")
        assert rig.feed_wait(timeout=30).ok
        reader_waiting(listener, seen, 2)
        session.send("\r")
    except BaseException:
        session.close()
        raise
    finally:
        listener.close()
    return session


def stop_gives_the_attempt_back(w, rig, stop):
    """`stop(attempt)` stops an evaluation while the reader waits (and checks
    how it ended): the pending attempt is given back. The stop's timing proof
    can be denied by load (the log then says so): the attempt stays charged,
    and the stop runs again, up to three times."""
    for attempt in range(3):
        mark = w.syslog.mark()
        stop(attempt)
        rig.wait_until_claimable(USER, timeout=10)
        if w.counts(UID) == (0, 0):
            return
        assert w.counts(UID) == (1, 0) and w.syslog.charged_only_by_the_stops_delay(mark), (w.counts(UID), w.syslog.since(mark))
        w.clear_state()
        w.password_entered()
    pytest.fail("charged in every try")


def sudo_as_root(w, answers):
    """sudo's stack (the module in-process as root) for the same user."""
    proc = subprocess.run(w.argv(HARNESS, "-s", "sudo", "-u", USER, *sum((["-a", a] for a in answers), [])),
                          env=w.env(), capture_output=True, text=True, timeout=60)
    return parse_run(proc.stdout, proc.stderr)


# ---------------------------------------------------------------- the examples, on a terminal
#
# Apple's sheet on a terminal: the app's reason with the reader already
# waiting and only Cancel ([Ctrl-C: ...]); the fallback ([Enter: title])
# only after the first finger not recognized, never with an empty title;
# the password asked only after it (policy owner) or after the misses.

def test_payment_the_sheet_opens_with_the_reader_waiting_and_only_cancel(w, rig):
    rig.feed([MATCH])
    session = terminal(w, program("localauth-example-payment"), "12.50 EUR")
    try:
        session.expect("Touch the fingerprint reader to pay 12.50 EUR.")
        session.expect("[Ctrl-C: Cancel Payment]")
        session.expect("Confirm the payment of 12.50 EUR")          # the app's reason, with the instruction
        session.expect("Payment of 12.50 EUR confirmed.")
        assert session.wait() == 0, session.text
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok
    assert "[Enter:" not in session.text and "Password:" not in session.text, session.text
    assert w.counts(UID) == (0, 0)


def test_payment_keys_before_a_miss_do_nothing(w, rig):
    """Typed text and Enter before any miss: no password field, no
    fallback; the finger still confirms."""
    listener, seen = watcher(rig)
    session = terminal(w, program("localauth-example-payment"))
    try:
        session.expect("[Ctrl-C: Cancel Payment]")
        reader_waiting(listener, seen, 1)
        session.send("typed text\r\r")
        rig.feed([MATCH], on_cue=False)                             # the reader waits already
        session.expect("Payment of 42.00 EUR confirmed.")
        assert session.wait() == 0, session.text
    finally:
        session.close()
        listener.close()
    assert rig.feed_wait(timeout=30).ok
    assert "Use Password:" not in session.text and "[Enter:" not in session.text, session.text
    assert w.counts(UID) == (0, 0)


def test_payment_a_miss_offers_the_apps_fallback_title_which_asks_the_password(w, rig):
    session = miss_then_fallback(rig, terminal(w, program("localauth-example-payment")), "Use Password")
    try:
        session.expect("Use Password:")                             # the system password, under the app's title
        session.send(PASSWORD + "\r")
        session.expect("Payment of 42.00 EUR confirmed.")
        assert session.wait() == 0, session.text
    finally:
        session.close()
    assert PASSWORD not in session.text
    assert w.counts(UID) == (0, 0)                                  # the password reset the miss


def test_payment_three_misses_then_the_password_under_the_apps_title(w, rig):
    rig.feed([MISS] * 3)
    session = terminal(w, program("localauth-example-payment"))
    try:
        session.expect("Fingerprint not recognized. Try again.")
        session.expect("[Enter: Use Password]")
        session.expect("Use Password:")
        assert w.counts(UID) == (3, 0)
        session.send(PASSWORD + "\r")
        session.expect("Payment of 42.00 EUR confirmed.")
        assert session.wait() == 0, session.text
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok
    assert session.text.count("[Enter: Use Password]") == 1, session.text
    assert w.counts(UID) == (0, 0)


def test_payment_wrong_password_is_counted_like_sudos(w, rig):
    session = miss_then_fallback(rig, terminal(w, program("localauth-example-payment")), "Use Password")
    try:
        session.expect("Use Password:")
        session.send("wrong-pw\r")
        session.expect("Payment not confirmed: the identity could not be verified.")
        assert session.wait() == 1
    finally:
        session.close()
    assert w.counts(UID)[1] == 1 and w.counts(UID)[0] in (1, 2), w.counts(UID)


def test_payment_cancel_from_the_start_charges_nothing(w, rig):
    def cancel(_):
        listener, seen = watcher(rig)
        session = terminal(w, program("localauth-example-payment"))
        try:
            session.expect("[Ctrl-C: Cancel Payment]")
            reader_waiting(listener, seen, 1)
            session.send("\x03")
            session.expect("Payment cancelled.")
            assert session.wait() == 1
        finally:
            session.close()
            listener.close()
    stop_gives_the_attempt_back(w, rig, cancel)


def test_fingerprint_only_hides_the_fallback_before_and_after_a_miss(w, rig):
    """The empty title: Cancel only, Enter does nothing, three misses end it."""
    listener, seen = watcher(rig)
    rig.feed([MISS])
    session = terminal(w, program("localauth-example-fingerprint-only"), "a phone")
    try:
        session.expect("[Ctrl-C: Cancel]")
        session.expect("Approve the sign-in from a phone")
        session.expect("Fingerprint not recognized. Try again.")
        assert rig.feed_wait(timeout=30).ok
        reader_waiting(listener, seen, 2)
        session.send("typed\r")                                    # nothing: no fallback, no field
        rig.feed([MISS] * 2, on_cue=False)                          # now, and queued for the third attempt
        session.expect("Sign-in from a phone not approved: fingerprint not recognized.")
        assert session.wait() == 1, session.text
    finally:
        session.close()
        listener.close()
    assert rig.feed_wait(timeout=30).ok
    assert "[Enter:" not in session.text and "Password" not in session.text, session.text
    assert w.counts(UID) == (3, 0)


def test_fingerprint_only_approves_with_the_finger(w, rig):
    rig.feed([MATCH])
    session = terminal(w, program("localauth-example-fingerprint-only"))
    try:
        session.expect("Sign-in from a new device approved.")
        assert session.wait() == 0
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok


def test_the_wrapper_calls_each_of_its_four_callbacks(w, rig):
    rig.feed([MATCH])
    session = terminal(w, program("localauth-example-wrapper"))
    try:
        session.expect("success: notes open.")
        assert session.wait() == 0
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok

    session = miss_then_fallback(rig, terminal(w, program("localauth-example-wrapper"), "Use Passphrase"), "Use Passphrase")
    try:
        session.expect("fallback: the app asks for its own passphrase.")
        assert session.wait() == 16
    finally:
        session.close()
    rig.wait_until_claimable(USER, timeout=10)

    listener, seen = watcher(rig)
    session = terminal(w, program("localauth-example-wrapper"))
    try:
        reader_waiting(listener, seen, 1)
        session.send("\x03")
        session.expect("error: -2.")                                 # userCancel
        assert session.wait() == 1
    finally:
        session.close()
        listener.close()
    rig.wait_until_claimable(USER, timeout=10)

    session = terminal(w, program("localauth-example-wrapper"), uid=BARE_UID, user=BARE)
    try:
        session.expect("not supported: ")                            # no finger enrolled
        assert session.wait() == 2
    finally:
        session.close()
    assert w.counts(BARE_UID) == (0, 0)


def test_unlock_miss_then_fallback_hands_over_to_the_apps_password(w, rig):
    """Policy biometrics: after a miss Enter chooses the fallback, the app
    gets userFallback and asks its own password; the miss stays counted."""
    session = miss_then_fallback(rig, terminal(w, program("localauth-example-unlock")), "Enter Vault Password")
    try:
        session.expect("Vault password:")
        session.send("open sesame\r")
        session.expect("Vault unlocked with its password.")
        assert session.wait() == 0, session.text
    finally:
        session.close()
    assert w.counts(UID) in ((1, 0), (2, 0)), w.counts(UID)   # the pending attempt: refunded unless unprovable


def test_unlock_by_the_finger(w, rig):
    rig.feed([MATCH])
    session = terminal(w, program("localauth-example-unlock"))
    try:
        session.expect("Vault unlocked with the fingerprint.")
        assert session.wait() == 0
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok


# ---------------------------------------------------------------- a GUI app's presenter (la-app-probe)

def run_probe_until_waiting(w, rig, *args, session=None):
    listener, seen = watcher(rig)
    lines = []
    proc = probe(w, *args, session=session)
    try:
        read_until(proc, "ready", lines)
        reader_waiting(listener, seen, 1)
    finally:
        listener.close()
    return proc, lines


@pytest.mark.parametrize("action, sig, error", [
    ("invalidate()", signal.SIGUSR1, "appCancel -9"),
    ("the cancel button", signal.SIGUSR2, "userCancel -2"),
])
def test_an_action_while_the_reader_waits_releases_it_and_charges_nothing(w, rig, action, sig, error):
    def act(_):
        proc, lines = run_probe_until_waiting(w, rig)
        proc.send_signal(sig)
        code, lines, err = finish(proc, lines)
        assert code == 1 and lines[-1] == f"result: {error}", (lines, err)
        assert "dismiss" in lines
    stop_gives_the_attempt_back(w, rig, act)


def test_the_sheet_shows_the_reason_and_the_reader_with_no_password_field(w, rig):
    """A GUI presenter gets the same events: begin with the reason, the
    instruction, no prompt and no fallback before a miss; the fallback
    button pressed then does nothing, and the finger still succeeds."""
    proc, lines = run_probe_until_waiting(w, rig, "--reason", "sign the release")
    proc.send_signal(signal.SIGWINCH)                               # the fallback button: not offered yet
    read_until(proc, "pressed: fallback", lines)                    # (what it sent, it sent before saying so)
    rig.feed([MATCH], on_cue=False)                                 # the reader waits already
    code, lines, err = finish(proc, lines)
    assert rig.feed_wait(timeout=30).ok
    assert code == 0 and lines[-1] == "result: success", (lines, err)
    assert lines[1] == "begin: sign the release", lines
    assert any(line.startswith("info: ") and "sign the release" in line for line in lines), lines
    assert prompts(lines) == [] and not any(line.startswith("fallback offered") for line in lines), lines
    assert w.counts(UID) == (0, 0)


def test_the_fallback_button_after_a_miss_runs_the_system_password(w, rig):
    rig.feed([MISS])
    proc = probe(w, "--answer", PASSWORD, "--fallback-title", "Account Password", "--fallback-when-offered")
    code, lines, err = finish(proc, [])
    assert rig.feed_wait(timeout=30).ok
    assert code == 0 and lines[-1] == "result: success", (lines, err)
    offered = lines.index("fallback offered: Account Password")
    assert lines[offered - 1] == "error: Fingerprint not recognized. Try again.", lines
    assert prompts(lines) == ["prompt: Account Password: "] and lines.index("prompt: Account Password: ") > offered, lines
    assert w.counts(UID) == (0, 0)


def test_biometrics_the_fallback_after_a_miss_is_user_fallback(w, rig):
    rig.feed([MISS])
    proc = probe(w, "--policy", "biometrics", "--fallback-when-offered")
    code, lines, err = finish(proc, [])
    assert rig.feed_wait(timeout=30).ok
    assert code == 1 and lines[-1] == "result: userFallback -3", (lines, err)
    assert "fallback offered: Enter Password" in lines and prompts(lines) == [], lines
    assert w.counts(UID) in ((1, 0), (2, 0)), w.counts(UID)


def test_an_empty_fallback_title_is_never_offered(w, rig):
    rig.feed([MISS] * 3)
    proc = probe(w, "--policy", "biometrics", "--fallback-title", "", "--fallback-when-offered")
    code, lines, err = finish(proc, [])
    assert rig.feed_wait(timeout=30).ok
    assert code == 1 and lines[-1] == "result: authenticationFailed -1", (lines, err)
    assert not any(line.startswith("fallback offered") for line in lines) and prompts(lines) == [], lines
    assert w.counts(UID) == (3, 0)


def test_a_lockout_leads_policy_owner_to_the_system_password(w, rig):
    for misses in (3, 2):
        rig.feed([MISS] * misses)
        code, lines, err = finish(probe(w, "--answer", "<cancel>"), [])
        assert rig.feed_wait(timeout=30).ok
        assert code == 1 and lines[-1] == "result: userCancel -2", (lines, err)
    assert w.counts(UID) == (5, 0)
    code, lines, err = finish(probe(w, "--answer", PASSWORD), [])
    assert code == 0 and lines[-1] == "result: success", (lines, err)
    assert f"error: {LOCKED}" in lines and prompts(lines) == ["prompt: Enter Password: "], lines
    assert w.counts(UID) == (0, 0)


def test_a_match_gives_the_app_the_domain_state_the_preflight_reports(w, rig):
    rig.feed([MATCH])
    code, lines, err = finish(probe(w), [])
    assert rig.feed_wait(timeout=30).ok
    assert code == 0 and lines[-1] == "result: success", (lines, err)
    domain = lines[-2].removeprefix("domain: ")
    assert re.fullmatch(r"[0-9a-f]{64}", domain), lines
    check = subprocess.run(w.argv(localauth_command(), "check", "--json", uid=UID), env=w.env(USER), capture_output=True,
                           text=True, timeout=60)
    assert json.loads(check.stdout)["domain_state"] == domain


def test_interaction_not_allowed_shows_nothing_and_counts_nothing(w):
    proc = probe(w, "--non-interactive")
    code, lines, err = finish(proc, [])
    assert lines == ["ready", "result: notInteractive -1004"], (lines, err)
    assert w.record_untouched(UID) and w.counts(UID) == (0, 0)


def test_preflight_finds_the_reader_and_a_user_without_fingers(w):
    proc = probe(w, "--preflight", "--policy", "biometrics")
    code, lines, _ = finish(proc, [])
    assert code == 0 and lines == ["biometry: touchID", "result: success"], lines
    proc = probe(w, "--preflight", "--policy", "biometrics", uid=BARE_UID, user=BARE)
    code, lines, _ = finish(proc, [])
    assert code == 1 and lines == ["biometry: touchID", "result: biometryNotEnrolled -7"], lines


def test_an_empty_reason_stops_the_app_before_anything_happens(w):
    proc = probe(w, "--reason", "")
    code, lines, err = finish(proc, [])
    assert code < 0 or code >= 128, (code, lines, err)           # a trap, like Apple's exception
    assert "Non-empty localizedReason must be provided." in err
    assert lines == ["ready"] and w.state_untouched()


# ---------------------------------------------------------------- the same counters as sudo

def test_misses_through_the_app_lock_sudo_until_the_password(w, rig):
    for misses in (3, 2):
        rig.feed([MISS] * misses)
        proc = probe(w, "--answer", "<cancel>")                # the password prompt after the misses
        code, lines, err = finish(proc, [])
        assert rig.feed_wait(timeout=30).ok
        assert code == 1 and lines[-1] == "result: userCancel -2", (lines, err)
    assert w.counts(UID) == (5, 0)
    # Locked: the app may not even try the reader, and sudo sees the lockout.
    proc = probe(w, "--policy", "biometrics")
    code, lines, _ = finish(proc, [])
    assert lines[-1] == "result: biometryLockout -8", lines
    run = sudo_as_root(w, [PASSWORD])
    assert run.code == 0 and LOCKED in run.texts("error"), run
    assert w.counts(UID) == (0, 0)


def test_the_app_waits_out_the_password_back_off_like_sudo(w):
    """A user without an enrolled finger: policy owner asks the password at once."""
    for attempt in range(5):
        proc = probe(w, "--answer", f"wrong-{attempt}", uid=BARE_UID, user=BARE)
        code, lines, _ = finish(proc, [])
        assert lines[-1] == "result: authenticationFailed -1" and prompts(lines) == ["prompt: Enter Password: "], lines
    assert w.counts(BARE_UID)[1] == 5
    proc = probe(w, "--answer", BARE_PASSWORD, uid=BARE_UID, user=BARE)   # the right one, refused during the wait
    code, lines, _ = finish(proc, [])
    assert lines[-1] == "result: authenticationFailed -1" and not any(l.startswith("prompt: Enter Password") for l in lines), lines
    assert any("Try again in" in line or "wait" in line.lower() for line in lines), lines


def test_an_app_cannot_evaluate_for_another_user(w):
    """The library has no user parameter; the helper it runs refuses any
    name but the caller's own (tests/programs/test_helper_attacks.py): the probe as BARE
    only ever touches BARE's record."""
    proc = probe(w, "--answer", "wrong", uid=BARE_UID, user=BARE)
    finish(proc, [])
    assert w.counts(BARE_UID) == (0, 1) and w.counts(UID) == (0, 0)


# ---------------------------------------------------------------- the reuse window

@pytest.fixture
def sessions():
    if not (CGROUP_ROOT / "cgroup.procs").exists():
        pytest.skip("no cgroup2 hierarchy at /sys/fs/cgroup/unified to make sessions in")
    made = [Session("lt1"), Session("lt2")]
    for session in made:
        session.create()
    yield made
    for session in made:
        session.remove()
    try:
        (CGROUP_ROOT / "localauth-test.slice").rmdir()
    except OSError:
        pass


def prompts(lines):
    return [line for line in lines if line.startswith("prompt: ")]


def sheet_opened(lines):
    """A real evaluation: the sheet said something (the reader waited)."""
    return any(line.startswith(("info: ", "error: ")) for line in lines)


def succeed_by_finger(w, rig, session):
    rig.feed([MATCH])
    code, lines, err = finish(probe(w, session=session), [])
    assert rig.feed_wait(timeout=30).ok
    assert code == 0, (lines, err)


def test_a_recent_success_in_the_same_session_stands_in_for_the_prompt(w, rig, sessions):
    here, there = sessions
    succeed_by_finger(w, rig, here)
    # Within the window, in the same session: no prompt, nothing charged.
    code, lines, err = finish(probe(w, "--reuse", "60", session=here), [])
    assert code == 0 and lines[-1] == "result: success" and prompts(lines) == [], (lines, err)
    # Also with interactionNotAllowed.
    code, lines, _ = finish(probe(w, "--reuse", "60", "--non-interactive", session=here), [])
    assert code == 0 and lines[-1] == "result: success", lines
    # Another session, no session, or no window: a real prompt.
    for kwargs, args in (({"session": there}, ["--reuse", "60"]), ({}, ["--reuse", "60"]), ({"session": here}, [])):
        code, lines, _ = finish(probe(w, *args, "--cancel-at-first-message", **kwargs), [])
        assert lines[-1] == "result: userCancel -2" and sheet_opened(lines), (kwargs, args, lines)
        rig.wait_until_claimable(USER, timeout=10)
    assert w.counts(UID) in ((0, 0), (1, 0)), w.counts(UID)     # a cancel while the reader waits: given back unless unprovable


def test_the_reuse_window_is_on_the_boot_clock(w, rig, sessions):
    here, _ = sessions
    succeed_by_finger(w, rig, here)
    # 61 s later (a time namespace whose boot clock is ahead): a 60 s window has passed, a 300 s one has not.
    code, lines, _ = finish(probe(w, "--reuse", "60", "--cancel-at-first-message", session=here, prefix=later_boot_clock(61)), [])
    assert lines[-1] == "result: userCancel -2" and sheet_opened(lines), lines
    rig.wait_until_claimable(USER, timeout=10)
    code, lines, _ = finish(probe(w, "--reuse", "300", session=here, prefix=later_boot_clock(61)), [])
    assert lines[-1] == "result: success" and not prompts(lines), lines
    code, lines, _ = finish(probe(w, "--reuse", "300", "--cancel-at-first-message", session=here, prefix=later_boot_clock(301)), [])
    assert lines[-1] == "result: userCancel -2", lines


def test_a_failure_since_the_success_ends_the_window(w, rig, sessions):
    here, _ = sessions
    succeed_by_finger(w, rig, here)
    rig.feed([MISS])
    code, lines, _ = finish(probe(w, "--fallback-when-offered", "--answer", "wrong-pw", session=here), [])
    assert rig.feed_wait(timeout=30).ok
    assert lines[-1] == "result: authenticationFailed -1", lines
    code, lines, _ = finish(probe(w, "--reuse", "300", "--cancel-at-first-message", session=here), [])
    assert lines[-1] == "result: userCancel -2" and sheet_opened(lines), lines


def test_the_window_is_for_apps_never_for_a_pam_service(w, rig, sessions):
    """A caller naming a PAM service with reuse gets a real prompt."""
    here, _ = sessions
    succeed_by_finger(w, rig, here)
    mine, theirs = socket.socketpair()
    proc = subprocess.Popen(w.argv(HELPER_PATH, uid=UID), stdin=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=w.env(USER), preexec_fn=here.enter)
    theirs.close()
    try:
        mine.sendall(frame(HELLO, CLIENT_HELLO))
        assert read_frame(mine)[0] == HELLO
        mine.sendall(frame(REQUEST, request(service="i3lock", reuse="300")))
        messages, result = converse(mine, [])
        assert messages and result["pam"] != 0, (messages, result)
    finally:
        mine.close()
        proc.wait(timeout=30)


# ---------------------------------------------------------------- localauth evaluate

def evaluate(w, *args, uid=UID, user=USER):
    proc = subprocess.run(w.argv(localauth_command(), "evaluate", *args, uid=uid), env=w.env(user), capture_output=True,
                          text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_evaluate_non_interactive_json_says_what_is_missing(w):
    code, out, _ = evaluate(w, "--non-interactive", "--json")
    assert code == 21 and json.loads(out) == {"policy": "owner", "success": False, "method": None, "error": "notInteractive",
                                              "error_code": -1004, "exit_code": 21}, out
    code, out, _ = evaluate(w, "--non-interactive", "--json", "--policy", "biometrics", uid=BARE_UID, user=BARE)
    assert code == 12 and json.loads(out)["error"] == "biometryNotEnrolled", out
    assert w.record_untouched(UID) and w.counts(UID) == (0, 0)


def test_evaluate_without_a_terminal_is_not_interactive(w):
    code, out, _ = evaluate(w)
    assert code == 21 and out.strip() == "not authenticated: notInteractive (-1004)", out


def test_evaluate_refuses_an_empty_reason(w):
    code, _, err = evaluate(w, "--reason", "")
    assert code == 2 and "--reason must not be empty" in err


def test_evaluate_on_a_terminal_match_and_json(w, rig):
    rig.feed([MATCH])
    session = terminal(w, localauth_command(), "evaluate", "--json", "--reason", "Deploy to production")
    try:
        session.expect("[Ctrl-C: Cancel]")
        session.expect("Deploy to production")              # the reason, in the instruction
        session.expect('"success":true')
        assert session.wait() == 0
    finally:
        session.close()
    assert rig.feed_wait(timeout=30).ok
    answer = json.loads(session.text.strip().splitlines()[-1])
    assert answer == {"policy": "owner", "success": True, "method": "fingerprint", "error": None, "error_code": None,
                      "exit_code": 0}


TOUCH_OR_TYPE = "Swipe your finger across the fingerprint reader or type your password:"   # the virtual reader swipes


def evaluate_with_the_reader_waiting(w, rig, *args):
    """`localauth evaluate` (policy owner) at a terminal, once its touch or
    type line is shown and fprintd waits for a finger. -> the session."""
    listener, seen = watcher(rig)
    session = terminal(w, localauth_command(), "evaluate", *args)
    try:
        session.expect(TOUCH_OR_TYPE)
        reader_waiting(listener, seen, 1)
    except BaseException:
        session.close()
        raise
    finally:
        listener.close()
    return session


def test_evaluate_owner_a_password_typed_while_the_reader_waits(w, rig):
    """Touch or type: keys typed while the reader waits are the password,
    never shown; backspace edits them; Enter sends them; the attempt of the
    wait is given back and the password's charged and checked."""
    session = evaluate_with_the_reader_waiting(w, rig)
    try:
        session.send(PASSWORD[:3] + "x\x7f" + PASSWORD[3:] + "\r")
        session.expect("authenticated: password")
        assert session.wait() == 0
    finally:
        session.close()
    assert PASSWORD not in session.text and PASSWORD[3:] not in session.text, session.text
    assert "Enter Password" not in session.text, session.text          # no second prompt
    assert w.counts(UID) == (0, 0)
    rig.wait_until_claimable(USER, timeout=10)


@pytest.mark.parametrize("steps, result, counts", [
    ([("send", "not-the-password\r")], "not authenticated: authenticationFailed (-1)", {(0, 1)}),
    ([("send", "\r"), ("expect", "Enter Password: "), ("send", PASSWORD + "\r")], "authenticated: password", {(0, 0)}),
    # Given back unless the stop could not prove that no finger was judged.
    ([("send", "pk\x03")], "not authenticated: userCancel (-2)", {(0, 0), (1, 0)}),
    ([("send", "\r"), ("expect", "Enter Password: "), ("send", "pk\x03")], "not authenticated: userCancel (-2)", {(0, 0)}),
], ids=["a wrong password typed is charged", "Enter alone asks the password", "Ctrl-C while the reader waits cancels",
        "Ctrl-C at the password prompt cancels at once"])
def test_evaluate_owner_keys_while_the_reader_waits(w, rig, steps, result, counts):
    session = evaluate_with_the_reader_waiting(w, rig)
    try:
        for action, text in steps:
            session.send(text) if action == "send" else session.expect(text)
        session.expect(result)
        code = session.wait()
        assert (code == 0) == result.startswith("authenticated"), code
    finally:
        session.close()
    rig.wait_until_claimable(USER, timeout=10)
    assert w.counts(UID) in counts, w.counts(UID)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_evaluate_ended_by_a_signal_puts_the_terminal_back(w, rig, sig):
    """A kill or a hang-up while the reader waits and a password is half
    typed: the evaluation is cancelled, the terminal gets its echo and line
    editing back, then the signal ends the tool as it would have."""
    session = evaluate_with_the_reader_waiting(w, rig)
    try:
        session.send("pk-half")
        os.kill(session.pid, sig)
        assert session.wait() == -sig
        lflag = termios.tcgetattr(session.master)[3]
    finally:
        session.close()
    assert lflag & termios.ECHO and lflag & termios.ICANON and lflag & termios.ISIG, hex(lflag)
    rig.wait_until_claimable(USER, timeout=10)
    assert w.counts(UID) in ((0, 0), (1, 0)), w.counts(UID)    # given back unless the stop could not prove it
    assert "pk-half" not in session.text


def test_evaluate_biometrics_fallback_exits_16(w, rig):
    session = miss_then_fallback(rig, terminal(w, localauth_command(), "evaluate", "--policy", "biometrics"), "Enter Password")
    try:
        session.expect("not authenticated: userFallback (-3)")
        assert session.wait() == 16
    finally:
        session.close()


def test_evaluate_no_reader_is_biometry_not_available(w, rig):
    rig.stop_fprintd()
    try:
        code, out, _ = evaluate(w, "--non-interactive", "--policy", "biometrics")
        assert code == 11 and "biometryNotAvailable (-6)" in out, out
    finally:
        rig.start_fprintd()
        rig.enroll(USER)


def test_an_administrator_can_turn_apps_off(w):
    w.write_config(["services = sudo,i3lock"])
    try:
        proc = probe(w, "--answer", PASSWORD)
        code, lines, _ = finish(proc, [])
        assert lines[-1] == "result: biometryNotAvailable -6", lines
        code, _, _ = evaluate(w, "--non-interactive")
        assert w.counts(UID) == (0, 0)
    finally:
        w.write_config([])


# ---------------------------------------------------------------- Apple's source compiles unchanged

def test_apple_api_source_needs_no_linux_names():
    source = (ROOT / "tests" / "unit" / "AppleAPICompatibility" / "AppleAPI.swift").read_text()
    imports = re.findall(r"^import (\w+)", source, re.M)
    assert imports == ["Foundation", "LocalAuthentication"]
    for linux_only in ("presenter", "LAPresenter", "LAPassword", "TerminalPresenter", "LAEvaluationControl", "LocalAuth."):
        assert linux_only not in source, linux_only
    for example in ("PaymentConfirmation/main.swift", "BiometricUnlock/BiometricUnlock.swift", "FingerprintOnly/main.swift",
                    "CallbackWrapper/main.swift"):
        text = (ROOT / "Examples" / example).read_text()
        for linux_only in ("LAPresenter", "LAPassword", "TerminalPresenter", "LAEvaluationControl"):
            assert linux_only not in text, (example, linux_only)
    build = subprocess.run(["swift", "build", "--target", "AppleAPICompatibility"], cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr


# ---------------------------------------------------------------- the system cancels the sheet

@pytest.mark.parametrize("what", ["the screen locks", "the user switches away"])
def test_the_system_cancels_the_sheet_when_the_person_leaves_it(w, rig, logind, what):
    """logind says the session locked (or stopped being the active one)
    while the reader waits: systemCancel, the reader released, nothing
    charged (unless the stop's proof is denied by load: then the pending
    attempt stays, as for any stop)."""
    def leave(attempt):
        name = f"la{attempt}{'l' if what == 'the screen locks' else 's'}"
        session = logind.add_session(name, uid=UID, name=USER)
        proc, lines = run_probe_until_waiting(w, rig, session=session)
        if what == "the screen locks":
            logind.set_locked(name, True)
        else:
            logind.set_active(name, False)
        code, lines, err = finish(proc, lines)
        assert code == 1 and lines[-1] == "result: systemCancel -4", (lines, err)
        assert "dismiss" in lines and prompts(lines) == [], lines
    stop_gives_the_attempt_back(w, rig, leave)
