"""The helper's world, shared by the tests of the setuid localauth-helper
(tests/programs/test_helper_client.py, test_helper_attacks.py): an
unprivileged user in a private mount namespace (private_world.py), the real
helper installed setuid root, real pam_unix against a private shadow and
the fprintd rig; the harness run as the user; a helper run by hand as the
user (HelperProcess) for the tests that play its client. A test file
imports the fixtures it uses (rig, world, w, helpers, and fprintd_alive,
which every test of the helper needs)."""
import os
import socket
import subprocess
import time
import warnings

import pytest

from lockers import helper_pids, wait_for
from helper_wire import CLIENT_HELLO, HELLO, REQUEST, frame, read_frame, request
from pamenv import BUILD, HARNESS, parse_run
from private_world import HELPER, HELPER_PATH
from sentences import PASSCODE_PROMPT
from worlds import shared_rig, shared_world

USER, UID, PASSWORD = "lockuser", 4300, "right-pw-1"
OTHER, OTHER_UID, OTHER_PASSWORD = "otheruser", 4301, "other-pw-2"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
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
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running
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
