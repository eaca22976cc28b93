"""Fingerprint first, through the real module, real libpam and a real fprintd
with libfprint's virtual device (tests/support/fprint_rig.py); the passcode
through pam_matrix. Codes, conversation messages and counters on disk."""
import contextlib
import signal
import time

import pytest

from pamenv import (CLAIM_DELAY_SHIM, PAM_AUTHINFO_UNAVAIL, PAM_AUTH_ERR, PAM_CONV_ERR, PAM_SUCCESS, PASSWORDS,
                    install_shipped_stack, parse_run)
from fprint_rig import process_state
from sentences import FIRST_PROMPT, LOCKED, PASSCODE_PROMPT, READER_BUSY

ALICE = PASSWORDS["alice"]
MATCH = "SCAN finger-alice"
MISS = "SCAN finger-nobody"


def run(pam, rig, answers, feed=(), **kwargs):
    if feed:
        rig.feed(list(feed))
    result = pam.run(answers=answers, env=rig.env(), **kwargs)
    if feed:
        report = rig.feed_wait(timeout=30)
        result.fed = [command for command, *_ in report.sent]
    return result


def instruction(result):
    return [t for t in result.texts("info") if "fingerprint reader" in t]


# ---- prompt mode (no controlling terminal: the default for this harness) ----

def test_match_first_try(pam, rig):
    result = run(pam, rig, [""], [MATCH])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT]
    assert instruction(result) == ["sudo needs to confirm your identity (alice). "
                                   "Swipe your finger across the fingerprint reader."]
    record = pam.record()
    assert (record.F, record.P, record.failures) == (0, 0, 0)
    assert record.last_fingerprint_wall > 0


def test_retry_hints_then_match_charge_nothing(pam, rig):
    result = run(pam, rig, [""], ["RETRY 0", "RETRY 1", "RETRY 2", "RETRY 3", MATCH])
    assert result.code == PAM_SUCCESS
    hints = result.texts("info")
    for text in ("Scan failed. Try again.", "Swipe was too short. Try again.", "Finger was not centered. Try again.",
                 "Remove your finger and try again."):
        assert text in hints
    assert (pam.record().F, pam.record().failures) == (0, 0)


def test_three_misses_then_correct_passcode(pam, rig):
    result = run(pam, rig, ["", ALICE], [MISS] * 3)
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert result.texts("error").count("Fingerprint not recognized. Try again.") == 2
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_three_misses_and_a_wrong_passcode_then_two_more_then_locked(pam, rig):
    first = run(pam, rig, ["", "wrong"], [MISS] * 3)
    assert first.code == PAM_AUTH_ERR
    assert (pam.record().F, pam.record().P) == (3, 1)
    second = run(pam, rig, ["", "wrong again"], [MISS] * 2)
    assert second.code == PAM_AUTH_ERR
    assert second.fed == [MISS] * 2
    assert any(LOCKED in t for t in second.texts("error"))
    assert (pam.record().F, pam.record().P) == (5, 2)
    third = run(pam, rig, [ALICE])
    assert third.prompts() == [PASSCODE_PROMPT]  # the sensor is skipped
    assert any(LOCKED in t for t in third.texts("error"))
    assert third.code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_lockout_survives_new_processes_and_an_fprintd_restart(pam, rig):
    run(pam, rig, ["", "wrong"], [MISS] * 3)
    run(pam, rig, ["", "wrong"], [MISS] * 2)
    assert pam.record().F == 5
    rig.restart_fprintd()
    locked = run(pam, rig, [])
    assert any(LOCKED in t for t in locked.texts("error"))
    assert locked.prompts() == [PASSCODE_PROMPT] and locked.code == PAM_CONV_ERR
    assert pam.record().F == 5
    assert run(pam, rig, [ALICE]).code == PAM_SUCCESS
    assert run(pam, rig, [""], [MATCH]).code == PAM_SUCCESS


def test_typed_passcode_skips_the_sensor(pam, rig):
    result = run(pam, rig, [ALICE])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT]
    assert instruction(result) == []


def test_locker_style_conversation_answering_every_prompt_with_the_password(pam, rig):
    """A screen locker collects the password first and answers every prompt
    with it (R16). While biometrics are usable the first prompt takes it as
    the passcode (the sensor is never started); once they are locked the
    first prompt is the plain passcode prompt. Both succeed and reset F and P."""
    # Biometrics usable, with failures on record (F=3 < lockout, P=1).
    first = run(pam, rig, ["", "wrong"], [MISS] * 3)
    assert first.code == PAM_AUTH_ERR and (pam.record().F, pam.record().P) == (3, 1)
    usable = run(pam, rig, [ALICE] * 4)
    assert usable.code == PAM_SUCCESS
    assert usable.prompts() == [FIRST_PROMPT]
    assert instruction(usable) == [] and not any(LOCKED in t for t in usable.texts())
    assert (pam.record().F, pam.record().P) == (0, 0)

    # Biometrics locked: 5 misses across two prompts.
    run(pam, rig, ["", "wrong"], [MISS] * 3)
    locking = run(pam, rig, ["", "wrong again"], [MISS] * 2)
    assert locking.fed == [MISS] * 2 and any(LOCKED in t for t in locking.texts("error"))
    assert (pam.record().F, pam.record().P) == (5, 2)
    locked = run(pam, rig, [ALICE] * 4)
    assert locked.code == PAM_SUCCESS
    assert locked.prompts() == [PASSCODE_PROMPT]  # the sensor is skipped: no "press Enter" prompt
    assert any(LOCKED in t for t in locked.texts("error"))
    assert instruction(locked) == []
    assert (pam.record().F, pam.record().P) == (0, 0)

    # The correct passcode unlocked biometrics again.
    again = run(pam, rig, [""], [MATCH])
    assert again.code == PAM_SUCCESS and again.prompts() == [FIRST_PROMPT] and instruction(again)


def test_reason_and_fallback_title_are_shown(pam, rig):
    pam.write_owner_stack(args="[reason=Unlock the vault for %u via %s] [fallback_title=Use Passcode]")
    result = run(pam, rig, ["", ALICE], [MISS] * 3)
    assert any(t.startswith("Unlock the vault for alice via sudo. ") for t in instruction(result))
    assert result.prompts() == [FIRST_PROMPT, "Use Passcode: "]


@pytest.mark.stop_proof
def test_timeout_ends_the_phase_uncharged(pam, rig):
    pam.write_owner_stack(args="timeout=1")
    started = time.monotonic()
    result = run(pam, rig, ["", ALICE])
    assert time.monotonic() - started >= 1
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert pam.record().F == 0


def test_disconnect_ends_the_phase_uncharged(pam, rig):
    result = run(pam, rig, ["", ALICE], ["ERROR 5"])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert pam.record().F == 0


def test_unplug_ends_the_phase_uncharged(pam, rig):
    result = run(pam, rig, ["", ALICE], ["UNPLUG"])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert pam.record().F == 0
    after = run(pam, rig, [ALICE])  # no device any more: straight to the passcode
    assert after.prompts() == [PASSCODE_PROMPT] and after.code == PAM_SUCCESS


def test_fprintd_not_running_goes_straight_to_the_passcode(pam, rig):
    rig.stop_fprintd()
    result = run(pam, rig, [ALICE])
    assert result.prompts() == [PASSCODE_PROMPT] and result.code == PAM_SUCCESS


def test_device_claimed_elsewhere_means_no_biometrics_for_this_prompt(pam, rig):
    rig.claim_elsewhere("alice")
    try:
        result = run(pam, rig, ["", ALICE])
    finally:
        rig.release_elsewhere()
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert pam.record().F == 0


def test_a_reader_a_hung_or_killed_client_holds_never_costs_an_attempt(pam, rig):
    """A client of fprintd of its own holds the reader and never lets go
    (a program that hangs, or a suspend that left the claim): each prompt
    says the reader is in use and goes to the password, never waiting and
    never charging; a wrong password is the only charge. When the holder is
    SIGKILLed its claim goes with its bus connection, and the next prompt
    uses the finger."""
    holder = rig.claiming_process("alice")
    try:
        for answers, code, counts in ((["", "wrong"], PAM_AUTH_ERR, (0, 1)), (["", ALICE], PAM_SUCCESS, (0, 0))):
            result = run(pam, rig, answers)
            assert result.code == code, result
            assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT], result.messages
            assert READER_BUSY in result.texts("error") + result.texts("info"), result.messages
            assert not any("your finger" in text for text in result.texts("info")), result.messages
            assert (pam.record().F, pam.record().P) == counts
    finally:
        holder.kill()
        holder.wait(timeout=30)
    result = run(pam, rig, [""], [MATCH])
    assert result.code == PAM_SUCCESS and result.fed == [MATCH], result
    assert READER_BUSY not in result.texts("error") + result.texts("info")
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_user_without_prints_goes_straight_to_the_passcode(pam, rig):
    result = pam.run(user="bob", answers=[PASSWORDS["bob"]], env=rig.env())
    assert result.prompts() == [PASSCODE_PROMPT] and result.code == PAM_SUCCESS


def test_remote_host_is_ignored(pam, rig):
    result = pam.run(rhost="198.51.100.7", answers=[ALICE], env=rig.env())
    assert result.ignored
    assert pam.state_untouched()


# ---- terminal mode: Ctrl-C (R16) ----

def run_with_ctrl_c(pam, rig, answers, feed, wait_for, args="mode=terminal"):
    """Starts the prompt, sends SIGINT once `wait_for` appears on its output."""
    pam.write_owner_stack(args=args)
    if feed:
        rig.feed(list(feed))
    proc = pam.spawn(answers=answers, env=rig.env(), count_interrupts=True)
    lines = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if wait_for in line:
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=30)
    if feed:
        rig.feed_wait(timeout=30)
    return parse_run("".join(lines) + rest, err)


@pytest.mark.stop_proof
def test_ctrl_c_before_the_first_failure_cancels_and_stays_pending(pam, rig):
    result = run_with_ctrl_c(pam, rig, [ALICE], [], "fingerprint reader")
    assert result.code == PAM_CONV_ERR
    assert result.prompts() == []
    assert result.interrupts_delivered == 1  # left for the application
    assert pam.record().F == 0


@pytest.mark.stop_proof
def test_ctrl_c_after_a_failure_chooses_the_fallback(pam, rig):
    result = run_with_ctrl_c(pam, rig, [ALICE], [MISS], "Press Ctrl-C to Enter Password")
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [PASSCODE_PROMPT]
    assert result.interrupts_delivered == 0  # taken as the fallback choice
    assert (pam.record().F, pam.record().P) == (0, 0)


@pytest.mark.stop_proof
def test_ctrl_c_with_an_empty_fallback_title_cancels(pam, rig):
    result = run_with_ctrl_c(pam, rig, [ALICE], [MISS], "Fingerprint not recognized", args="mode=terminal fallback_title=")
    assert result.code == PAM_CONV_ERR
    assert result.prompts() == []
    assert result.interrupts_delivered == 1
    assert pam.record().F == 1


def test_terminal_mode_match(pam, rig):
    pam.write_owner_stack(args="mode=terminal")
    result = run(pam, rig, [], [MATCH])
    assert result.code == PAM_SUCCESS and result.prompts() == []


# ---- policy biometrics: §4's codes ----

def bio(pam, rig, answers, feed=(), args=""):
    pam.write_service("bio", [pam.module_line("required", f"policy=biometrics services=bio {args}")])
    if feed:
        rig.feed(list(feed))
    result = pam.run(service="bio", answers=answers, env=rig.env())
    if feed:
        rig.feed_wait(timeout=30)
    return result


def test_biometrics_match(pam, rig):
    assert bio(pam, rig, [""], [MATCH]).code == PAM_SUCCESS


def test_biometrics_tries_used_up(pam, rig):
    assert bio(pam, rig, [""], [MISS] * 3).code == PAM_AUTH_ERR
    assert pam.record().F == 3


@pytest.mark.stop_proof
def test_biometrics_locked_not_enrolled_timeout_disconnect(pam, rig):
    bio(pam, rig, [""], [MISS] * 3)
    bio(pam, rig, [""], [MISS] * 2)
    assert bio(pam, rig, [""]).code == PAM_AUTHINFO_UNAVAIL  # locked
    pam.record_path().unlink()
    pam.password_entered("alice", rig)
    assert pam.run(service="bio", user="bob", answers=[""], env=rig.env()).code == PAM_AUTHINFO_UNAVAIL
    assert bio(pam, rig, [""], args="timeout=1").code == PAM_AUTHINFO_UNAVAIL
    assert bio(pam, rig, [""], ["ERROR 5"]).code == PAM_AUTHINFO_UNAVAIL
    assert pam.record().F == 0


def test_biometrics_typed_password_is_the_fallback(pam, rig):
    # Prompt mode: a typed password under policy biometrics hands over (IGNORE).
    pam.write_owner_stack("bio", args="policy=biometrics services=bio")
    result = pam.run(service="bio", answers=[ALICE], env=rig.env())
    assert result.ignored
    assert result.prompts() == [FIRST_PROMPT]
    assert pam.state_untouched()


def test_biometrics_stack_with_password_and_authsucc(pam, rig):
    install_shipped_stack(pam, "sudo-biometrics")
    miss = run_service(pam, rig, "sudo-biometrics", ["", "wrong"], [MISS] * 3)
    assert miss.code == PAM_AUTH_ERR and pam.record().F == 3
    good = run_service(pam, rig, "sudo-biometrics", ["", ALICE], [MISS] * 2)
    assert good.code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)  # authsucc reset the lockout
    assert run_service(pam, rig, "sudo-biometrics", [""], [MATCH]).code == PAM_SUCCESS


def run_service(pam, rig, service, answers, feed=()):
    if feed:
        rig.feed(list(feed))
    result = pam.run(service=service, answers=answers, env=rig.env())
    if feed:
        rig.feed_wait(timeout=30)
    return result


# ---- fprintd leaving the bus in the middle of an attempt ----

def test_fprintd_vanishing_during_the_wait_ends_the_phase_uncharged(pam, rig):
    proc = pam.spawn(answers=["", ALICE], env=rig.env())
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, "the prompt ended before the sensor phase"
        lines.append(line)
        if "fingerprint reader" in line:
            break
    rig.stop_fprintd()
    rest, err = proc.communicate(timeout=30)
    result = parse_run("".join(lines) + rest, err)
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert pam.record().F == 0


# ---- R3: a kill while fprintd waits for a finger never yields an uncounted guess ----

from pamenv import read_until  # noqa: E402


@pytest.mark.parametrize("misses", [0, 2], ids=["first-attempt", "third-attempt"])
def test_sigkill_while_the_sensor_waits_leaves_the_attempt_charged(pam, rig, misses):
    from fprint_rig import DEVICE_IFACE, FPRINT_NAME, _Client
    from test_store import decode_record
    watcher = _Client(rig.bus_address)
    selected = []
    try:
        # In effect before the prompt starts: fprintd's VerifyFingerSelected
        # marks each attempt it is running (VerifyStart comes after the charge).
        watcher.subscribe(FPRINT_NAME, DEVICE_IFACE, "VerifyFingerSelected", None,
                          lambda *signal_args: selected.append(signal_args))
        if misses:
            rig.feed([MISS] * misses)
        proc = pam.spawn(answers=[""], env=rig.env())
        try:
            shown = read_until(proc, "fingerprint reader")
            assert watcher.pump(lambda: len(selected) > misses, 30), "fprintd never started the attempt"
            if misses:
                report = rig.feed_wait(timeout=30)
                assert report.ok and report.sent_commands() == [MISS] * misses, report
                shown += read_until(proc, "Fingerprint not recognized")
            assert proc.poll() is None  # waiting for a finger
            proc.kill()
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
            rest, _ = proc.communicate(timeout=30)
    finally:
        watcher.close()
    result = parse_run(shown + rest)
    assert result.code == -1 and result.prompts() == [FIRST_PROMPT]  # killed before any verdict
    assert len(instruction(result)) == 1

    # The attempt in progress was charged before it started, and stays charged.
    path = pam.record_path()
    on_disk = decode_record(path.read_bytes(), uid=1001, name="alice")  # sound, checksummed
    assert (on_disk["F"], on_disk["P"]) == (misses + 1, 0)
    assert pam.record_files() == ["1001.lock", "1001.rec"]

    # fprintd drops the dead prompt's claim; the next prompt claims the device
    # and a match resets the count.
    rig.wait_until_claimable(timeout=30)
    after = run(pam, rig, [""], [MATCH])
    assert after.code == PAM_SUCCESS
    assert after.prompts() == [FIRST_PROMPT] and len(instruction(after)) == 1
    assert not any("in use" in t for t in after.texts())
    record = pam.record()
    assert (record.F, record.P) == (0, 0) and record.last_fingerprint_wall > 0


# ---- R16: the mode follows the controlling terminal ----

def run_on_a_terminal(pam, rig, answers, tty_is_controlling=True, feed=()):
    """Runs the harness as the session leader of a new pseudo-terminal."""
    import os
    from pamenv import run_in_terminal
    if feed:
        rig.feed(list(feed))

    def command():  # in the child: name its own terminal, or another device
        return pam.harness_args("sudo", "alice", answers, tty=os.ttyname(0) if tty_is_controlling else "/dev/null")
    _, output = run_in_terminal(command, pam.env(rig.env()))
    if feed:
        rig.feed_wait(timeout=30)
    return parse_run(output)


def test_controlling_terminal_selects_terminal_mode(pam, rig):
    result = run_on_a_terminal(pam, rig, [], feed=[MATCH])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == []  # fingerprint first, no "press Enter" prompt
    assert instruction(result)


def test_a_tty_that_is_not_the_controlling_terminal_selects_prompt_mode(pam, rig):
    result = run_on_a_terminal(pam, rig, [""], tty_is_controlling=False, feed=[MATCH])
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [FIRST_PROMPT]


# ---- the domain state: a digest of the enrolled prints (R8, R10) ----

def passcode_digest(pam):
    return pam.record_path().read_bytes()[352:384]


def test_domain_state_changes_when_a_finger_is_re_enrolled(pam, rig):
    """fprintd's print files are read from /var/lib/fprint: the rig's prints
    are bound there in a private mount namespace."""
    import subprocess
    def passcode_success():
        script = (f"mount --make-rprivate / && mount --bind {rig.prints_dir} /var/lib/fprint && exec "
                  + " ".join(f"'{a}'" for a in pam.harness_args("sudo", "alice", [ALICE])))
        proc = subprocess.run(["unshare", "--mount", "bash", "-c", script], env=pam.env(rig.env()),
                              capture_output=True, text=True, timeout=60)
        assert parse_run(proc.stdout).code == PAM_SUCCESS, proc.stdout + proc.stderr
        return passcode_digest(pam)
    first = passcode_success()
    assert first != bytes(32)
    assert passcode_success() == first  # stable while nothing changes
    rig.enroll("alice", print_id="another-print")  # same finger name, new print
    assert rig.list_enrolled("alice") == ["right-index-finger"]
    assert passcode_success() != first


# ---- statuses broadcast for another session (security review finding) ----

def test_a_verdict_broadcast_for_another_session_never_counts(pam, rig, tmp_path):
    """bob's match, broadcast after our subscription but before our Claim,
    must not authenticate alice (fprintd broadcasts every session's status)."""
    import subprocess
    shim = CLAIM_DELAY_SHIM
    rig.enroll("bob")
    pam.write_owner_stack(args="timeout=2")
    env = rig.env({"LD_PRELOAD": f"libpam_wrapper.so libnss_wrapper.so {shim}", "CLAIM_DELAY_DIR": str(tmp_path)})
    proc = pam.spawn(answers=["", "wrong"], env=env)
    deadline = time.monotonic() + 20
    while not (tmp_path / "claim-entered").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the module never reached its Claim"
        time.sleep(0.01)
    monitor = subprocess.Popen(["dbus-monitor", "--address", rig.bus_address, "type='signal',member='VerifyStatus'"],
                               stdout=subprocess.PIPE)
    try:
        rig.claim_elsewhere("bob")
        rig.feed(["SCAN finger-bob"])
        rig.device_call("VerifyStart", "any", sig="(s)", client=rig._elsewhere)
        rig.feed_wait(timeout=30)
        # The precondition of the attack: bob's match went out on the bus.
        import os
        import select
        seen = b""
        while b"verify-match" not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and select.select([monitor.stdout], [], [], remaining)[0], "bob's match was never broadcast"
            seen += os.read(monitor.stdout.fileno(), 65536)
    finally:
        monitor.kill()
        monitor.wait()
    rig.device_call("VerifyStop", client=rig._elsewhere)
    rig.release_elsewhere()
    (tmp_path / "go").touch()
    out, err = proc.communicate(timeout=60)
    result = parse_run(out, err)
    assert result.code == PAM_AUTH_ERR, out
    assert result.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]  # timed out, then the (wrong) password
    assert (pam.record().F, pam.record().P) == (0, 1)


# ---- the remaining situations under policy biometrics (the result codes) ----

def test_biometrics_unplug_absent_fprintd_busy_device_and_remote_host(pam, rig):
    assert bio(pam, rig, [""], ["UNPLUG"]).code == PAM_AUTHINFO_UNAVAIL
    assert pam.record().F == 0  # no verdict: refunded
    rig.restart_fprintd()
    rig.enroll("alice")
    rig.claim_elsewhere("alice")
    try:
        assert bio(pam, rig, [""]).code == PAM_AUTHINFO_UNAVAIL
    finally:
        rig.release_elsewhere()
    pam.write_owner_stack("bio-remote", args="policy=biometrics services=bio-remote")
    remote = pam.run(service="bio-remote", rhost="192.0.2.1", answers=[""], env=rig.env())
    assert remote.ignored and remote.prompts() == []  # out of scope: the next module decides
    rig.stop_fprintd()
    assert bio(pam, rig, [""]).code == PAM_AUTHINFO_UNAVAIL
    assert pam.record().F == 0


@pytest.mark.stop_proof
def test_biometrics_ctrl_c_cancels_before_a_failure_and_falls_back_after(pam, rig):
    args = "policy=biometrics services=sudo mode=terminal"
    cancel = run_with_ctrl_c(pam, rig, [], [], "fingerprint reader", args=args)
    assert cancel.code == PAM_CONV_ERR and cancel.interrupts_delivered == 1
    fallback = run_with_ctrl_c(pam, rig, [], [MISS], "Press Ctrl-C to Enter Password", args=args)
    assert fallback.ignored  # userFallback -> PAM_IGNORE: the next module takes over
    assert fallback.interrupts_delivered == 0
    assert pam.record().F == 1


def test_a_wedged_fprintd_never_hangs_the_prompt(pam, rig):
    """fprintd stopped (SIGSTOP) answers nothing: every D-Bus call gives up
    after 5 s (sd-bus would wait 25 s per call) and the passcode takes over."""
    import os
    os.kill(rig.fprintd_pid, signal.SIGSTOP)
    try:
        result = pam.run(answers=[ALICE], env=rig.env(), timeout=20)
    finally:
        os.kill(rig.fprintd_pid, signal.SIGCONT)
    assert result.code == PAM_SUCCESS
    assert result.prompts() == [PASSCODE_PROMPT]
    assert (pam.record().F, pam.record().P) == (0, 0)


# ---- a guess whose verdict is queued behind a flood is never refunded ----

@contextlib.contextmanager
def watched_prompt(pam, rig):
    """A terminal-mode prompt, and a bus client that records every signal
    fprintd broadcasts (as an attacker's would). Both end on the way out.
    -> (process, listener, [(member, args)])"""
    from fprint_rig import FPRINT_NAME, _Client
    pam.write_owner_stack(args="mode=terminal timeout=20")
    listener = _Client(rig.bus_address)
    seen = []
    listener.subscribe(FPRINT_NAME, None, None, None, lambda s, p, i, m, a: seen.append((m, a)))
    proc = pam.spawn(answers=[], env=rig.env(), count_interrupts=True)
    try:
        yield proc, listener, seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        listener.close()


def stop_flood_scan_interrupt(pam, rig, scan):
    """The attack on a refund: while the prompt waits for a finger, stop it,
    queue a flood of unicast signals in front of whatever fprintd sends it
    next, put a finger on the reader (`scan()` does, returning what to close
    afterwards), learn the verdict from fprintd's broadcast (as any bus
    client can), then Ctrl-C and continue it. -> (verdicts seen, Run)"""
    finger = None
    with watched_prompt(pam, rig) as (proc, listener, seen):
        try:
            assert listener.pump(lambda: any(m == "VerifyFingerSelected" for m, _ in seen), 20), "the prompt never started a verify"
            target = rig.bus_name_of(proc.pid)
            proc.send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + 10
            while process_state(proc.pid) != "T":
                assert time.monotonic() < deadline, "the prompt did not stop"
                time.sleep(0.001)  # polling a condition, bounded by the deadline
            rig.flood(target)
            finger = scan()
            assert listener.pump(lambda: any(m == "VerifyStatus" for m, _ in seen), 20), "the attacker never saw the verdict"
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGCONT)
            out, err = proc.communicate(timeout=60)
        finally:
            if finger is not None:
                finger.close()
    return [a[0] for m, a in seen if m == "VerifyStatus"], parse_run(out, err)


def virtual_scan(rig, command):
    def scan():
        rig.send_vdev(command)
    return scan


@pytest.mark.stop_proof
@pytest.mark.parametrize("trial", range(3))
def test_a_judged_miss_behind_a_flood_stays_counted(pam, rig, trial):
    verdicts, result = stop_flood_scan_interrupt(pam, rig, virtual_scan(rig, MISS))
    assert verdicts == ["verify-no-match"]
    # The miss counts; the Ctrl-C came while that finger was judged, so it
    # ends the phase as during that attempt: a cancel, left to the program,
    # and no next attempt charged.
    assert pam.record().F == 1, result.stdout
    assert result.texts("error") == ["Fingerprint not recognized."]
    assert result.code == PAM_CONV_ERR and result.interrupts_delivered == 1


@pytest.mark.parametrize("trial", range(3))
def test_a_judged_match_behind_a_flood_succeeds(pam, rig, trial):
    verdicts, result = stop_flood_scan_interrupt(pam, rig, virtual_scan(rig, MATCH))
    assert verdicts == ["verify-match"]
    assert result.code == PAM_SUCCESS, result.stdout
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_ctrl_c_with_a_finger_on_the_reader_stays_counted(pam, rig):
    """A finger reported present before the Ctrl-C may have been judged: no
    refund, although no verdict came."""
    with watched_prompt(pam, rig) as (proc, listener, seen):
        assert listener.pump(lambda: any(m == "VerifyFingerSelected" for m, _ in seen), 20)
        rig.send_vdev("FINGER 1")
        assert listener.pump(lambda: any(m == "PropertiesChanged" and a[1].get("finger-present") for m, a in seen), 20)
        # fprintd sent the change before it can see our stop, so the module
        # reads it before the stop's reply, however late it reads.
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    result = parse_run(out, err)
    assert result.code == PAM_CONV_ERR and result.interrupts_delivered == 1, out
    assert pam.record().F == 1


@pytest.mark.stop_proof
def test_a_forged_name_owner_changed_never_ends_an_attempt(pam, rig):
    """Anyone may send a signal named NameOwnerChanged saying fprintd left;
    only the bus driver's counts. Believing a forged one ended the attempt
    without the stop rule, refunding a finger that was judged meanwhile."""
    from gi.repository import GLib
    from fprint_rig import FPRINT_NAME, _Client
    with watched_prompt(pam, rig) as (proc, listener, seen):
        assert listener.pump(lambda: any(m == "VerifyFingerSelected" for m, _ in seen), 20)
        target = rig.bus_name_of(proc.pid)
        owner = rig.ctl.bus_call("GetNameOwner", GLib.Variant("(s)", (FPRINT_NAME,)), "(s)")[0]
        forger = _Client(rig.bus_address)
        try:
            forger.conn.emit_signal(target, "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                    GLib.Variant("(sss)", (FPRINT_NAME, owner, "")))
            # The prompt answers a ping only after it has handled what came before it.
            forger.call(target, "/", "org.freedesktop.DBus.Peer", "Ping", None, None, timeout=10)
        finally:
            forger.close()
        rig.send_vdev(MISS)  # still verifying: the miss is judged and counts
        assert listener.pump(lambda: any(m == "VerifyStatus" for m, _ in seen), 20)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    result = parse_run(out, err)
    assert "The fingerprint reader stopped working." not in result.texts(), out
    # The miss was judged and counts. The Ctrl-C, sent once fprintd had
    # broadcast it, is read after the verdict (the fallback it then offers)
    # or with it (a cancel, left to the program).
    errors = result.texts("error")
    assert errors == ["Fingerprint not recognized. Try again. Press Ctrl-C to Enter Password."] \
        or (errors == ["Fingerprint not recognized."] and result.interrupts_delivered == 1), out
    assert pam.record().F == 1
