"""Real-file tests of the state store (R3, R12, R13 and the store format of docs/DESIGN.md).

They drive the real ledger and FileStateStore through the `la-store-probe`
tool (tests/support/programs/StoreProbe) against fresh state directories, and check
what matters on disk: counts, file types, owners and modes, exit codes.

Run as root:  /usr/bin/python3 -m pytest -q tests/module/test_store.py
"""
import os
import random
import resource
import select
import shlex
import signal
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

from pamenv import (is_reserve, OFFSET_CHECKSUM, OFFSET_F_P, OFFSET_FAILURE_COUNT, OFFSET_NAME, OFFSET_NEXT_SEQUENCE,
                    OFFSET_UID, OFFSET_VERSION, RECORD_MAGIC, RECORD_SIZE, SLOT_SIZE, current_slot, fnv1a64,
                    store_probe)

ROOT = Path(__file__).resolve().parents[2]
LOCKOUT = 5                 # default `lockout` (L)
FIRST_BACKOFF = 5           # default first back-off threshold
FIRST_BACKOFF_MS = 60_000   # default wait after 5 wrong passcodes
UID, NAME = 4242, "alice"
OTHER_UID, OTHER_NAME = 4343, "bob"
NOBODY = 65534
CAP_SYS_RESOURCE = 24

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the store trusts only root-owned files: run as root")


# ---------------------------------------------------------------- helpers

@pytest.fixture(scope="session")
def probe_path() -> str:
    """The probe binary (built with every test artifact by conftest)."""
    binary = store_probe()
    assert binary.exists(), binary
    return str(binary)


class Probe:
    def __init__(self, path: str):
        self.path = path

    def argv(self, *args) -> list:
        return [self.path] + [str(a) for a in args]

    def run(self, *args, preexec_fn=None, timeout=60, wrapper=()) -> subprocess.CompletedProcess:
        return subprocess.run(list(wrapper) + self.argv(*args), capture_output=True, text=True, timeout=timeout,
                              preexec_fn=preexec_fn)

    def charge(self, state, count=1, uid=UID, name=NAME, kind="passcode", **kw) -> subprocess.CompletedProcess:
        return self.run("charge", state, uid, name, count, kind, **kw)

    def charge_ok(self, state, count=1, uid=UID, name=NAME, kind="passcode"):
        proc = self.charge(state, count, uid, name, kind)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""

    def show(self, state, uid=UID, name=NAME) -> dict:
        proc = self.run("show", state, uid, name)
        assert proc.returncode == 0, proc.stderr
        return parse_fields(proc.stdout)

    def inspect(self, state, uid=UID, name=NAME) -> str:
        proc = self.run("inspect", state, uid, name)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()


def parse_fields(line: str) -> dict:
    fields = dict(item.split("=", 1) for item in line.split())
    assert set(fields) == {"F", "P", "backoff_ms"}, line
    return {key: int(value) for key, value in fields.items()}


@pytest.fixture
def probe(probe_path) -> Probe:
    return Probe(probe_path)


@pytest.fixture
def state(tmp_path) -> Path:
    """A fresh state directory: root-owned, 0700."""
    directory = tmp_path / "state"
    directory.mkdir()
    os.chown(directory, 0, 0)
    os.chmod(directory, 0o700)
    return directory


def decode_record(data: bytes, uid=UID, name=NAME) -> dict:
    """Independent reader of the on-disk format (Record.swift): asserts a
    record file whose current slot is a valid, checksummed record of this
    uid and name; returns its counts."""
    data = current_slot(data)
    assert data[:8] == RECORD_MAGIC
    version, size = struct.unpack_from("<HxxI", data, OFFSET_VERSION)
    assert (version, size) == (2, SLOT_SIZE)
    assert struct.unpack_from("<Q", data, OFFSET_CHECKSUM)[0] == fnv1a64(data[:OFFSET_CHECKSUM]), "checksum"
    stored_uid, name_length = struct.unpack_from("<IH", data, OFFSET_UID)
    assert stored_uid == uid
    assert data[OFFSET_NAME:OFFSET_NAME + name_length] == name.encode()
    F, P, backoff_ms = struct.unpack_from("<IIq", data, OFFSET_F_P)
    next_sequence = struct.unpack_from("<Q", data, OFFSET_NEXT_SEQUENCE)[0]
    failures = data[OFFSET_FAILURE_COUNT]
    return {"F": F, "P": P, "backoff_ms": backoff_ms, "next_sequence": next_sequence, "failures": failures}


def record_path(state: Path, uid=UID) -> Path:
    return state / f"{uid}.rec"


def assert_sound_record_file(path: Path, uid=UID, name=NAME) -> dict:
    """A regular root-owned 0600 file holding a valid record."""
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode), oct(info.st_mode)
    assert info.st_uid == 0
    assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    return decode_record(path.read_bytes(), uid, name)


def has_capability(status_text: str, capability: int) -> bool:
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> capability & 1)
    raise AssertionError(status_text)


def fsize_limit(soft, hard):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    return apply


# Drops CAP_SYS_RESOURCE for good (bounding and inheritable sets), so even
# root cannot raise a hard RLIMIT_FSIZE.
NO_SYS_RESOURCE = ("setpriv", "--inh-caps=-sys_resource", "--bounding-set=-sys_resource", "--")


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["show", "relative/dir", UID, NAME],
                                  ["charge", "/x", "not-a-uid", NAME, 1], ["charge", "/x", UID, NAME, 1, "iris"]])
def test_probe_rejects_bad_usage(probe, argv):
    proc = probe.run(*argv)
    assert proc.returncode == 2 and "usage:" in proc.stderr and proc.stdout == ""


# ---------------------------------------------------------------- 1. no lost updates

def test_parallel_charges_for_one_user_are_all_counted(probe, state):
    processes = [subprocess.Popen(probe.argv("charge", state, UID, NAME, 200), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(16)]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    assert probe.show(state) == {"F": 0, "P": 3200, "backoff_ms": 0}
    on_disk = assert_sound_record_file(record_path(state))
    assert on_disk["P"] == 3200 and on_disk["F"] == 0
    assert on_disk["failures"] == 8
    # Every charge's failure entry got its own attempt number: the eight kept
    # are consecutive and end just below the next one (numbers start from the
    # clocks, so only differences are fixed).
    data = current_slot(record_path(state).read_bytes())
    sequences = [struct.unpack_from("<Q", data, 408 + index * 152)[0] for index in range(8)]
    assert sequences == list(range(on_disk["next_sequence"] - 8, on_disk["next_sequence"]))


def test_fingerprint_charges_count_and_stop_at_the_lockout(probe, state):
    probe.charge_ok(state, 20, kind="fingerprint")   # the probe's lockout is 20, the maximum
    refused = probe.charge(state, 1, kind="fingerprint")
    assert refused.returncode == 1 and "lockout" in refused.stderr
    assert decode_record(record_path(state).read_bytes())["F"] == 20


# ---------------------------------------------------------------- 2. SIGKILL at any moment

def _read_line(pipe, timeout: float) -> bytes:
    ready, _, _ = select.select([pipe], [], [], timeout)
    assert ready, "the charger printed nothing"
    return pipe.readline()


def test_sigkill_never_loses_a_charge_nor_breaks_the_record(probe, state):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    completed_total = 0   # charges the chargers reported as durable
    before = 0
    start = None
    for round_number in range(30):
        charger = subprocess.Popen(probe.argv("charge", state, UID, NAME, 1_000_000, "--progress"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if round_number % 3 != 0:
            # Wait for the stream to run, so the kill lands among the writes.
            assert _read_line(charger.stdout, 30).startswith(b"charged ")
        time.sleep(rng.uniform(0.001, 0.050))
        charger.kill()
        assert charger.wait(timeout=30) == -signal.SIGKILL
        lines = [line for line in charger.stdout.read().splitlines()]
        charger.stdout.close()
        charger.stderr.close()
        done = len(lines) + (1 if round_number % 3 != 0 else 0)
        assert all(line.startswith(b"charged ") for line in lines)

        status = probe.inspect(state)
        assert status.startswith("status=loaded") or (status == "status=absent" and before == done == 0), status
        shown = probe.show(state)
        assert shown["F"] == 0, f"record treated as damaged after a kill: {shown}"
        # Never a lost charge; at most the one in flight landed unreported.
        assert before + done <= shown["P"] <= before + done + 1, (seed, round_number, before, done, shown)
        if (state / f"{UID}.rec").exists():
            on_disk = assert_sound_record_file(record_path(state))
            assert on_disk["P"] == shown["P"]
            # One attempt number per charge: next_sequence - P is the fixed start.
            start = on_disk["next_sequence"] - on_disk["P"] if start is None else start
            assert on_disk["next_sequence"] == start + on_disk["P"]
        completed_total += done
        before = shown["P"]
        leftovers = {p.name for p in state.iterdir() if not is_reserve(p.name)} - {f"{UID}.rec", f"{UID}.lock", f"{UID}.rec.tmp"}
        assert not leftovers
    assert completed_total > 0, "no charge ever completed: the kills were all too early"
    # Whatever the kills left behind, the next write works and counts exactly.
    probe.charge_ok(state, 1)
    assert probe.show(state)["P"] == before + 1
    assert not (state / f"{UID}.rec.tmp").exists()


@pytest.mark.parametrize("leftover", ["garbage", "symlink"])
def test_stale_temporary_file_does_not_break_the_next_write(probe, state, tmp_path, leftover):
    probe.charge_ok(state, 2)
    temporary = state / f"{UID}.rec.tmp"
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    if leftover == "garbage":
        temporary.write_bytes(os.urandom(100))
    else:
        temporary.symlink_to(victim)
    probe.charge_ok(state, 1)   # written in place: the leftover is not in the way
    assert probe.show(state)["P"] == 3
    assert victim.read_bytes() == b"keep me"
    record_path(state).unlink()
    probe.charge_ok(state, 1)   # a new file goes through the temporary name, which is cleared first
    assert probe.show(state)["P"] == 1
    assert victim.read_bytes() == b"keep me"
    assert not os.path.lexists(temporary)


# ---------------------------------------------------------------- 3. ulimit -f

def test_the_file_size_limit_is_in_force_for_children(tmp_path):
    """Control for the tests below: with RLIMIT_FSIZE 0 a plain write kills."""
    target = tmp_path / "out"
    proc = subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1", "count=1"], capture_output=True,
                          preexec_fn=fsize_limit(0, 0))
    assert proc.returncode == -signal.SIGXFSZ


# How each case imposes the limit on the charger: (soft, hard) set before
# exec, or a shell's `ulimit`, optionally without CAP_SYS_RESOURCE.
INF = resource.RLIM_INFINITY
LIMITS = {
    "soft-0": ((0, INF), None, ()),
    "soft-1k": ((1024, INF), None, ()),
    "soft-0-no-cap": ((0, INF), None, NO_SYS_RESOURCE),
    "shell-soft-0": (None, "ulimit -S -f 0", ()),
    "hard-0": ((0, 0), None, ()),
    "hard-1k": ((1024, 1024), None, ()),
    "shell-hard-0": (None, "ulimit -f 0", ()),
    "hard-0-no-cap": ((0, 0), None, NO_SYS_RESOURCE),
    "hard-1k-no-cap": ((1024, 1024), None, NO_SYS_RESOURCE),
}
SOFT_ONLY = ["soft-0", "soft-1k", "soft-0-no-cap", "shell-soft-0"]
HARD_AS_ROOT = ["hard-0", "hard-1k", "shell-hard-0"]
HARD_WITHOUT_CAPABILITY = ["hard-0-no-cap", "hard-1k-no-cap"]


def root_can_raise_hard_limits() -> bool:
    """Root raises a hard rlimit only with CAP_SYS_RESOURCE, which some
    containers withhold from root."""
    return has_capability(Path("/proc/self/status").read_text(), CAP_SYS_RESOURCE)


def limited_charge(probe: Probe, state: Path, count: int, case: str) -> subprocess.CompletedProcess:
    limits, shell, wrapper = LIMITS[case]
    if shell is not None:
        command = f"{shell}; exec {shlex.join([str(probe.path), 'charge', str(state), str(UID), NAME, str(count)])}"
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60,
                              preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_DFL))
    return probe.charge(state, count, preexec_fn=fsize_limit(*limits), wrapper=wrapper)


def assert_lands(probe: Probe, state: Path, case: str):
    probe.charge_ok(state, 2)
    proc = limited_charge(probe, state, 3, case)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)   # not killed by SIGXFSZ, not refused
    assert assert_sound_record_file(record_path(state))["P"] == 5


def assert_refused_and_intact(probe: Probe, state: Path, case: str):
    probe.charge_ok(state, 2)
    old = record_path(state).read_bytes()
    proc = limited_charge(probe, state, 1, case)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)   # refused: not killed, never success
    assert "refused" in proc.stderr
    assert record_path(state).read_bytes() == old
    assert probe.show(state) == {"F": 0, "P": 2, "backoff_ms": 0}
    assert {p.name for p in state.iterdir() if not is_reserve(p.name)} <= {f"{UID}.rec", f"{UID}.lock"}


def test_setpriv_drops_the_capability():
    """Control: the no-cap cases really run without CAP_SYS_RESOURCE."""
    status = subprocess.run(list(NO_SYS_RESOURCE) + ["cat", "/proc/self/status"], capture_output=True,
                            text=True, check=True).stdout
    assert not has_capability(status, CAP_SYS_RESOURCE)


@pytest.mark.parametrize("case", SOFT_ONLY)
def test_soft_file_size_limit_is_lifted_and_the_charge_lands(probe, state, case):
    assert_lands(probe, state, case)


@pytest.mark.parametrize("case", HARD_AS_ROOT)
def test_hard_file_size_limit_as_root(probe, state, case):
    """Root with CAP_SYS_RESOURCE raises the hard limit and the charge lands;
    root without it (a container that withholds it) must refuse cleanly."""
    if root_can_raise_hard_limits():
        assert_lands(probe, state, case)
    else:
        assert_refused_and_intact(probe, state, case)


@pytest.mark.parametrize("case", HARD_WITHOUT_CAPABILITY)
def test_unliftable_file_size_limit_refuses_and_keeps_the_old_record(probe, state, case):
    assert_refused_and_intact(probe, state, case)


# ---------------------------------------------------------------- 4. hostile records -> R12

def _flip(offset):
    """The same byte flipped in both slots: no whole copy is left."""
    def damage(path: Path, **_):
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x01
        data[SLOT_SIZE + offset] ^= 0x01
        path.write_bytes(bytes(data))
    return damage


def _write(make):
    def damage(path: Path, **_):
        data = make(path.read_bytes())
        path.unlink()
        path.write_bytes(data)
        os.chmod(path, 0o600)
    return damage


def _symlink_elsewhere(path: Path, elsewhere: Path, **_):
    os.replace(path, elsewhere)          # a valid record of this very user, moved out
    path.symlink_to(elsewhere)


def _symlink_dangling(path: Path, elsewhere: Path, **_):
    path.unlink()
    path.symlink_to(elsewhere)           # must never be created through the link


def _chown_nobody(path: Path, **_):
    os.chown(path, NOBODY, NOBODY)


def _chmod(mode):
    def damage(path: Path, **_):
        os.chmod(path, mode)
    return damage


def _fifo(path: Path, **_):
    path.unlink()
    os.mkfifo(path, 0o600)


def _other_uid(path: Path, probe: Probe, state: Path, **_):
    probe.charge_ok(state, 1, uid=OTHER_UID, name=OTHER_NAME)
    os.replace(record_path(state, OTHER_UID), path)


def _reused_uid(path: Path, probe: Probe, state: Path, **_):
    path.unlink()
    probe.charge_ok(state, 1, uid=UID, name="olduser")   # same uid, another user name


HOSTILE = {
    "random-bytes": _write(lambda old: os.urandom(RECORD_SIZE)),
    "zeros": _write(lambda old: bytes(RECORD_SIZE)),
    "truncated": _write(lambda old: old[:RECORD_SIZE // 2]),
    "empty": _write(lambda old: b""),
    "oversized": _write(lambda old: old + b"\0"),
    "huge": _write(lambda old: old * 512),
    "symlink-to-valid-record": _symlink_elsewhere,
    "dangling-symlink": _symlink_dangling,
    "wrong-owner": _chown_nobody,
    "world-writable": _chmod(0o666),
    "group-writable": _chmod(0o620),
    "fifo": _fifo,
    "other-uid-record": _other_uid,
    "reused-uid-other-name": _reused_uid,
    "bad-checksum-count-byte": _flip(292),
    "bad-checksum-name-byte": _flip(24),
    "bad-checksum-stored-sum": _flip(SLOT_SIZE - 3),
    "one-slot-alone": _write(lambda old: current_slot(old)),
    "bad-version": _flip(8),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_record_is_replaced_fail_closed(probe, state, tmp_path, kind):
    probe.charge_ok(state, 2)
    path = record_path(state)
    elsewhere = tmp_path / "elsewhere.rec"
    HOSTILE[kind](path, probe=probe, state=state, elsewhere=elsewhere)
    kept_elsewhere = elsewhere.read_bytes() if elsewhere.exists() else None
    assert probe.inspect(state).startswith("status=damaged"), kind

    shown = probe.show(state)
    assert shown["F"] == LOCKOUT and shown["P"] == FIRST_BACKOFF, shown
    assert 0 < shown["backoff_ms"] <= FIRST_BACKOFF_MS, shown

    on_disk = assert_sound_record_file(path)   # the replacement was written, as a safe file
    assert (on_disk["F"], on_disk["P"]) == (LOCKOUT, FIRST_BACKOFF)
    # The wait is running: each look saves its progress (R13), so a few ms may be gone.
    assert FIRST_BACKOFF_MS - 5_000 < on_disk["backoff_ms"] <= FIRST_BACKOFF_MS
    assert probe.inspect(state).startswith(f"status=loaded F={LOCKOUT} P={FIRST_BACKOFF} ")
    if kept_elsewhere is not None:
        assert elsewhere.read_bytes() == kept_elsewhere   # the symlink was never followed
    else:
        assert not os.path.lexists(elsewhere)
    # Stable: the next read does not replace it again or reset it.
    again = probe.show(state)
    assert again["F"] == LOCKOUT and again["P"] == FIRST_BACKOFF and 0 < again["backoff_ms"] <= shown["backoff_ms"]


def test_writes_never_go_through_a_hard_link(probe, state, tmp_path):
    """A second name of the record (a hard link) is a valid record, but the
    store never writes into a file with two names: it replaces the name."""
    probe.charge_ok(state, 2)
    other_name = tmp_path / "hardlink.rec"
    os.link(record_path(state), other_name)
    kept = other_name.read_bytes()
    probe.charge_ok(state, 1)
    assert probe.show(state)["P"] == 3
    assert other_name.read_bytes() == kept


@pytest.mark.parametrize("full", [False, True], ids=["empty", "non-empty"])
def test_a_directory_at_the_record_name_is_replaced_fail_closed(probe, state, full):
    """Only root can put a directory there, but it must not refuse every
    prompt (the owner would never get in): it is moved aside or removed and
    the fail-closed record takes its place."""
    record_path(state).mkdir(mode=0o700)
    if full:
        (record_path(state) / "inside").write_text("kept")
    shown = probe.show(state)
    assert shown["F"] == LOCKOUT and shown["P"] == FIRST_BACKOFF and 0 < shown["backoff_ms"] <= FIRST_BACKOFF_MS
    assert assert_sound_record_file(record_path(state))["P"] == FIRST_BACKOFF
    if full:
        aside = list(state.glob(f"{UID}.rec.odd-*"))  # moved aside under its inode number
        assert len(aside) == 1 and (aside[0] / "inside").read_text() == "kept"


# ---------------------------------------------------------------- 5. per-user locks

def _flock_holders(lock_file: Path):
    """The pids holding a flock on lock_file's inode, from /proc/locks."""
    inode = os.stat(lock_file).st_ino
    holders = set()
    with open("/proc/locks") as locks:
        for line in locks:
            # "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END"
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
                holders.add(int(fields[4]))
    return holders


def _has_open(pid: int, path: Path) -> bool:
    """Whether the process has path open (it is at the lock, trying it)."""
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False


def _on_disk_P(state: Path, uid=UID, name=NAME):
    """P as the record file says, read without taking the lock (None: no record)."""
    path = record_path(state, uid)
    return decode_record(path.read_bytes(), uid, name)["P"] if path.exists() else None


def test_users_never_wait_on_each_other(probe, state):
    """Ordering facts, no clocks: while alice's lock is held, bob's charge
    runs to completion; alice's charge, at alice's lock file (open in its
    process), does not land until the holder has released it, and then
    does."""
    # The holder would hold for 10 minutes; the test releases it (by killing
    # it: the kernel drops a dead process's flock) once the facts are in.
    holder = subprocess.Popen(probe.argv("hold", state, UID, NAME, 600), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    alice = None
    try:
        assert _read_line(holder.stdout, 30) == b"held\n"
        lock_file = state / f"{UID}.lock"
        assert _flock_holders(lock_file) == {holder.pid}
        before = _on_disk_P(state)

        # bob: completes while alice's lock is still held.
        probe.charge_ok(state, 1, uid=OTHER_UID, name=OTHER_NAME)
        assert holder.poll() is None, "bob's charge returned only after alice's holder ended"
        assert _flock_holders(lock_file) == {holder.pid}
        assert _on_disk_P(state, OTHER_UID, OTHER_NAME) == 1

        # alice: at alice's lock file while the holder has it (a wait
        # bounded far beyond this test, so that only the release ends it).
        alice = subprocess.Popen(probe.argv("charge", state, UID, NAME, 1, "--lock-wait=600000"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30   # a bound on the cue, not a policy timer
        while not _has_open(alice.pid, lock_file):
            assert alice.poll() is None, "alice's charge finished without waiting for alice's lock: " \
                                         + alice.stderr.read().decode()
            assert time.monotonic() < deadline, "alice's charge never reached alice's lock"
            time.sleep(0.005)
        assert holder.poll() is None and alice.poll() is None
        assert _on_disk_P(state) == before, "alice's charge landed while the lock was held"

        # Release: the holder goes away, and only then does alice's charge land.
        holder.kill()
        assert holder.wait(timeout=30) == -signal.SIGKILL
        out, err = alice.communicate(timeout=30)
        assert alice.returncode == 0, err
        assert out == b""
    finally:
        for proc in (holder, alice):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate()
    assert probe.show(state)["P"] == 1
    assert probe.show(state, OTHER_UID, OTHER_NAME)["P"] == 1
    assert _flock_holders(state / f"{UID}.lock") == set()


def test_a_lock_held_past_the_bound_refuses_the_charge_and_changes_nothing(probe, state):
    """A prompt stopped by its user while it writes (SIGSTOP, a frozen
    cgroup) holds its lock for as long as that user likes: the next charge
    waits the bound, is refused uncounted with the reason in the log, and
    leaves the record as it was; once the holder is gone it lands."""
    probe.charge_ok(state, 1)
    holder = subprocess.Popen(probe.argv("hold", state, UID, NAME, 600), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert _read_line(holder.stdout, 30) == b"held\n"
        refused = probe.run("charge", state, UID, NAME, 1, "--lock-wait=200")
        assert refused.returncode == 1, refused
        assert "the store failed; attempt refused" in refused.stderr
        assert "another prompt held the record's lock for 200 ms" in refused.stderr
        assert _on_disk_P(state) == 1
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.communicate()
    probe.charge_ok(state, 1)
    assert probe.show(state)["P"] == 2


# ---------------------------------------------------------------- 6. unsafe state directory

def _group_writable(directory: Path, **_):
    os.chmod(directory, 0o770)


def _other_writable(directory: Path, **_):
    os.chmod(directory, 0o703)


def _owned_by_nobody(directory: Path, **_):
    os.chown(directory, NOBODY, NOBODY)


def _symlinked(directory: Path, real: Path, **_):
    real.mkdir(mode=0o700)
    os.chmod(real, 0o700)
    directory.rmdir()
    directory.symlink_to(real)


def _regular_file(directory: Path, **_):
    directory.rmdir()
    directory.write_bytes(b"")
    os.chmod(directory, 0o600)


UNSAFE_DIRECTORIES = {
    "group-writable": _group_writable,
    "other-writable": _other_writable,
    "owned-by-another-uid": _owned_by_nobody,
    "symlink": _symlinked,
    "not-a-directory": _regular_file,
}


@pytest.mark.parametrize("kind", list(UNSAFE_DIRECTORIES))
def test_unsafe_state_directory_refuses_the_charge(probe, state, tmp_path, kind):
    real = tmp_path / "real-state"
    UNSAFE_DIRECTORIES[kind](state, real=real)
    proc = probe.charge(state, 1)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "refused" in proc.stderr
    assert probe.run("show", state, UID, NAME).returncode == 1
    for directory in (state, real):
        if directory.is_dir() and not directory.is_symlink():
            assert list(directory.iterdir()) == [], kind


def test_missing_state_directory_is_created_private(probe, tmp_path):
    directory = tmp_path / "new-state"
    probe.charge_ok(directory, 1)
    info = os.lstat(directory)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0
    assert stat.S_IMODE(info.st_mode) & 0o077 == 0
    assert assert_sound_record_file(record_path(directory))["P"] == 1
