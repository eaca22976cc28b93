"""Fixtures of the integration tests, which are in folders by the surface
they drive (docs/DESIGN.md, "Layout"); what they share is in support/,
importable from every folder: the PAM world (pamenv.py), fprintd
(fprint_rig.py), private worlds (private_world.py, worlds.py) and the C
and Swift programs the tests run (support/programs/)."""
import os
import re
import shutil
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from fprint_rig import FprintRig
from logind_mock import LogindMock, Session
from pamenv import ROOT, PamEnv, build


@pytest.fixture(scope="session", autouse=True)
def built():
    build()


@pytest.fixture
def pam(tmp_path):
    env = PamEnv(tmp_path)
    env.write_owner_stack("sudo")
    return env


@pytest.fixture
def rig(pam):
    """fprintd with the virtual device, alice's finger enrolled, and alice's
    first password of this boot typed: the finger is enough now. A test file
    that needs another rig defines its own `rig`."""
    with FprintRig() as rig:
        rig.enroll("alice")
        pam.password_entered("alice", rig)
        yield rig


@pytest.fixture
def logind(rig):
    """A logind on the test file's rig bus (each file has its own `rig`)."""
    if not Session.available():
        pytest.skip("no cgroup2 hierarchy at /sys/fs/cgroup/unified to make sessions in")
    with LogindMock(rig) as mock:
        yield mock


# ---- what a test file leaves behind ------------------------------------------
#
# A test that starts a process kills it, and one that mounts unmounts. The
# check is per test file, after its fixtures of every scope are gone: a
# process started by the file and still running (the suite is the child
# subreaper, so even a daemon that left its parent is found as ours), a
# mount left in the suite's namespace, or a new entry in /tmp. pam_wrapper cannot remove its /tmp/pam.X directory when
# its process is killed, which the signal tests do on purpose: those
# directories, of processes that are gone, are removed here instead. What a
# file left is listed at the end of the run, which then fails.

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _our_processes():
    """{(pid, start time): command} of the suite's live descendants."""
    parents, facts = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in "ZXx":
            continue
        parents[int(entry)] = int(fields[1])
        facts[int(entry)] = (fields[19], command)
    me = os.getpid()
    ours = {}
    for pid in parents:
        ancestor, steps = parents.get(pid), 0
        while ancestor not in (None, 0, 1, me) and steps < 64:
            ancestor, steps = parents.get(ancestor), steps + 1
        if ancestor == me and pid != me:
            ours[(pid, facts[pid][0])] = facts[pid][1]
    return ours


def _mounts():
    with open("/proc/self/mountinfo") as f:
        return {" ".join(line.split()[3:5]) for line in f}


def _wrapper_dir_is_stale(path):
    try:
        pid = int((path / "pid").read_text().strip() or "0")
    except (OSError, ValueError):
        pid = 0
    return pid == 0 or not os.path.exists(f"/proc/{pid}")


def _tmp_entries():
    """/tmp's entries, without pytest's own and the Swift toolchain's
    (TemporaryDirectory.*, SwiftPM's _<path>.lock files), and
    without empty directories (a socket directory such as .X11-unix)."""
    entries = set()
    for entry in os.listdir("/tmp"):
        path = Path("/tmp") / entry
        if entry.startswith(("pytest-of-", "TemporaryDirectory.")) or (entry.startswith("_") and entry.endswith(".lock")):
            continue   # SwiftPM's lock files are named after the paths they lock
        try:
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                continue
        except OSError:
            pass
        entries.add(entry)
    return entries


_FILE_START = {}
_LEFT_BEHIND = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.path not in _FILE_START:
        _FILE_START.clear()
        _FILE_START[item.path] = (_our_processes(), _mounts(), _tmp_entries())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    # After the file's last test and the teardown of its fixtures of every scope.
    if (nextitem is not None and nextitem.path == item.path) or item.path not in _FILE_START:
        return
    processes, mounts, tmp = _FILE_START.pop(item.path)
    deadline = time.monotonic() + 5   # a killed process may still be on its way out
    while True:
        left = {key: command for key, command in _our_processes().items() if key not in processes}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # polling a condition, bounded by the deadline
    for entry in _tmp_entries() - tmp:
        path = Path("/tmp") / entry
        if re.fullmatch(r"pam\.[0-9A-Za-z]", entry) and _wrapper_dir_is_stale(path):
            shutil.rmtree(path, ignore_errors=True)
    problems = [f"process {pid} still running: {command}" for (pid, _), command in sorted(left.items())]
    problems += [f"mount left: {mount}" for mount in sorted(_mounts() - mounts)]
    problems += [f"/tmp entry left: {entry}" for entry in sorted(_tmp_entries() - tmp)]
    for (pid, _), _command in left.items():
        try:
            os.kill(pid, signal.SIGKILL)   # so that the next file starts clean
        except ProcessLookupError:
            pass
    if problems:
        _LEFT_BEHIND.append((item.path.name, problems))


def pytest_sessionfinish(session, exitstatus):
    if not _LEFT_BEHIND:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for name, problems in _LEFT_BEHIND:
        reporter.write_line(f"{name} left behind:\n  " + "\n  ".join(problems), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ---- tests whose verdict depends on the stop's timing proof -----------------
#
# An attempt stopped while the reader waits (Ctrl-C, a cancel, the deadline)
# is given back only with proof that no finger was judged, and part of that
# proof is the stop leaving within 1 ms of the probe of the reader. On a
# virtual machine the host now and then takes the processor away for longer
# (steal time, measured here at about 2 % even when idle), and the attempt
# then stays charged: failing closed, as designed, but a test that expects
# the refund fails. Such tests carry the `stop_proof` mark and run up to
# five times; a real fault in the refund fails every run.

STOP_PROOF_RUNS = 5


def pytest_configure(config):
    _isolate_a_direct_run()
    _become_subreaper()
    # A suite started in the background of a script (`make test &`, nohup,
    # some CI runners) inherits SIGINT, SIGQUIT or SIGHUP ignored, and every
    # program it starts would inherit that too: the tests that end a prompt
    # with a signal would then see it live on. Give the programs the
    # defaults a terminal gives them.
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    config.addinivalue_line("markers", "stop_proof: the expected refund needs the stop's timing proof (run up to 5 times)")
    closed = _closed_to_test_users(ROOT)
    if closed is not None:
        pytest.exit(f"the unprivileged test users cannot reach the module and the helper under {ROOT}: {closed} is mode "
                    f"{stat.S_IMODE(closed.stat().st_mode):04o}, which others cannot enter. Clone under a directory others can "
                    f"enter (chmod 755 {closed}), or the helper and locker tests fail with 'adding faulty module'.", returncode=4)


def _isolate_a_direct_run():
    """A run started as root without tools/isolated (`python3 -m pytest -q
    tests/programs/test_cli.py`, as CONTRIBUTING.md lists) starts again through it,
    with the same command line: the private /tmp that `make test` gives, so
    that other programs' entries in the machine's /tmp, or a stale
    /tmp/pam.X, neither fail the leftover check nor reach pam_wrapper."""
    if os.geteuid() != 0 or os.environ.get("LOCALAUTH_ISOLATED"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    isolated = ROOT / "tools" / "isolated"
    os.execv(isolated, [str(isolated), sys.executable, *sys.orig_argv[1:]])


def _closed_to_test_users(path):
    """The first directory from / down to `path` that a user other than its
    owner and group cannot enter (a clone made under `mktemp -d`, mode
    0700), or None. Only root runs the suite's unprivileged users."""
    if os.geteuid() != 0:
        return None
    for directory in reversed([path, *path.parents]):
        if not directory.stat().st_mode & stat.S_IXOTH:
            return directory
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if item.get_closest_marker("stop_proof") is None:
        return None
    from _pytest.runner import runtestprotocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for run in range(1, STOP_PROOF_RUNS + 1):
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        if not any(report.failed for report in reports) or run == STOP_PROOF_RUNS:
            break
        item.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"\n{item.nodeid}: run {run} failed; the stop's timing proof can be denied by load, running again")
        item._initrequest()
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
