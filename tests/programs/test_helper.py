"""The setuid localauth-helper and the module as its client, as an
unprivileged user in a private mount namespace (tests/support/private_world.py):
the real module through real libpam (the harness, run as the test user),
the real helper installed setuid root, real pam_unix against a private
shadow, and the fprintd rig with libfprint's virtual device.

Two kinds of test:
  * the module as client: the harness runs the locker stack as the user,
    so the module starts the helper and relays the conversation;
  * attacks on the helper itself: the test plays the helper's client over
    a socket pair and the helper runs as the user (setpriv), as anyone could
    run it.
Each attack test checks that nothing was granted, nothing was written where
it must not be, no charge was lost and the reader was released.
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import warnings

import pytest

from fprint_rig import RigError
from lockers import descendants, helper_pids, wait_for
from helper_wire import (CANCEL, USER_CANCEL, USER_FALLBACK, PASSWORD_TYPED, CLIENT_HELLO, CLIENT_HELLO_V2,
                         CLIENT_HELLO_V3, FALLBACK_OFFERED, ERROR_TEXT, HELLO, PROMPT_OFF, REPLY, REQUEST, RESULT,
                         STATUS_EVALUATED, STATUS_REFUSED, TEXT_INFO, converse, frame, read_frame, request)
from pamenv import BUILD, HARNESS, localauth_command, parse_run, run_in_terminal
from private_world import HELPER, HELPER_PATH
from sentences import FIRST_PROMPT, LOCKED
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)")

USER, UID, PASSWORD = "lockuser", 4300, "right-pw-1"
OTHER, OTHER_UID, OTHER_PASSWORD = "otheruser", 4301, "other-pw-2"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
PASSCODE_PROMPT = "Enter Password: "
INSTRUCTION = f"i3lock needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader."
ANSWER_TIMEOUT = 5
FAKE_HELPER = BUILD / "fakehelper"
PAM_SUCCESS, PAM_SYSTEM_ERR, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, PAM_CONV_ERR = 0, 4, 7, 9, 19
USER_CANCEL_ERROR, USER_FALLBACK_ERROR, APP_CANCEL, INVALID_CONTEXT = -2, -3, -9, -10


def write_locker_stacks(world):
    world.write_locker_stack("i3lock")
    world.write_locker_stack("swaylock", args="timeout=2")   # a caller may shorten the wait


rig = shared_rig(enroll=USER)
world = shared_world("helper", users={USER: (UID, PASSWORD), OTHER: (OTHER_UID, OTHER_PASSWORD)},
                     config=[f"answer_timeout = {ANSWER_TIMEOUT}"], prepare=write_locker_stacks)


@pytest.fixture(autouse=True)
def fprintd_alive(rig):
    """fprintd (1.94) can crash when a client is killed while it verifies
    (a NULL dereference, seen in CI after the helper's SIGKILL). A real
    system's bus starts it again at the next call; so does this, with a
    warning, so that one crash of fprintd's does not fail every later test."""
    if not rig.fprintd_running():
        warnings.warn("fprintd had exited (crashed?) before this test; started again")
        rig.start_fprintd()


@pytest.fixture
def w(world, rig):
    world.clear_state()
    world.password_entered()  # the first password of this boot: the finger is enough now
    world.install_helper(HELPER)
    for extra in ("fake-mode",):
        (world.helper.parent / extra).unlink(missing_ok=True)
    yield world
    try:  # a test that failed half-way must not leave its feeder running
        rig.feed_wait(timeout=1)
    except RigError:
        pass
    # No helper (real or stand-in) outlives its test.
    wait_for(lambda: not helper_pids(), what="every helper gone")


# ---------------------------------------------------------------- running things as the user

def harness_argv(w, answers, service="i3lock", user=USER, prefix=()):
    args = [HARNESS, "-s", service, "-u", user]
    for answer in answers:
        args += ["-a", answer]
    return w.argv(*prefix, *args, uid=UID)


def wrapper_env(w):
    """pam_wrapper in the harness: the module's pam_syslog lines reach stderr."""
    env = w.env(USER)
    env.update(LD_PRELOAD="libpam_wrapper.so", PAM_WRAPPER="1", PAM_WRAPPER_SERVICE_DIR="/etc/pam.d")  # the private one
    return env


def unlock(w, answers, feed=None, rig=None, service="i3lock", prefix=()):
    """One locker prompt through the module as the user."""
    if feed:
        rig.feed(feed)
    proc = subprocess.run(harness_argv(w, answers, service, prefix=prefix), env=wrapper_env(w), capture_output=True,
                          text=True, timeout=60)
    if feed:
        report = rig.feed_wait(timeout=30)
        assert report.ok, report
    return parse_run(proc.stdout, proc.stderr)


class HelperProcess:
    """The real helper run as the user with a socket on its standard input;
    the test is its client. `command` ends by exec'ing the helper."""

    def __init__(self, w, command=(HELPER_PATH,), pass_fds=(), uid=UID):
        self.sock, theirs = socket.socketpair()
        self.proc = subprocess.Popen(w.argv(*command, uid=uid), stdin=theirs, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=w.env(USER), pass_fds=pass_fds)
        theirs.close()

    def hello(self, version=CLIENT_HELLO):
        self.sock.sendall(frame(HELLO, version))
        kind, payload = read_frame(self.sock)
        assert kind == HELLO and payload[:4] == version, (kind, payload)   # answered in the client's version

    def ask(self, hello=CLIENT_HELLO, **fields):
        self.hello(hello)
        self.sock.sendall(frame(REQUEST, request(**fields)))

    def wait(self, timeout=30):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.sock.close()

    def close(self):
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()  # root kills it; the user could not
            self.proc.wait(timeout=10)


@pytest.fixture
def helpers(w):
    started = []

    def start(**kwargs):
        h = HelperProcess(w, **kwargs)
        started.append(h)
        return h
    yield start
    for h in started:
        h.close()


def wait_gone(pid, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.01)
    return False


def wait_counts(w, wanted, timeout=15):
    deadline = time.monotonic() + timeout
    while w.counts(UID) != wanted:
        assert time.monotonic() < deadline, f"counts {w.counts(UID)}, wanted {wanted}"
        time.sleep(0.01)


def given_back(w, scenario, tries=3):
    """Runs `scenario`, a fingerprint wait ended before any finger, until its
    attempt is given back, at most `tries` times. The refund needs proof
    that no finger was judged, and part of that proof is the stop leaving
    within 1 ms of the probe of the reader; a busy machine now and then
    delays it, and the attempt then stays charged (failing closed). Only
    that, named in the helper's log, may cost a try: any other charge fails
    the test at once."""
    for _ in range(tries):
        mark = w.syslog.mark()
        scenario()
        if w.counts(UID) == (0, 0):
            return
        assert w.counts(UID) == (1, 0), w.counts(UID)
        assert w.syslog.charged_only_by_the_stops_delay(mark), w.syslog.since(mark)
        w.clear_state()
        w.password_entered()
    pytest.fail(f"the attempt stayed charged in all {tries} tries, each time for the stop's delay")


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


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


# ================================================================ attacks on the helper itself

def test_helper_run_from_a_shell_explains_and_does_nothing(w):
    proc = subprocess.run(w.argv(HELPER_PATH, uid=UID), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=w.env(USER), timeout=30)
    assert proc.returncode == 2
    assert "talks to pam_localauth.so and localauth over a socket" in proc.stderr
    assert w.state_untouched()


def test_helper_directly_is_a_normal_prompt_for_ones_own_account(w, helpers):
    h = helpers()
    h.ask()
    messages, result = converse(h.sock, ["wrong-pw"])
    assert messages == [(PROMPT_OFF, FIRST_PROMPT)]
    assert result["status"] == STATUS_EVALUATED and result["pam"] == PAM_AUTH_ERR and result["fail_delay"] == 1
    assert h.wait() == 1
    assert w.counts(UID) == (0, 1)


@pytest.mark.parametrize("mode", ["terminal", "prompt", "bogus-mode"])
def test_helper_runs_a_callers_mode_other_than_scan_or_password_as_prompt(w, helpers, mode):
    """mode is presentation: the helper has no terminal, so a caller's
    terminal (or anything but scan and password) is prompt mode."""
    h = helpers()
    h.ask(mode=mode)
    messages, result = converse(h.sock, ["wrong-pw"])
    assert messages[0] == (PROMPT_OFF, FIRST_PROMPT), messages
    assert result["status"] == STATUS_EVALUATED and result["pam"] == PAM_AUTH_ERR
    assert h.wait() == 1
    assert w.counts(UID) == (0, 1)


def test_helper_in_password_mode_asks_only_the_password_with_the_back_off(w, helpers):
    """A caller's mode=password: no reader, the password with its count."""
    h = helpers()
    h.ask(mode="password")
    messages, result = converse(h.sock, ["wrong-pw"])
    assert messages == [(PROMPT_OFF, PASSCODE_PROMPT)], messages
    assert result["status"] == STATUS_EVALUATED and result["pam"] == PAM_AUTH_ERR
    assert h.wait() == 1
    assert w.counts(UID) == (0, 1)


def test_helper_refuses_another_users_name(w, helpers):
    h = helpers()
    h.ask(user=OTHER)
    messages, result = converse(h.sock, [OTHER_PASSWORD])
    assert messages == [(ERROR_TEXT, "localauth-helper: only your own account can be authenticated here")]
    assert result["status"] == STATUS_REFUSED and result["pam"] == PAM_SYSTEM_ERR and result["error"] == INVALID_CONTEXT
    assert h.wait() == 1
    assert w.state_untouched()


@pytest.mark.parametrize("key, value", [
    ("state_dir", "/tmp/localauth-attack-state"), ("passcode_service", "login"), ("lockout", "20"),
    ("conf", "/tmp/localauth-attack.conf"), ("max_tries", "10"), ("even_deny_root", "no"),
    ("passcode_backoff", "99:1s"), ("password_services", "i3lock"), ("answer_timeout", "600"), ("debug", "yes"),
])
def test_helper_refuses_security_options_from_the_caller(w, helpers, key, value):
    h = helpers()
    h.ask(**{key: value})
    messages, result = converse(h.sock, [PASSWORD])
    assert messages == [(ERROR_TEXT, f"localauth-helper: option {key} is set by the administrator only "
                                     "(in the configuration file)")]
    assert result["status"] == STATUS_REFUSED and result["pam"] != PAM_SUCCESS
    assert h.wait() == 1
    assert w.state_untouched()
    assert not os.path.exists("/tmp/localauth-attack-state")


def test_helper_timeout_from_the_caller_only_shortens(w, helpers, rig):
    """A caller may shorten the fingerprint wait, never lengthen it: with
    timeout=1 the wait ends (uncharged) without a finger."""
    def scenario():
        h = helpers()
        h.ask(timeout="1", policy="biometrics")
        started = time.monotonic()
        messages, result = converse(h.sock, [""])
        assert time.monotonic() - started < 10
        assert result["pam"] == PAM_AUTHINFO_UNAVAIL and result["error"] == -4, (messages, result)  # systemCancel
        assert h.wait() == 1
        rig.wait_until_claimable(USER, timeout=10)
    given_back(w, scenario)


HOSTILE = """\
import os, resource, signal, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))
resource.setrlimit(resource.RLIMIT_CPU, (1000, 1000))
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGHUP})
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
signal.signal(signal.SIGTSTP, signal.SIG_DFL)
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
os.umask(0)
env = {"PATH": "/tmp/attacker-bin", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/tmp/attacker-bus",
       "LOCALAUTH_STATE_DIR": "/tmp/attacker", "LD_PRELOAD": "/tmp/attacker.so"}
os.execve(sys.argv[1], sys.argv[1:], env)
"""


def test_helper_resets_what_the_caller_set(w, helpers):
    """Hostile limits, a blocked and ignored SIGALRM/SIGTERM, a stray
    descriptor, odd environment and umask, set by the user right before
    exec: the helper starts clean (seen in /proc while it waits), and a
    wrong password is still charged on disk with the file-size limit at 0."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    stray = os.dup2(os.open("/etc/hostname", os.O_RDONLY), 1500)   # above any fixed close loop
    os.set_inheritable(stray, True)
    # The control: the same exec of a shell does carry the hostile settings.
    report = ("import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], "
              "resource.getrlimit(resource.RLIMIT_NOFILE)[0]); print(open('/proc/self/status').read())")
    control = subprocess.run(w.argv("/usr/bin/python3", "-c", HOSTILE, "/usr/bin/python3", "-c", report, uid=UID),
                             env=w.env(USER), pass_fds=(stray,), capture_output=True, text=True, timeout=30)
    assert control.stdout.split()[:2] == ["0", "8"], control
    status = dict(line.split(":\t", 1) for line in control.stdout.splitlines()[1:] if ":\t" in line)
    assert int(status["SigBlk"], 16) & 0x6001 == 0x6001 and int(status["SigIgn"], 16) & 0x6000 == 0x6000, status
    assert status["Umask"] == "0000", status

    h = helpers(command=["/usr/bin/python3", "-c", HOSTILE, HELPER_PATH], pass_fds=(stray,))
    os.close(stray)
    h.ask()
    kind, text = read_frame(h.sock)
    assert (kind, text.decode()) == (PROMPT_OFF, FIRST_PROMPT)
    pid = h.proc.pid
    status = proc_status(pid)
    assert status["Uid"].split() == ["0"] * 4 and status["Gid"].split() == ["0"] * 4
    assert status["SigBlk"] == "0000000000000000"
    # SIGPIPE, SIGXFSZ and the job-control stops (SIGTSTP, SIGTTIN, SIGTTOU)
    # are the helper's own choice. glibc reserves signals 32 and 33 for itself
    # (no program can set them) and handles them itself.
    own = sum(1 << (s - 1) for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU))
    assert int(status["SigIgn"], 16) & ~(0b11 << 31) == own, status["SigIgn"]
    assert status["Umask"] == "0077"
    limits = open(f"/proc/{pid}/limits").read()
    assert "Max core file size        0                    0" in limits
    if can_raise_limits():
        assert "Max file size             unlimited            unlimited" in limits
        assert "Max cpu time              unlimited            unlimited" in limits
    # The first prompt is offered only with a reachable reader: the caller's
    # DBUS_SYSTEM_BUS_ADDRESS (a bus that does not exist) was ignored.
    targets = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert targets["0"].startswith("socket:") and targets["1"] == targets["2"] == "/dev/null", targets
    assert "/etc/hostname" not in targets.values()
    assert os.getsid(pid) == pid                           # out of the caller's session
    policy = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[38])
    assert policy == os.SCHED_OTHER
    h.sock.sendall(frame(REPLY, b"wrong-pw"))
    messages, result = converse(h.sock)
    assert h.wait() == 1
    if can_raise_limits():
        assert result["pam"] == PAM_AUTH_ERR
        assert w.counts(UID) == (0, 1)
    else:
        # Root without CAP_SYS_RESOURCE (some containers) cannot lift the
        # caller's hard file-size limit of 0: the charge cannot be written,
        # so the password is refused unchecked (an internal error), never
        # verified uncounted.
        assert result["pam"] == PAM_SYSTEM_ERR, (messages, result)
        assert w.counts(UID) == (0, 0)


def can_raise_limits():
    """CAP_SYS_RESOURCE in the bounding set (root may raise hard limits)."""
    return int(proc_status("self")["CapBnd"], 16) & (1 << 24) != 0


def test_helper_started_as_a_process_group_leader_refuses(w):
    """A process-group leader cannot leave its session, where its terminal
    could stop it while it holds the reader: the helper refuses to run."""
    sock, theirs = socket.socketpair()
    proc = subprocess.run(w.argv(HELPER_PATH, uid=UID), stdin=theirs, capture_output=True, text=True, env=w.env(USER),
                          preexec_fn=os.setpgrp, timeout=30)
    theirs.close()
    sock.close()
    assert proc.returncode == 2
    assert "cannot leave the caller's session" in proc.stderr
    assert w.state_untouched()


def test_helpers_that_never_say_hello_are_bounded_per_user(w, helpers):
    """The bound is kept before HELLO: helpers run as root, so the caller's
    process limit does not count them, and four silent ones already hold
    every slot. The fifth ends at once instead of waiting for its caller."""
    silent = [helpers() for _ in range(4)]
    wait_for(lambda: len(helper_pids()) >= 4, what="four helpers waiting for HELLO")
    started = time.monotonic()
    fifth = helpers()
    assert fifth.proc.wait(timeout=5) == 1
    assert time.monotonic() - started < 3
    assert read_frame(fifth.sock)[0] == HELLO
    messages, result = converse(fifth.sock)
    assert messages == [(ERROR_TEXT, "localauth-helper: too many prompts at once for this account")]
    assert result["status"] == STATUS_REFUSED
    assert all(h.proc.poll() is None for h in silent)
    silent[0].close()
    again = helpers()
    again.ask()
    assert read_frame(again.sock) == (PROMPT_OFF, FIRST_PROMPT.encode())


def test_a_full_state_filesystem_does_not_refuse_a_first_helper(w):
    """No free inodes where the helper's slots live (another user filled
    them): a user who never ran the helper before has no slot file and none
    can be made. The bound cannot be kept then; the right password must
    still unlock, not meet "too many prompts"."""
    seed = w.base / "inode-seed"
    (w.state / "helpers").mkdir(mode=0o700, exist_ok=True)
    script = (f"STATE={w.state}; rm -rf {seed}; mkdir -p {seed}; cp -a $STATE/. {seed}/; "
              f"mount -t tmpfs -o size=8m,nr_inodes=64,mode=0700 none $STATE; cp -a {seed}/. $STATE/; "
              "i=0; while touch $STATE/f$i 2>/dev/null; do i=$((i+1)); done; "
              f"test ! -e $STATE/helpers/{UID}-0.lock; "
              f"exec setpriv --reuid={UID} --regid={UID} --init-groups -- \"$@\"")
    argv = ["unshare", "--mount", "/bin/sh", str(w.enter), "sh", "-ec", script, "sh", HARNESS, "-s", "i3lock", "-u", USER,
            "-a", PASSWORD]
    proc = subprocess.run([str(a) for a in argv], env=wrapper_env(w), capture_output=True, text=True, timeout=60)
    run = parse_run(proc.stdout, proc.stderr)
    assert run.code == PAM_SUCCESS, (run, proc.stderr)
    assert not any("too many prompts" in text for text in run.texts()), run


def test_a_full_state_filesystem_keeps_the_bound_for_a_new_user(w, helpers):
    """Every caller's slots are bytes of one file, made by the first helper
    that ran. Once every inode is taken, a user who never ran the helper
    before needs no file of their own: four helpers run, a fifth is refused
    as on a roomy disk, and the right password unlocks. (Slot files per
    user ran out of inodes here: twelve helpers of one user ran at once.)"""
    seed = w.base / "reserve-seed"
    subprocess.run(["sh", "-ec", f"rm -rf {seed}; mkdir -p {seed}; cp -a {w.state}/. {seed}/; "
                    f"mount -t tmpfs -o size=8m,nr_inodes=96,mode=0700 none {w.state}; cp -a {seed}/. {w.state}/"],
                   check=True, timeout=30)
    try:
        first = helpers(uid=OTHER_UID)
        first.ask(user=OTHER)
        read_frame(first.sock)
        first.close()
        assert sorted(p.name for p in (w.state / "helpers").iterdir()) == ["slots"]
        filler = 0
        while True:
            try:
                (w.state / f"filler-{filler}").touch()
            except OSError:
                break
            filler += 1
        waiting = []
        for _ in range(4):
            h = helpers()
            h.ask()
            assert read_frame(h.sock) == (PROMPT_OFF, FIRST_PROMPT.encode())
            waiting.append(h)
        fifth = helpers()
        assert fifth.proc.wait(timeout=5) == 1
        assert read_frame(fifth.sock)[0] == HELLO
        messages, result = converse(fifth.sock)
        assert messages == [(ERROR_TEXT, "localauth-helper: too many prompts at once for this account")]
        assert sorted(p.name for p in (w.state / "helpers").iterdir()) == ["slots"]
        for h in waiting:
            h.close()
        run = unlock(w, [PASSWORD])
        assert run.code == PAM_SUCCESS, run
    finally:
        subprocess.run(["umount", "-l", str(w.state)], timeout=30)
        subprocess.run(["sh", "-ec", f"cp -a {seed}/. {w.state}/"], timeout=30)


def test_helper_runs_at_most_four_prompts_per_user(w, helpers):
    """Each waiting helper holds a system-bus connection billed to root: a
    fifth one for the same user is refused before it connects."""
    waiting = []
    for _ in range(4):
        h = helpers()
        h.ask()
        assert read_frame(h.sock) == (PROMPT_OFF, FIRST_PROMPT.encode())
        waiting.append(h)
    fifth = helpers()
    # Refused before it reads anything from its caller: it does not wait
    # for HELLO, and its answer waits in the socket.
    assert fifth.proc.wait(timeout=5) == 1
    assert read_frame(fifth.sock)[0] == HELLO
    messages, result = converse(fifth.sock)
    assert messages == [(ERROR_TEXT, "localauth-helper: too many prompts at once for this account")]
    assert result["status"] == STATUS_REFUSED and result["pam"] != PAM_SUCCESS
    # The module, as a fifth client, still reads that answer and says it.
    run = unlock(w, [PASSWORD])
    assert run.code == PAM_SYSTEM_ERR, run
    assert "localauth-helper: too many prompts at once for this account" in run.texts("error"), run
    waiting[0].sock.close()
    assert waiting[0].proc.wait(timeout=15) == 3
    again = helpers()                                   # a slot is free again
    again.ask()
    assert read_frame(again.sock) == (PROMPT_OFF, FIRST_PROMPT.encode())
    assert w.counts(UID) == (0, 0)


def bad_frames():
    hello = frame(HELLO, CLIENT_HELLO)
    return {
        "no hello": frame(REQUEST, request()),
        "other version": frame(HELLO, b"LAH\x02"),
        "unknown type": hello + frame(0x7F, b"x"),
        "oversized": hello + b"\x02\x00\x10\x00\x00",
        "truncated": hello + b"\x02\x00\x00",
        "result from the client": hello + frame(RESULT, b"\0" * 11),
        "reply before any prompt": hello + frame(REPLY, b"right-pw-1"),
    }


def ends_without_a_result(h):
    """The helper ended the conversation: frames, then the end of the
    socket, never a RESULT; its exit status is 3."""
    got = []
    try:
        while True:
            got.append(read_frame(h.sock, timeout=15))
    except (EOFError, ConnectionResetError):
        pass
    assert all(kind != RESULT for kind, _ in got), got
    assert h.wait() == 3


@pytest.mark.parametrize("name", sorted(bad_frames()))
def test_helper_bad_frames_end_it_with_nothing_granted(w, helpers, name):
    h = helpers()
    h.sock.sendall(bad_frames()[name])
    if name == "truncated":
        h.sock.shutdown(socket.SHUT_WR)
    ends_without_a_result(h)
    assert w.state_untouched()


def test_helper_oversized_reply_at_the_prompt_charges_nothing(w, helpers):
    h = helpers()
    h.ask()
    assert read_frame(h.sock)[0] == PROMPT_OFF
    h.sock.sendall(b"\x20\x00\x01\x00\x00" + b"x" * 100)
    with pytest.raises((EOFError, ConnectionResetError)):
        while True:
            read_frame(h.sock)
    assert h.wait() == 3
    assert w.counts(UID) == (0, 0)


def test_helper_closed_mid_fingerprint_wait_gives_back_the_attempt(w, helpers, rig):
    def scenario():
        h = helpers()
        h.ask()
        assert read_frame(h.sock)[0] == PROMPT_OFF
        h.sock.sendall(frame(REPLY, b""))
        assert read_frame(h.sock) == (TEXT_INFO, INSTRUCTION.encode())
        wait_counts(w, (1, 0))
        h.sock.close()
        assert h.proc.wait(timeout=15) == 3
        rig.wait_until_claimable(USER, timeout=10)
    given_back(w, scenario)


def fingerprint_wait_started(w, helpers):
    """A helper whose fingerprint wait has started: the attempt charged."""
    h = helpers()
    h.ask()
    assert read_frame(h.sock)[0] == PROMPT_OFF
    h.sock.sendall(frame(REPLY, b""))
    assert read_frame(h.sock)[0] == TEXT_INFO
    wait_counts(w, (1, 0))
    return h


def test_helper_cancel_mid_fingerprint_wait_is_app_cancel(w, helpers, rig):
    def scenario():
        h = fingerprint_wait_started(w, helpers)
        h.sock.sendall(frame(CANCEL))
        messages, result = converse(h.sock)
        assert result["pam"] == PAM_CONV_ERR and result["error"] == APP_CANCEL, (messages, result)
        assert h.wait() == 1
        rig.wait_until_claimable(USER, timeout=10)
    given_back(w, scenario)


def test_helper_user_cancel_mid_fingerprint_wait_is_user_cancel(w, helpers, rig):
    """An app's cancel button (not the app cancelling): userCancel, the
    pending attempt given back."""
    def scenario():
        h = fingerprint_wait_started(w, helpers)
        h.sock.sendall(frame(USER_CANCEL))
        messages, result = converse(h.sock)
        assert result["pam"] == PAM_CONV_ERR and result["error"] == USER_CANCEL_ERROR, (messages, result)
        assert h.wait() == 1
        rig.wait_until_claimable(USER, timeout=10)
    given_back(w, scenario)


def test_helper_user_fallback_after_a_miss_asks_for_the_password(w, helpers, rig):
    """An app's fallback button, offered after the first miss: the miss
    stays counted until the right password resets it."""
    h = helpers()
    h.ask()
    assert read_frame(h.sock)[0] == PROMPT_OFF
    rig.feed([MISS])
    h.sock.sendall(frame(REPLY, b""))
    assert read_frame(h.sock) == (TEXT_INFO, INSTRUCTION.encode())
    assert read_frame(h.sock) == (ERROR_TEXT, b"Fingerprint not recognized. Try again.")
    assert rig.feed_wait(timeout=30).ok
    wait_counts(w, (2, 0))                 # the miss, and the next attempt's charge
    h.sock.sendall(frame(USER_FALLBACK))
    messages, result = converse(h.sock, [PASSWORD])
    assert messages == [(PROMPT_OFF, PASSCODE_PROMPT)], messages
    assert result["pam"] == PAM_SUCCESS, (messages, result)
    assert h.wait() == 0
    assert w.counts(UID) == (0, 0)
    rig.wait_until_claimable(USER, timeout=10)


@pytest.mark.parametrize("hello", [CLIENT_HELLO_V2, CLIENT_HELLO], ids=["version 2", "version 1"])
def test_an_apps_sheet_scans_at_once_and_offers_the_fallback_after_a_miss(w, helpers, rig, hello):
    """Service localauth-app: no prompt, the instruction, a miss, then (to a
    version-2 client) FALLBACK_OFFERED with the app's title; the fallback
    then asks the password under that title. A version-1 client gets the
    same conversation without the new frame."""
    h = helpers()
    rig.feed([MISS])
    h.ask(hello=hello, service="localauth-app", fallback_title="Use Passphrase", reason="pay 3 EUR")
    kind, text = read_frame(h.sock)
    assert kind == TEXT_INFO and "pay 3 EUR" in text.decode(), (kind, text)
    assert read_frame(h.sock) == (ERROR_TEXT, b"Fingerprint not recognized. Try again.")
    if hello == CLIENT_HELLO_V2:
        assert read_frame(h.sock) == (FALLBACK_OFFERED, b"Use Passphrase")
    assert rig.feed_wait(timeout=30).ok
    wait_counts(w, (2, 0))                 # the miss, and the next attempt's charge
    h.sock.sendall(frame(USER_FALLBACK))
    messages, result = converse(h.sock, [PASSWORD])
    assert messages == [(PROMPT_OFF, "Use Passphrase: ")], messages
    assert result["pam"] == PAM_SUCCESS, (messages, result)
    assert h.wait() == 0
    assert w.counts(UID) == (0, 0)
    rig.wait_until_claimable(USER, timeout=10)


def test_password_typed_while_the_reader_waits_is_asked_and_charged(w, helpers, rig):
    """`localauth evaluate`'s touch or type (keys=client): the instruction
    says both ways, no fallback is offered after a miss, and PASSWORD_TYPED
    ends the wait before any fallback would; the password prompt follows,
    charged before it is checked, and the wait's attempt is given back."""
    h = helpers()
    rig.feed([MISS])
    h.ask(hello=CLIENT_HELLO_V3, service="localauth-app", keys="client")
    kind, text = read_frame(h.sock)
    assert kind == TEXT_INFO and text.decode().endswith("or type your password:"), (kind, text)
    assert read_frame(h.sock) == (ERROR_TEXT, b"Fingerprint not recognized. Try again, or type your password.")
    assert rig.feed_wait(timeout=30).ok
    wait_counts(w, (2, 0))                 # the miss, and the next attempt's charge
    h.sock.sendall(frame(PASSWORD_TYPED))
    messages, result = converse(h.sock, ["wrong-password"])
    assert [kind for kind, _ in messages] == [PROMPT_OFF], messages
    assert result["pam"] == PAM_AUTH_ERR and h.wait() == 1, (messages, result)
    assert w.counts(UID) == (1, 1)
    rig.wait_until_claimable(USER, timeout=10)


@pytest.mark.parametrize("fields", [{"service": "localauth-app"}, {"service": "i3lock", "keys": "client"}],
                         ids=["without keys=client", "a locker's service"])
def test_password_typed_where_no_keys_are_read_ends_the_conversation(w, helpers, rig, fields):
    """PASSWORD_TYPED is a frame out of order unless the request said the
    client reads the keys, for an app: nothing is granted or charged past
    the reader's pending attempt, which is given back."""
    h = helpers()
    h.ask(hello=CLIENT_HELLO_V3, **fields)
    kind, _ = read_frame(h.sock)
    if kind == PROMPT_OFF:                 # a locker's first prompt: Enter starts the reader
        h.sock.sendall(frame(REPLY, b""))
        kind, _ = read_frame(h.sock)
    assert kind == TEXT_INFO
    wait_counts(w, (1, 0))
    h.sock.sendall(frame(PASSWORD_TYPED))
    ends_without_a_result(h)
    rig.wait_until_claimable(USER, timeout=10)
    assert w.counts(UID)[1] == 0


def test_an_apps_sheet_with_an_empty_title_never_offers_the_fallback(w, helpers, rig):
    h = helpers()
    rig.feed([MISS] * 3)
    h.ask(hello=CLIENT_HELLO_V2, service="localauth-app", policy="biometrics", fallback_title="")
    messages, result = converse(h.sock)
    assert rig.feed_wait(timeout=30).ok
    assert [kind for kind, _ in messages] == [TEXT_INFO, ERROR_TEXT, ERROR_TEXT, ERROR_TEXT], messages
    assert result["pam"] == PAM_AUTH_ERR and h.wait() == 1
    assert w.counts(UID) == (3, 0)


def test_helper_user_fallback_at_the_first_prompt_is_user_fallback_for_biometrics(w, helpers):
    h = helpers()
    h.ask(policy="biometrics")
    assert read_frame(h.sock)[0] == PROMPT_OFF
    h.sock.sendall(frame(USER_FALLBACK))
    messages, result = converse(h.sock)
    assert result["pam"] == PAM_AUTHINFO_UNAVAIL and result["error"] == USER_FALLBACK_ERROR, (messages, result)
    assert h.wait() == 1
    assert w.counts(UID) == (0, 0)


def test_the_helpers_refusal_of_a_refund_reaches_the_log(w, helpers, rig):
    """A stop whose proof fails (here: a finger resting on the reader) keeps
    the attempt charged and tells the administrator why."""
    from fprint_rig import FPRINT_NAME, _Client
    listener = _Client(rig.bus_address)
    seen = []
    listener.subscribe(FPRINT_NAME, None, None, None, lambda s, p, i, m, a: seen.append((m, a)))
    try:
        h = helpers()
        mark = w.syslog.mark()
        h.ask()
        assert read_frame(h.sock)[0] == PROMPT_OFF
        h.sock.sendall(frame(REPLY, b""))
        assert read_frame(h.sock)[0] == TEXT_INFO
        assert listener.pump(lambda: any(m == "VerifyFingerSelected" for m, _ in seen), 20)
        rig.send_vdev("FINGER 1")
        assert listener.pump(lambda: any(m == "PropertiesChanged" and a[1].get("finger-present") for m, a in seen), 20)
        h.sock.sendall(frame(CANCEL))
        messages, result = converse(h.sock)
    finally:
        listener.close()
    assert result["error"] == APP_CANCEL, (messages, result)
    assert h.wait() == 1
    assert w.counts(UID) == (1, 0)
    wait_for(lambda: any("it stays counted (a finger was on the reader)" in line for line in w.syslog.since(mark)),
             what="the log line")
    rig.wait_until_claimable(USER, timeout=10)


def test_helper_unanswered_prompt_ends_at_the_answer_deadline(w, helpers):
    """A client that stops answering (a stopped locker) holds nothing: the
    helper gives up after answer_timeout, with nothing charged."""
    h = helpers()
    h.ask()
    assert read_frame(h.sock)[0] == PROMPT_OFF
    started = time.monotonic()
    assert h.proc.wait(timeout=ANSWER_TIMEOUT + 10) == 3
    assert ANSWER_TIMEOUT - 0.5 <= time.monotonic() - started
    assert w.counts(UID) == (0, 0)


def test_two_helpers_for_one_user_share_one_reader_and_one_count(w, helpers, rig):
    first, second = helpers(), helpers()
    first.ask()
    assert read_frame(first.sock)[0] == PROMPT_OFF
    first.sock.sendall(frame(REPLY, b""))
    assert read_frame(first.sock) == (TEXT_INFO, INSTRUCTION.encode())
    second.ask()
    assert read_frame(second.sock)[0] == PROMPT_OFF
    second.sock.sendall(frame(REPLY, b""))
    kind, text = read_frame(second.sock)
    assert kind == TEXT_INFO and "in use" in text.decode(), text   # the reader is the first prompt's
    assert read_frame(second.sock) == (PROMPT_OFF, PASSCODE_PROMPT.encode())
    second.sock.sendall(frame(REPLY, b"wrong-pw"))
    _, result = converse(second.sock)
    assert result["pam"] == PAM_AUTH_ERR
    rig.feed([MATCH], on_cue=False)     # the first prompt's verify is running: scan now
    _, result = converse(first.sock)
    assert result["pam"] == PAM_SUCCESS and result["method"] == 1
    assert rig.feed_wait(timeout=30).ok
    assert first.wait() == 0 and second.wait() == 1
    assert w.counts(UID) == (0, 0)        # the match cleared the wrong password too


def test_the_user_cannot_read_edit_or_delete_their_record(w):
    assert unlock(w, ["wrong-pw"]).code == PAM_AUTH_ERR
    record = w.state / f"{UID}.rec"
    assert record.exists()
    probe = ("import os, sys\n"
             "for how in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):\n"
             "    try: os.open(sys.argv[1], how); print('opened')\n"
             "    except PermissionError: print('denied')\n"
             "try: os.unlink(sys.argv[1]); print('deleted')\n"
             "except PermissionError: print('denied')\n")
    proc = subprocess.run(w.argv("/usr/bin/python3", "-c", probe, record, uid=UID), capture_output=True, text=True,
                          env=w.env(USER), timeout=30)
    assert proc.stdout.split() == ["denied"] * 4, proc
    assert w.counts(UID) == (0, 1)


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
    suspends counting) into their locker's PAM process gains nothing: the
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
