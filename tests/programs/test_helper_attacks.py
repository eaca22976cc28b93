"""Attacks on the setuid localauth-helper itself: the test plays the
helper's client over a socket pair and the helper runs as the unprivileged
user (setpriv), as anyone could run it. Each test checks that nothing was
granted, nothing was written where it must not be, no charge was lost and
the reader was released. The world: helper_world.py."""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from lockers import helper_pids, wait_for
from helper_wire import (CANCEL, USER_CANCEL, USER_FALLBACK, PASSWORD_TYPED, CLIENT_HELLO, CLIENT_HELLO_V2,
                         CLIENT_HELLO_V3, FALLBACK_OFFERED, ERROR_TEXT, HELLO, PROMPT_OFF, REPLY, REQUEST, RESULT,
                         STATUS_EVALUATED, STATUS_REFUSED, TEXT_INFO, converse, frame, read_frame, request)
from pamenv import HARNESS, parse_run
from private_world import HELPER_PATH
from sentences import FIRST_PROMPT
from helper_world import (ANSWER_TIMEOUT, APP_CANCEL, INSTRUCTION, INVALID_CONTEXT, MATCH, MISS, OTHER,
                          OTHER_PASSWORD, OTHER_UID, PAM_AUTHINFO_UNAVAIL, PAM_AUTH_ERR, PAM_CONV_ERR, PAM_SUCCESS,
                          PAM_SYSTEM_ERR, PASSCODE_PROMPT, PASSWORD, UID, USER, USER_CANCEL_ERROR,
                          USER_FALLBACK_ERROR, given_back, proc_status, unlock, wait_counts, wrapper_env)
from helper_world import fprintd_alive, helpers, rig, w, world  # noqa: F401 (the fixtures these tests take)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)")


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


def four_wait_and_the_fifth_is_refused(helpers):
    """Four helpers of the user wait at the first prompt; a fifth is refused
    at once (HELLO, the sentence, a refusal). -> the four waiting."""
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
    assert result["status"] == STATUS_REFUSED and result["pam"] != PAM_SUCCESS
    return waiting


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
        waiting = four_wait_and_the_fifth_is_refused(helpers)
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
    # The fifth is refused before it reads anything from its caller: it
    # does not wait for HELLO, and its answer waits in the socket.
    waiting = four_wait_and_the_fifth_is_refused(helpers)
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


FLOOD = Path(__file__).resolve().parent.parent / "support" / "helper_flood.py"


def unreaped_helpers():
    """(pid, owner uid) of every helper that has exited and is not reaped."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name, state = text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()[0]
        if state == "Z" and name in (Path(HELPER_PATH).name[:15], ENDED_HELPER):
            found.append((int(entry), owner))
    return found


# The name an ended helper takes (HelperBounds.endedName).
ENDED_HELPER = "localauth-ended"


@contextlib.contextmanager
def flood(w, count, nproc=0, one_at_a_time=False, helper=HELPER_PATH):
    """The user starts `count` helpers (by the path `helper`) and reaps none
    until the block ends (tests/support/helper_flood.py); yields what each
    start came to."""
    argv = w.argv("/usr/bin/python3", str(FLOOD), str(helper), str(count), str(nproc), frame(HELLO, CLIENT_HELLO).hex(),
                  *(["--one-at-a-time"] if one_at_a_time else []), uid=UID)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=w.env(USER))
    try:
        line = proc.stdout.readline()
        assert line, "the flood reported nothing"
        yield json.loads(line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        wait_for(lambda: not [pid for pid, owner in unreaped_helpers() if owner == UID], what="the flood's helpers reaped")


@pytest.mark.parametrize("names", ["its own name", "a new name each time"])
def test_helpers_a_caller_never_reaps_are_its_own_and_bounded(w, helpers, names):
    """A caller that never reaps its helpers leaves a process each, as any
    child does. The helper ends as its caller's (not root's), under the name
    of an ended helper whatever name it was started by (a symbolic link of
    another name changes the name a process starts with), so what is left
    unreaped is the caller's own: after 16 the caller is refused with the
    sentence before any work, charged nothing, and another user's helper
    runs all the while."""
    helper = HELPER_PATH
    links = None
    if names == "a new name each time":
        links = Path(tempfile.mkdtemp(prefix="localauth-links-"))
        links.chmod(0o755)           # the user reaches it
        for number in range(20):
            (links / f"started-as-{number}").symlink_to(HELPER_PATH)
        helper = f"{links}/started-as-{{}}"
    try:
        flooded_and_refused(w, helpers, helper)
    finally:
        if links:
            shutil.rmtree(links)


def flooded_and_refused(w, helpers, helper):
    """20 helpers started by the path `helper`, none reaped: 16 end, 4 are
    refused; another user's helper runs meanwhile; the module's own client
    hears the refusal; nothing is charged, and once reaped the password
    unlocks."""
    with flood(w, 20, one_at_a_time=True, helper=helper) as report:
        assert report["outcomes"] == ["ended"] * 16 + ["refused"] * 4, report
        left = [owner for pid, owner in unreaped_helpers() if pid in report["pids"]]
        assert left == [UID] * 20, left
        other = helpers(uid=OTHER_UID)
        other.ask(user=OTHER)
        assert read_frame(other.sock) == (PROMPT_OFF, PASSCODE_PROMPT.encode())   # not enrolled: the password
        other.close()
        run = unlock(w, [PASSWORD])
        assert run.code == PAM_SYSTEM_ERR, run
        assert "localauth-helper: too many prompts at once for this account" in run.texts("error"), run
    assert w.counts(UID) == (0, 0)
    run = unlock(w, [PASSWORD])
    assert run.code == PAM_SUCCESS, run


def test_a_read_only_state_directory_keeps_four_prompts_at_once(w, helpers):
    """The slots that bound the helpers running at once for a caller live in
    the state directory; a user who makes that disk read-only (a thin pool
    filled) would run helpers without end. They are then kept in
    /run/localauth: four wait, the fifth is refused."""
    w.read_only_state = True
    try:
        waiting = four_wait_and_the_fifth_is_refused(helpers)
        for h in waiting:
            h.close()
    finally:
        w.read_only_state = False


def test_the_callers_process_limit_counts_the_helpers_it_leaves(w):
    """The review's flood: a user limited to 40 processes opened 409 helpers
    at once, none reaped (they were root's, so the limit did not count
    them). Now each one the user leaves is one of the user's processes: the
    kernel refuses the start past the limit. The flood itself is one of
    the 40; a helper closes its socket while still root's and becomes the
    caller's a moment later, so the start that follows may find one slot
    more: 40 helpers is the most, never more."""
    with flood(w, 100, nproc=40) as report:
        started = [o for o in report["outcomes"] if not o.startswith("cannot start")]
        assert 0 < len(started) <= 40, report
        assert report["outcomes"][-1] == "cannot start: EAGAIN", report
        mine = [owner for pid, owner in unreaped_helpers() if pid in report["pids"]]
        assert mine == [UID] * len(started), mine
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
