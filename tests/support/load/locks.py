"""The load test's lock sampler: who waits for which lock file, and what a
holder does while it holds one."""
import collections
import os
import re
import struct
import threading
import time
from pathlib import Path


# ============================================================================
# The locks: who waits for which lock file
# ============================================================================

class LockSampler(threading.Thread):
    """Every `interval` s, records every process waiting for an flock on a
    lock file (or the directory) of the state directory: whose transaction
    it is (from its command line) and whose lock it waits for. The store
    waits by trying the lock again between short sleeps (its wait has a
    bound), so a waiter is not queued in /proc/locks: it is a transaction
    asleep with a lock file open whose flock /proc/locks shows another
    process holding. A wait is seen only while it lasts, so short waits
    are missed: what is seen is a lower bound (the samples are counted)."""

    def __init__(self, world, interval=0.002):
        super().__init__(name="load-locks", daemon=True)
        self.world = world
        self.interval = interval
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.samples = 0
        self.waits = collections.Counter()    # (waiter user, lock owner) -> samples
        self.spans = {}                       # (pid, lock owner) -> [first, last, waiter user], this phase
        self.longest = collections.Counter()  # waiter user -> longest wait seen (s)
        self.holding = collections.Counter()  # (holder user, what it was doing) while someone waited
        self.unconfirmed = 0                  # waiters gone by the second look (not counted)
        self.users_of_pid = {}
        self.targets = {}
        self.refresh()

    def refresh(self):
        """Between phases: the lock files as they are now; the waits of the
        phase that ended are closed (pids are reused across phases)."""
        stat = os.stat(self.world.state)
        device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}"
        names = {uid: name for name, uid in self.world.uids.items()}
        targets = {(device, stat.st_ino): "<state directory>"}
        for path in self.world.state.glob("*.lock"):
            owner = path.name[:-len(".lock")]
            owner = names.get(int(owner), owner) if owner.isdigit() else owner
            targets[(device, os.stat(path).st_ino)] = owner
        with self.lock:
            self.targets = targets
            for first, last, waiter in self.spans.values():
                self.longest[waiter] = max(self.longest[waiter], last - first)
            self.spans = {}
            self.users_of_pid = {}

    def _user_of(self, pid):
        if pid not in self.users_of_pid:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                self.users_of_pid[pid] = argv[argv.index(b"-u") + 1].decode() if b"-u" in argv else "?"
            except (OSError, IndexError, ValueError):
                self.users_of_pid[pid] = "?"
        return self.users_of_pid[pid]

    def _transactions(self):
        """The pids of the transactions now running (a `-u USER` in their
        command line), each command line read once per phase."""
        pids = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                pid = int(entry.name)
                if self._user_of(pid) != "?":
                    pids.append(pid)
        return pids

    def _open_lock_files(self, pid):
        """The state directory's lock files `pid` has open, when it sleeps
        (between two tries of a lock); empty otherwise."""
        try:
            number = Path(f"/proc/{pid}/syscall").read_text().split()[0]
            if number not in ("35", "230"):   # nanosleep, clock_nanosleep
                return set()
            found = set()
            for fd in os.scandir(f"/proc/{pid}/fd"):
                info = os.stat(fd.path)
                key = (f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}", info.st_ino)
                if key in self.targets:
                    found.add(key)
            return found
        except (OSError, IndexError):
            return set()

    def _read(self):
        """(holders {lock: pid}, waiters {(pid, lock)}) of the state
        directory's locks; None when /proc/locks is unreadable."""
        try:
            text = Path("/proc/locks").read_text()
        except OSError:
            return None
        holders = {}
        for line in text.splitlines():
            # "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF" holds the lock.
            fields = line.split()
            if len(fields) < 6 or fields[1] != "FLOCK":
                continue
            device, _, inode = fields[5].rpartition(":")
            key = (device, int(inode))
            if key in self.targets:
                holders[key] = int(fields[4])
        waiters = set()
        if holders:
            for pid in self._transactions():
                for key in self._open_lock_files(pid):
                    if holders.get(key, pid) != pid:
                        waiters.add((pid, key))
        return holders, waiters

    def run(self):
        while not self.stop.wait(self.interval):
            with self.lock:
                first = self._read()
                if first is None:
                    continue
                self.samples += 1
                holders, waiters = first
                if not waiters:
                    continue
                now = time.monotonic()
                # Who waits, and what each holder does, then a second look:
                # only what it confirms counts (a waiter still waiting was
                # alive when its command line was read; a holder still
                # holding was doing what was seen).
                users = {pid: self._user_of(pid) for pid, _ in waiters}
                activities = {key: holder_activity(holders[key]) for _, key in waiters if key in holders}
                second = self._read() or ({}, set())
                for pid, key in waiters:
                    owner = self.targets[key]
                    if (pid, key) not in second[1]:
                        self.unconfirmed += 1
                        continue
                    self.waits[(users[pid], owner)] += 1
                    span = self.spans.setdefault((pid, owner), [now, now, users[pid]])
                    span[1] = now
                for key, activity in activities.items():
                    pid = holders[key]
                    if second[0].get(key) != pid or not any(k == key for _, k in second[1]):
                        activity = "moved on before confirmed"
                    self.holding[(self._user_of(pid), activity)] += 1

    def holder_activities(self):
        return dict(self.holding)

    def foreign_waits(self):
        """Waits of a transaction for a lock that is not its own user's."""
        return {pair: count for pair, count in self.waits.items() if pair[0] != pair[1]}

    def longest_wait(self, users):
        self.refresh()
        return max((self.longest[user] for user in users), default=0.0)


# What a lock holder can be doing (x86_64 system call numbers); anything
# but file work under the lock would keep the user's other prompts waiting
# on something slower than the disk.
SYSCALL_NAMES = {0: "read", 1: "write", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll", 8: "lseek",
                 9: "mmap", 10: "mprotect", 11: "munmap", 16: "ioctl", 17: "pread64", 18: "pwrite64", 20: "writev",
                 21: "access", 23: "select", 32: "dup", 35: "nanosleep", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
                 47: "recvmsg", 72: "fcntl", 73: "flock", 74: "fsync", 75: "fdatasync", 76: "truncate", 77: "ftruncate",
                 82: "rename", 83: "mkdir", 87: "unlink", 90: "chmod", 91: "fchmod", 92: "chown", 93: "fchown",
                 102: "getuid", 160: "setrlimit", 97: "getrlimit", 202: "futex", 228: "clock_gettime",
                 230: "clock_nanosleep", 232: "epoll_wait", 257: "openat", 262: "newfstatat", 263: "unlinkat",
                 264: "renameat", 270: "pselect6", 271: "ppoll", 302: "prlimit64", 316: "renameat2", 332: "statx"}
FILE_WORK = {"read", "write", "close", "stat", "fstat", "lstat", "lseek", "pread64", "pwrite64", "fcntl", "flock",
             "fsync", "fdatasync", "truncate", "ftruncate", "rename", "mkdir", "unlink", "chmod", "fchmod", "chown",
             "fchown", "openat", "newfstatat", "unlinkat", "renameat", "renameat2", "statx", "getrlimit", "setrlimit",
             "prlimit64", "running", "gone", "mmap", "munmap", "mprotect", "clock_gettime", "getuid", "access"}


def holder_activity(pid):
    """The system call a process is in (from /proc/PID/syscall), "running",
    or "gone"; "threads" for a multi-threaded process (which thread holds the
    lock cannot be told)."""
    try:
        threads = int(re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))
        if threads > 1:
            return "threads"
        first = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    except (OSError, AttributeError, IndexError):
        return "gone"
    if first == "running":
        return "running"
    try:
        number = int(first)
    except ValueError:
        return first
    if number == -1:
        return "blocked outside a system call"
    name = SYSCALL_NAMES.get(number, f"syscall {number}")
    if name in ("poll", "ppoll"):
        name += " on " + polled_files(pid)
    return name


def polled_files(pid):
    """What a process in poll/ppoll waits on: the files of its pollfd array
    (read from its memory; root may)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        address, count = int(fields[1], 16), int(fields[2], 16)
        with open(f"/proc/{pid}/mem", "rb") as memory:
            memory.seek(address)
            data = memory.read(8 * min(count, 8))
        names = []
        for index in range(len(data) // 8):
            fd = struct.unpack_from("<i", data, 8 * index)[0]
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            names.append(re.sub(r"\[\d+\]", "", target))
        return "+".join(names) or "nothing"
    except (OSError, ValueError, IndexError, struct.error):
        return "?"
