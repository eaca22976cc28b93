"""The setuid localauth-helper with the module as its client: the harness
runs a locker's stack as the unprivileged user, so the module starts the
helper and relays the conversation (unlocks, lockout, back-off, a killed or
stopped client); a helper that cannot be used (missing, not setuid, without
privilege) or a stand-in that dies, hangs or lies never grants; and
`localauth check` and `test` as the user. The world: helper_world.py."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from lockers import descendants, wait_for
from pamenv import BUILD, localauth_command, parse_run, run_in_terminal
from private_world import HELPER
from sentences import FIRST_PROMPT, LOCKED
from helper_world import (ANSWER_TIMEOUT, FAKE_HELPER, INSTRUCTION, MATCH, MISS, OTHER, OTHER_PASSWORD,
                          PAM_AUTH_ERR, PAM_CONV_ERR, PAM_SUCCESS, PAM_SYSTEM_ERR, PASSCODE_PROMPT, PASSWORD, UID,
                          USER, harness_argv, proc_status, unlock, wait_counts, wait_gone, wrapper_env)
from helper_world import fprintd_alive, rig, w, world  # noqa: F401 (the fixtures these tests take)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)")


# ================================================================ the module as client

def test_locker_password_unlocks_through_the_helper(w):
    run = unlock(w, [PASSWORD])
    assert run.code == PAM_SUCCESS, run
    assert run.prompts() == [FIRST_PROMPT]
    assert w.counts(UID) == (0, 0)


def test_locker_wrong_password_is_charged_and_delayed(w):
    run = unlock(w, ["wrong-pw"])
    assert run.code == PAM_AUTH_ERR, run
    assert run.fail_delay and run.fail_delay > 0
    assert w.counts(UID) == (0, 1)


def test_locker_enter_then_finger(w, rig):
    run = unlock(w, [""], [MATCH], rig)
    assert run.code == PAM_SUCCESS, run
    assert run.messages == [("prompt-off", FIRST_PROMPT), ("info", INSTRUCTION)]
    assert w.counts(UID) == (0, 0)


def test_locker_three_misses_then_password(w, rig):
    run = unlock(w, ["", PASSWORD], [MISS] * 3, rig)
    assert run.code == PAM_SUCCESS, run
    assert run.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert run.texts("error") == ["Fingerprint not recognized. Try again."] * 2 + ["Fingerprint not recognized."]
    assert w.counts(UID) == (0, 0)


def test_locker_lockout_across_prompts_only_the_password_lifts_it(w, rig):
    first = unlock(w, [""], [MISS] * 3, rig)           # no answer left at the password prompt: a cancel
    assert first.code == PAM_CONV_ERR and w.counts(UID) == (3, 0), first
    second = unlock(w, [""], [MISS] * 2, rig)
    assert second.code == PAM_CONV_ERR and w.counts(UID) == (5, 0), second
    assert LOCKED in second.texts("error")
    third = unlock(w, ["wrong-pw"])                    # locked: straight to the password
    assert third.messages[:2] == [("error", LOCKED), ("prompt-off", PASSCODE_PROMPT)], third
    assert third.code == PAM_AUTH_ERR and w.counts(UID) == (5, 1)
    fourth = unlock(w, [PASSWORD])
    assert fourth.code == PAM_SUCCESS and w.counts(UID) == (0, 0), fourth


def test_locker_password_backoff_refuses_even_the_right_password(w):
    """Five wrong passwords start the back-off: the typed password is refused
    unchecked (the right one too: the count stays), the finger still works."""
    for attempt in range(5):
        assert unlock(w, [f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    assert w.counts(UID) == (0, 5)
    refused = unlock(w, [PASSWORD])
    assert refused.code == PAM_AUTH_ERR, refused
    assert refused.prompts() == [FIRST_PROMPT]
    assert refused.texts("error") == ["Too many wrong passwords. Try again in 1 minute."]
    assert w.counts(UID) == (0, 5)


def test_locker_finger_works_during_the_password_backoff(w, rig):
    for attempt in range(5):
        assert unlock(w, [f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    run = unlock(w, [""], [MATCH], rig)
    assert run.code == PAM_SUCCESS, run
    assert w.counts(UID) == (0, 0)


@pytest.mark.stop_proof
@pytest.mark.parametrize("misses", [0, 1])
def test_locker_killed_mid_prompt_loses_no_charge(w, rig, misses):
    """The locker dies while the helper waits for a finger: the helper sees
    its channel close, gives back the attempt nobody touched the reader
    for, keeps the misses, and releases the reader."""
    if misses:
        rig.feed([MISS] * misses)
    proc = subprocess.Popen(harness_argv(w, [""]), env=wrapper_env(w), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        wait_counts(w, (misses + 1, 0))       # the next attempt is charged while it waits
        if misses:
            assert rig.feed_wait(timeout=30).ok
        helper = descendants(proc.pid)
        assert len(helper) == 1
        proc.kill()
        proc.wait(timeout=10)
        assert wait_gone(helper[0]), "the helper outlived its client"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert w.counts(UID) == (misses, 0)
    rig.wait_until_claimable(USER, timeout=10)


@pytest.mark.stop_proof
def test_locker_stopped_mid_prompt_holds_nothing_and_gains_nothing(w, rig):
    """SIGSTOP of the locker while the helper waits for a finger (the stack
    line shortens the wait to 2 s): the miss stays counted, the untouched
    attempt is given back at the timeout, the password prompt goes
    unanswered, the helper gives up at the answer deadline and releases the
    reader; continued, the locker gets a failure, never a success."""
    proc = subprocess.Popen(harness_argv(w, [""], service="swaylock"), env=wrapper_env(w), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_counts(w, (1, 0))                       # the first attempt charged: the reader waits
        helper = descendants(proc.pid)
        assert len(helper) == 1
        rig.feed([MISS], on_cue=False)
        assert rig.feed_wait(timeout=30).ok
        wait_counts(w, (2, 0))                       # the miss kept, the next attempt charged
        os.kill(proc.pid, signal.SIGSTOP)
        assert wait_gone(helper[0], timeout=2 + ANSWER_TIMEOUT + 15), "the helper waited past its deadlines"
        rig.wait_until_claimable(USER, timeout=10)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
    run = parse_run(out, err)
    assert run.code == PAM_SYSTEM_ERR, run             # no RESULT: a failure, never a success
    assert "localauth-helper failed" in run.stderr
    assert w.counts(UID) == (1, 0)


@contextlib.contextmanager
def helper_waiting_for_a_finger(w):
    """A locker prompt whose helper has charged the first attempt and waits
    for a finger. -> (locker process, helper pid); the locker ends on the
    way out."""
    proc = subprocess.Popen(harness_argv(w, [""]), env=wrapper_env(w), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_counts(w, (1, 0))
        helper = descendants(proc.pid)
        assert len(helper) == 1
        yield proc, helper[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop_and_wait(pid):
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: proc_status(pid).get("State", "").startswith("T"), what="the helper stopped")


@pytest.mark.parametrize("how", ["killed", "stopped-then-killed"])
def test_the_helper_killed_mid_prompt_grants_nothing_and_frees_the_reader(w, rig, how):
    """The root helper dies while it waits for a finger (the administrator,
    the OOM killer): the locker gets a failure with a log line, never a
    success; the pending attempt stays charged (it may have been judged);
    fprintd gives the reader back when the helper's connection goes."""
    with helper_waiting_for_a_finger(w) as (proc, helper):
        if how == "stopped-then-killed":
            stop_and_wait(helper)
        os.kill(helper, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    run = parse_run(out, err)
    assert run.code == PAM_SYSTEM_ERR, run
    assert "localauth-helper failed" in run.stderr
    assert w.counts(UID) == (1, 0)
    rig.reader_given_back(USER)


def test_the_helper_stopped_and_continued_goes_on(w, rig):
    """SIGSTOP then SIGCONT of the helper (by root): the prompt carries on
    and a finger put on the reader meanwhile still unlocks."""
    with helper_waiting_for_a_finger(w) as (proc, helper):
        stop_and_wait(helper)
        rig.feed([MATCH], on_cue=False)
        assert rig.feed_wait(timeout=30).ok
        os.kill(helper, signal.SIGCONT)
        out, err = proc.communicate(timeout=30)
    run = parse_run(out, err)
    assert run.code == PAM_SUCCESS, run
    assert w.counts(UID) == (0, 0)


def test_locker_other_users_name_is_out_of_scope(w):
    proc = subprocess.run(harness_argv(w, [OTHER_PASSWORD], user=OTHER), env=wrapper_env(w), capture_output=True,
                          text=True, timeout=60)
    run = parse_run(proc.stdout, proc.stderr)
    # The module steps aside (PAM_AUTHINFO_UNAVAIL); pam_unix (as the user) cannot check another account.
    assert run.code != PAM_SUCCESS
    assert FIRST_PROMPT not in run.prompts()
    assert w.state_untouched()


# ---------------------------------------------------------------- a helper that cannot be used

def test_helper_missing_leaves_the_decision_to_the_password_line(w):
    w.helper.unlink()
    run = unlock(w, [PASSWORD])
    assert run.code == PAM_SUCCESS, run               # pam_unix's own prompt and check
    assert run.prompts() == ["Password: "]
    assert "localauth-helper cannot be used" in run.stderr and "not installed" in run.stderr
    assert w.state_untouched()


def test_helper_not_setuid_is_not_started(w):
    w.install_helper(HELPER, mode=0o755)
    run = unlock(w, ["wrong-pw"])
    assert run.code == PAM_AUTH_ERR, run
    assert run.prompts() == ["Password: "]
    assert "not setuid root" in run.stderr
    assert w.state_untouched()


def test_helper_without_privilege_says_so_and_decides_nothing(w):
    """no_new_privs makes the setuid bit inert: the helper runs as the user
    and answers notPrivileged; the module logs it and steps aside. (pam_unix
    then fails too: no_new_privs also disarms its setgid unix_chkpwd.)"""
    run = unlock(w, [PASSWORD], prefix=("setpriv", "--no-new-privs", "--"))
    assert run.code == PAM_AUTH_ERR, run
    assert run.prompts() == ["Password: "]
    assert "does not run as root" in run.stderr
    assert w.state_untouched()


@pytest.mark.parametrize("mode, code, log", [
    ("exit0", PAM_SYSTEM_ERR, ("did not take HELLO", "no HELLO from the helper: channel closed")),
    ("silent", PAM_SYSTEM_ERR, "no HELLO"),
    ("garbage", PAM_SYSTEM_ERR, "unknown frame type"),
    ("forged", PAM_SYSTEM_ERR, "bad HELLO"),
    ("hang", PAM_SYSTEM_ERR, "no answer in time"),
    ("oversized", PAM_SYSTEM_ERR, "oversized frame"),
    ("unknown", PAM_SYSTEM_ERR, "unknown frame type"),
    ("nomethod", PAM_SYSTEM_ERR, "malformed RESULT"),
    ("secrethandled", PAM_SYSTEM_ERR, "it answered a secret action"),
    ("truncated", PAM_SYSTEM_ERR, "truncated frame"),
    ("success-exit1", PAM_SUCCESS, None),
])
def test_helper_that_dies_hangs_or_lies_never_grants(w, mode, code, log):
    """Only a well-formed RESULT after HELLO is a verdict: exit statuses,
    silence and garbage are failures with a log line (and a real RESULT
    counts even when the helper then exits 1)."""
    w.install_helper(FAKE_HELPER)
    (w.helper.parent / "fake-mode").write_text(mode + "\n")
    started = time.monotonic()
    run = unlock(w, [PASSWORD])
    assert run.code == code, run
    if log:
        alternatives = log if isinstance(log, tuple) else (log,)
        assert "localauth-helper failed" in run.stderr and any(a in run.stderr for a in alternatives), run.stderr
    assert time.monotonic() - started < 15


# ================================================================ localauth check and test as the user

def user_cli(w, *args):
    return subprocess.run(w.argv(localauth_command(), *args, uid=UID), capture_output=True, text=True,
                          env=w.env(USER), timeout=60)


def test_localauth_check_as_the_user_goes_through_the_helper(w, rig):
    """Through the helper a user's check sees the record too, so it can
    report biometryLockout; it never prompts and charges nothing."""
    usable = user_cli(w, "check", "--policy", "biometrics", "--json")
    assert usable.returncode == 0, usable.stderr
    report = json.loads(usable.stdout)
    assert report["can_evaluate"] is True and len(report["domain_state"]) == 64, report
    unlock(w, [""], [MISS] * 3, rig)
    unlock(w, [""], [MISS] * 2, rig)
    assert w.counts(UID) == (5, 0)
    locked = user_cli(w, "check", "--policy", "biometrics")
    assert locked.returncode == 13 and locked.stderr == "biometryLockout\n", locked
    owner = user_cli(w, "check")
    assert owner.returncode == 0, owner.stderr          # the password still works
    assert w.counts(UID) == (5, 0)
    assert user_cli(w, "check", "--user", OTHER).returncode == 3


def test_localauth_test_as_the_user_goes_through_the_helper(w, rig):
    argv = w.argv(localauth_command(), "test", uid=UID)
    argv[0] = shutil.which(argv[0])
    code, output = run_in_terminal(argv, w.env(USER), answers=["wrong-pw"])
    assert code == 1, output
    assert FIRST_PROMPT.strip() in output and "not authenticated: authenticationFailed (-1)" in output
    assert w.counts(UID) == (0, 1)
    code, output = run_in_terminal(argv, w.env(USER), answers=[PASSWORD])
    assert code == 0 and "authenticated: password" in output, output
    assert w.counts(UID) == (0, 0)


@pytest.mark.parametrize("control", ["required", "requisite", "[success=ok ignore=ignore default=bad]"])
def test_a_locker_line_after_lines_that_succeed_never_passes_the_step_aside(w, rig, control):
    """pam_fprintd's line in gdm-fingerprint given to the module, as a
    locker running as the user reaches it (through the helper): the lines
    before it succeed for anyone, so an ignore would be a login. The
    fallback typed at the first prompt and another user's name step aside,
    and the line fails; the finger still unlocks."""
    try:
        w.write_service("i3lock", ["auth requisite pam_nologin.so",
                                   "auth required pam_succeed_if.so user != root quiet_success",
                                   w.module_line(control=control, args="policy=biometrics"),
                                   "account required pam_permit.so"])
        fallback = unlock(w, ["typed text"])
        assert fallback.code != PAM_SUCCESS, fallback
        assert w.counts(UID) == (0, 0)
        proc = subprocess.run(harness_argv(w, [OTHER_PASSWORD], user=OTHER), env=wrapper_env(w), capture_output=True,
                              text=True, timeout=60)
        other = parse_run(proc.stdout, proc.stderr)
        assert other.code != PAM_SUCCESS, other
        finger = unlock(w, [""], feed=[MATCH], rig=rig)
        assert finger.code == PAM_SUCCESS, finger
    finally:
        w.write_locker_stack("i3lock")


def test_a_forged_errno_preloaded_into_the_locker_never_reaches_the_helper(w):
    """forged_errno: a user who preloads a library that fails every write
    to the state directory with EIO (as a failing disk would, which
    moves the counting to /run) into their locker's PAM process gains nothing: the
    setuid helper, which does the writing, runs in secure mode without the
    preload, so the wrong password is counted as always."""
    env = wrapper_env(w)
    env.update(LD_PRELOAD=f"libpam_wrapper.so {BUILD / 'faultinject.so'}", FAULT_CALL="write", FAULT_ERRNO="5",
               FAULT_MATCH=str(w.state), FAULT_LOG="/dev/null")
    proc = subprocess.run(harness_argv(w, ["wrong-pw"]), env=env, capture_output=True, text=True, timeout=60)
    run = parse_run(proc.stdout, proc.stderr)
    assert run.code == PAM_AUTH_ERR, run
    assert not any("cannot be written" in text for text in run.texts("error")), run
    assert w.counts(UID) == (0, 1)
