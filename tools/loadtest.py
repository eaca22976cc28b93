#!/usr/bin/python3
"""The load test: many PAM transactions at once through the real module and
real libpam, against a real fprintd with libfprint's virtual device on a
private bus (tests/fprint_rig.py), for minutes, checking that every attempt
is counted exactly once, that nothing deadlocks, that no prompt waits on
another user's lock, that the single reader is held by one prompt at a time,
and that memory stays flat.

    make load                      # LOAD_SECONDS=300 by default
    tools/loadtest.py --seconds 300 [--seed N] [--json FILE]   (as root)

The world. A PamEnv-like private world (tests/pamenv.py) with 65 users:
alice (the one-user group), u01..u32 (the different-users group) and
c01..c32 (a control group), every one enrolled with the same virtual print,
so that `SCAN finger-load` is a match for whoever holds the reader and
`SCAN finger-nobody` a no-match. Every one starts from "password entered
this boot" (the finger is enough). Transactions are tests/pamharness.c
processes (one transaction each, `-L` for the latency) started at once in a
private mount namespace that binds the world's service files over
/etc/pam.d, as PamEnv.run_parallel does; the host's /etc is never changed.
The module and the harness run from private copies of the built ones (a
rebuild of the shared build directory during the run changes nothing), and
the service files are replaced atomically (a prompt starting while the
stack changes reads the old or the new one, never a cut one).

The stack is the owner stack, and rounds alternate two configurations:
"defaults" (lockout 5, back-off from the 5th wrong password), where every
fail phase of the one user crosses both limits, so that what they refuse
(uncharged) must be accounted for; and "wide" (`lockout=20
passcode_backoff=1000:1s`, documented options), where the limits are out of
reach and every attempt of 32 concurrent prompts is charged. Nothing weakens
the module.

Exact counting: rounds of phases. Every attempt is charged on disk before it
is verified (R3), and a success then resets F and P, so concurrent successes
make the final F and P of a user depend on an order nobody can see. Hence:

  fail     alice x32 and u01..u32 (one transaction each) at once; the reader
           answers only no-match and every typed password is wrong (some
           transactions cancel at the password prompt). No success can
           happen, so for every user F and P on disk must be exactly their
           value before the phase plus what its transactions report:
           F += the "Fingerprint not recognized" verdicts, P += the
           passwords typed and not refused by the back-off.
  mixed    the same groups; the reader answers a random mix of match and
           no-match (with retry hints, never charged) and the passwords are a
           random mix of right and wrong. For u01..u32, one transaction each,
           F and P are still exact (0 after a success, else as above). For
           alice, 32 at once, the exact check is the record's attempt
           number (offset 392), which every charge raises by one and
           nothing lowers: it must rise by exactly the attempts the
           transactions report (a success's own charge included). F and P
           are then bounded by what was charged, and the record's recent
           failures must agree with them: the entries not settled by a
           success are exactly the newest F+P attempt numbers, F of them
           fingerprint and P of them password entries.
  control  c01..c32 and u01..u32 at once, shaped as `fail`: the same number
           of processes, the same reader and fprintd traffic, but no
           shared user. u01..u32's latency here against `fail` is the
           measure of whether a prompt waits on another user's lock.
  solo     u01..u32 alone: the baseline latency.
  reset    after every phase, each user with a count or a wait left types
           the right password (one transaction each, at once); a user in
           the back-off (alice) does so in a time namespace whose boot clock
           is past the wait (pamenv.later_boot_clock), never by sleeping.
           Each must succeed and leave F = P = 0 and no wait.

In every phase the attempt number of every user must rise by exactly the
attempts its transactions report. The limits: F never exceeds the lockout
and P never exceeds the back-off threshold in a phase without a success,
and when a transaction was refused by one (the lockout sentence, or "Too
many wrong passwords") the count is then exactly at the limit.

Independent witnesses. The rig's feeder (ScanFeeder below: a continuous
form of fprint_rig's feeder, on the same VerifyFingerSelected cue) reports
every command it sent; per phase its matches must equal the transactions'
fingerprint successes and its no-matches their "not recognized" verdicts.
A dbus-monitor on the rig's bus sees every Claim (with the user name), its
reply or AlreadyInUse error, every Release and disconnect, and every
VerifyStatus: per user, successful claims must equal the transactions
that showed the fingerprint instruction, AlreadyInUse errors the
transactions told "The fingerprint reader is in use by another prompt.",
and the verdicts fprintd sent while that user held the reader the verdicts
the transactions report. No Claim may succeed while another prompt holds
the reader. A sampler of /proc/locks (every 2 ms) records every process
seen waiting for a lock file of the state directory, whose transaction it
is (its command line) and, confirmed by a second look that it still waits,
whose lock: a waiter on a lock that is not its own user's is a failure
(alice's transactions waiting on alice's lock is the expected queue, and
shows the sampler sees waits at all).

Deadlock: every phase has a bound (--bound, 120 s by default; the
fingerprint phase's own timeout is 30 s); a transaction still running then is
killed and reported. Latency is pam_authenticate's own (`-L`), per group.

What a lock holder does while someone waits for its lock is sampled too
(its system call, confirmed by a second look at /proc/locks): file work and
the processor are expected; a wait on anything else under the lock would
be a finding.

Memory: the VmRSS of both rigs' fprintd and of dbus-daemon after every
round (the growth from after round 1 to the end is bounded), and of two
long-running soak processes, `pamharness -n CYCLES -T 4 -q` and `-T 1`, root
on the `login` service, with a rig of their own (a second bus, fprintd and
virtual reader, root enrolled, its own feeder answering half match, half
no-match). Every cycle presses Enter for the finger and gets a match, or
no-matches or a busy reader and then types the right password: whole
fingerprint prompts side by side in one process (4 threads), and in one
malloc arena (1 thread), whose growth per attempt is the clean measure of a
leak. A short soak alongside round 1 measures a cycle under load; the long
ones are then sized to the time left. Each prints its VmRSS after the first
tenth of its cycles and at the end, and is sampled every 0.1 s once its
threads run. All cycles must succeed, and root's attempt number must
rise by exactly one per cycle plus one per no-match the soak's feeder sent.
Rounds run until --seconds have passed and the soaks have ended.
tools/loadharness.c runs such a workload on threads and prints every
transaction that does not succeed, to diagnose a soak failure.

Processes: both rigs (fprintd, dbus-daemon, the polkit stand-in), the
dbus-monitor, the soaks and every phase's process group are stopped by PID
on the way out (SIGTERM included), and a scan of /proc for anything still
running with the run's directory in its environment or command line fails
the run.

Exit status 0 when everything matched, 1 on any mismatch (each one printed).
"""
import argparse
import collections
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from gi.repository import GLib  # noqa: E402

from fprint_rig import DEVICE_IFACE, FPRINT_NAME, FprintRig, _Client, stop_process  # noqa: E402
from pamenv import (HARNESS, MODULE, OFFSET_FAILURE_COUNT, OFFSET_NEXT_SEQUENCE, PAM_AUTH_ERR, PAM_CONV_ERR,  # noqa: E402
                    PAM_SUCCESS, USERS, PamEnv, current_slot, later_boot_clock, parse_record, parse_run,
                    password_entered)

# ---- what the module says (Sources/LocalAuth/UserText.swift) ----------------
FIRST_PROMPT = "Password, or press Enter to use your fingerprint: "
PASSCODE_PROMPT = "Enter Password: "
INSTRUCTION = "the fingerprint reader."          # ends the instruction ("Swipe your finger across ...")
NOT_RECOGNIZED = "Fingerprint not recognized."   # every no-match verdict, with or without "Try again."
READER_BUSY = "The fingerprint reader is in use by another prompt."
LOCKED = "Fingerprint is locked until you enter your password."
BACKOFF = "Too many wrong passwords. Try again in "
HINTS = ("Scan failed. Try again.", "Swipe was too short. Try again.", "Finger was not centered. Try again.",
         "Remove your finger and try again.")
# Anything else the fingerprint phase can say ends it without a verdict (and
# refunds the attempt): under this load that is a fault to report.
UNEXPECTED = ("Timed out waiting for a fingerprint.", "The fingerprint reader was disconnected.",
              "The fingerprint reader stopped working.", "Your password is required")

# ---- the record (docs/DESIGN.md, "The state store"; offsets of tests/pamenv.py) --
FAILURES_OFFSET = OFFSET_FAILURE_COUNT + 8   # the recent failures, 152 bytes each, from 408
FAILURE_SIZE = 152
FAILURE_KIND = 16                            # kind byte: 1 fingerprint, 2 password; bit 7 settled
KIND_FINGERPRINT, KIND_PASSWORD, SETTLED = 1, 2, 0x80
MAX_FAILURES = 8

# ---- the virtual reader ----------------------------------------------------
PRINT_ID = "finger-load"
MATCH = f"SCAN {PRINT_ID}"
MISS = "SCAN finger-nobody"
MARK_IFACE = "org.localauth.LoadTest"
MARK_PATH = "/org/localauth/LoadTest"

ERR_ALREADY_IN_USE = "net.reactivated.Fprint.Error.AlreadyInUse"


def password_of(user):
    return f"{user}-secret"


@dataclass(frozen=True)
class Config:
    """The module's options for a round (documented options only)."""
    name: str
    args: str
    lockout: int          # L
    backoff_after: int    # the first back-off threshold


# Rounds alternate: the defaults (lockout 5, back-off from the 5th wrong
# password), where every fail phase crosses both limits and what they refuse
# must be accounted for; and the limits moved out of reach with the
# documented options, where every attempt of a round is charged at once.
CONFIGS = [Config("defaults", "", 5, 5),
           Config("wide", "lockout=20 passcode_backoff=1000:1s", 20, 1000)]
MAX_BACKOFF_SECONDS = 3600   # the default max_backoff: a reset moves the boot clock past it
# The soak process's service: the lockout at its maximum, so that the misses
# of its threads between two successes (at most 4 x 3) never lock root out.
SOAK_SERVICE = "login"
SOAK_ARGS = "lockout=20"


# ============================================================================
# The world
# ============================================================================

class LoadWorld(PamEnv):
    """PamEnv with the load test's users added to its passwd, group and
    passdb files (nss_wrapper and pam_matrix read them)."""

    def __init__(self, base: Path, group_size: int, module: Path = MODULE):
        # Private copies of the built module and harness: a rebuild of the
        # shared build directory during a run of minutes (the harness is
        # linked in place) must not change what runs.
        self.module_source = Path(module)
        self.module = base / "pam_localauth.so"
        self.harness = base / "pamharness"
        shutil.copy2(module, self.module)
        shutil.copy2(HARNESS, self.harness)
        self.module_sha256 = hashlib.sha256(self.module.read_bytes()).hexdigest()
        super().__init__(base)
        self.one_user = "alice"
        self.users = [f"u{i:02d}" for i in range(1, group_size + 1)]
        self.controls = [f"c{i:02d}" for i in range(1, group_size + 1)]
        self.uids = dict(USERS)
        for index, name in enumerate(self.users):
            self.uids[name] = 2001 + index
        for index, name in enumerate(self.controls):
            self.uids[name] = 3001 + index
        self.passwd.write_text("".join(f"{u}:x:{i}:{i}:{u}:/home/{u}:/bin/sh\n" for u, i in self.uids.items()))
        self.group.write_text("".join(f"{u}:x:{i}:\n" for u, i in self.uids.items()))
        self.passdb.write_text("".join(f"{u}:{password_of(u)}:localauth-passcode\n" for u in self.uids))
        self.use(CONFIGS[0])

    def use(self, config):
        self.config = config
        self.write_owner_stack("sudo", args=config.args)

    def write_service(self, name, lines):
        """Atomically (a new file renamed over the old one): prompts that
        start while the stack changes read the old one or the new one."""
        temporary = self.services / f".{name}.new"
        temporary.write_text("\n".join(lines) + "\n")
        os.replace(temporary, self.services / name)

    def module_line(self, control, args=""):
        return super().module_line(control, args).replace(str(MODULE), str(self.module), 1)

    def harness_args(self, *args, **kwargs):
        argv = super().harness_args(*args, **kwargs)
        argv[0] = str(self.harness)
        return argv

    def all_users(self):
        return [self.one_user] + self.users + self.controls

    def record_state(self, user):
        """(F, P, backoff_ms, next attempt number, recent failures) of the
        record on disk, or None when there is none. Read between phases, when
        no transaction runs."""
        path = self.state / f"{self.uids[user]}.rec"
        if not path.exists():
            return None
        data = path.read_bytes()
        record = parse_record(data, self.uids[user])
        slot = current_slot(data)
        sequence = struct.unpack_from("<Q", slot, OFFSET_NEXT_SEQUENCE)[0]
        entries = []
        for index in range(min(record.failures, MAX_FAILURES)):
            offset = FAILURES_OFFSET + index * FAILURE_SIZE
            entries.append((struct.unpack_from("<Q", slot, offset)[0], slot[offset + FAILURE_KIND]))
        return Snapshot(record.F, record.P, record.backoff_ms, sequence, entries)


@dataclass
class Snapshot:
    F: int
    P: int
    backoff_ms: int
    sequence: int
    entries: list   # (attempt number, kind byte)


# ============================================================================
# The reader: a continuous feeder on fprintd's cue
# ============================================================================

class ScanFeeder(threading.Thread):
    """Answers every verify attempt of the virtual device: on each
    VerifyFingerSelected (fprintd's cue that an attempt runs, as in
    fprint_rig's feeder) it sends a match or a no-match, optionally preceded
    by a retry hint (whose VerifyStatus(done=false) is awaited first). What
    it sent is recorded per phase. Phase marks (a signal the main thread
    emits) tell when every signal before them has been seen."""

    def __init__(self, rig, seed):
        super().__init__(name="load-feeder", daemon=True)
        self.rig = rig
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.lock = threading.Condition()
        self.match_probability = 0.0
        self.retry_probability = 0.0
        self.selected = 0
        self.used = 0
        self.statuses = []          # (result, done) of every VerifyStatus
        self.marks = set()
        self.sent = collections.Counter()   # this phase: "match", "no-match", "retry"
        self.errors = []
        self.client = _Client(rig.bus_address)
        self.client.subscribe(FPRINT_NAME, DEVICE_IFACE, None, None, self._on_signal)
        self.client.subscribe(None, MARK_IFACE, "Phase", MARK_PATH, self._on_mark)

    def _on_signal(self, sender, path, iface, member, args):
        with self.lock:
            if member == "VerifyFingerSelected":
                self.selected += 1
            elif member == "VerifyStatus":
                self.statuses.append(tuple(args))
            self.lock.notify_all()

    def _on_mark(self, sender, path, iface, member, args):
        with self.lock:
            self.marks.add(args[0])
            self.lock.notify_all()

    def configure(self, match_probability, retry_probability):
        with self.lock:
            self.match_probability = match_probability
            self.retry_probability = retry_probability

    def take_phase(self, mark, timeout=30):
        """Waits until `mark` was seen (so every cue before it was too) and
        every cue was answered; returns what was sent since the last call."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not (mark in self.marks and self.used == self.selected):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.errors.append(f"{mark}: feeder not idle (cues {self.selected}, answered {self.used})")
                    break
                self.lock.wait(min(left, 0.1))
            sent, self.sent = self.sent, collections.Counter()
            return sent

    def take(self):
        """What was sent since the last call (for a feeder without marks)."""
        with self.lock:
            sent, self.sent = self.sent, collections.Counter()
            return sent

    def _pump(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.stop.is_set() or time.monotonic() >= deadline:
                return False
            self.client.pump(predicate, min(0.05, max(0.0, deadline - time.monotonic())))
        return True

    def _send(self, command):
        try:
            self.rig.send_vdev(command, timeout=10, stop=self.stop)
            return True
        except Exception as error:  # noqa: BLE001 -- reported with the phase
            self.errors.append(f"sending {command!r}: {type(error).__name__}: {error}")
            return False

    def run(self):
        try:
            while not self.stop.is_set():
                self._pump(lambda: self.stop.is_set() or self.selected > self.used, 0.2)
                with self.lock:
                    if self.selected <= self.used:
                        continue
                    self.used += 1
                    mark = len(self.statuses)
                    retry = self.rng.random() < self.retry_probability
                    match = self.rng.random() < self.match_probability
                if retry:
                    if self._send(f"RETRY {self.rng.randrange(4)}"):
                        with self.lock:
                            self.sent["retry"] += 1
                        if not self._pump(lambda: any(not done for _, done in self.statuses[mark:]), 10):
                            self.errors.append("no VerifyStatus(done=false) after a retry hint")
                if self._send(MATCH if match else MISS):
                    with self.lock:
                        self.sent["match" if match else "no-match"] += 1
                        self.lock.notify_all()
        finally:
            self.client.close()


# ============================================================================
# The bus: who holds the reader, who was told it is busy, what fprintd said
# ============================================================================

MONITOR_RULES = [
    "type='method_call',destination='net.reactivated.Fprint',interface='net.reactivated.Fprint.Device'",
    "type='method_return',sender='net.reactivated.Fprint'",
    "type='error',sender='net.reactivated.Fprint'",
    "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged'",
    "type='signal',sender='net.reactivated.Fprint',interface='net.reactivated.Fprint.Device'",
    f"type='signal',interface='{MARK_IFACE}'",
]
HEADER = re.compile(r"^(method call|method return|error|signal) time=(\S+) sender=(\S+) -> destination=(\(null destination\)|\S+)"
                    r"(?: error_name=(\S+))?(?: serial=(\d+))?(?: reply_serial=(\d+))?"
                    r"(?: path=([^;]*); interface=([^;]*); member=(\S+))?")
ARGUMENT = re.compile(r'^\s+(?:string "(.*)"|boolean (true|false))')


@dataclass
class BusPhase:
    claims: collections.Counter = field(default_factory=collections.Counter)    # user -> successful Claim
    busy: collections.Counter = field(default_factory=collections.Counter)      # user -> AlreadyInUse
    claim_errors: collections.Counter = field(default_factory=collections.Counter)
    verdicts: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    unattributed: int = 0
    overlaps: int = 0
    max_holders: int = 0


class BusWatch(threading.Thread):
    """dbus-monitor on the rig's bus (it is root's, so it may monitor),
    parsed as it comes: per phase mark, the claims, refusals and verdicts
    per user. A claim is held from its successful reply until its holder
    calls Release or leaves the bus."""

    def __init__(self, rig):
        super().__init__(name="load-buswatch", daemon=True)
        self.proc = subprocess.Popen(["dbus-monitor", "--address", rig.bus_address, "--monitor"] + MONITOR_RULES,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                     start_new_session=True)
        self.lock = threading.Condition()
        self.pending = {}      # (claimer, serial) -> user
        self.holders = {}      # unique name -> user
        self.phase = BusPhase()
        self.done = {}         # mark -> BusPhase
        self.lines = 0
        self.ready = threading.Event()

    def run(self):
        current, args, need = None, [], 0
        for line in self.proc.stdout:
            self.lines += 1
            header = HEADER.match(line)
            if header:
                current, args = header, []
                need = self._arguments_needed(header)
                if need == 0:
                    self._handle(current, args)
                continue
            argument = ARGUMENT.match(line)
            if current is not None and argument and len(args) < need:
                args.append(argument.group(1) if argument.group(1) is not None else argument.group(2) == "true")
                if len(args) == need:
                    self._handle(current, args)

    @staticmethod
    def _arguments_needed(header):
        kind, member, interface = header.group(1), header.group(10), header.group(9)
        if kind == "method call" and member == "Claim":
            return 1
        if kind == "signal" and member == "VerifyStatus":
            return 2
        if kind == "signal" and member == "NameOwnerChanged":
            return 3
        if kind == "signal" and interface == MARK_IFACE:
            return 1
        return 0

    def _handle(self, header, args):
        kind, sender, destination = header.group(1), header.group(3), header.group(4)
        error_name, serial, reply_serial = header.group(5), header.group(6), header.group(7)
        interface, member = header.group(9), header.group(10)
        with self.lock:
            phase = self.phase
            if kind == "method call" and member == "Claim":
                self.pending[(sender, serial)] = args[0]
            elif kind == "method call" and member == "Release":
                self.holders.pop(sender, None)
            elif kind == "method return" and (destination, reply_serial) in self.pending:
                user = self.pending.pop((destination, reply_serial))
                if any(name != destination for name in self.holders):
                    phase.overlaps += 1
                self.holders[destination] = user
                phase.max_holders = max(phase.max_holders, len(self.holders))
                phase.claims[user] += 1
            elif kind == "error" and (destination, reply_serial) in self.pending:
                user = self.pending.pop((destination, reply_serial))
                if error_name == ERR_ALREADY_IN_USE:
                    phase.busy[user] += 1
                else:
                    phase.claim_errors[(user, error_name)] += 1
            elif kind == "signal" and member == "NameOwnerChanged":
                name, old, new = args
                if new == "" and old in self.holders:
                    self.holders.pop(old)
                if new == "":
                    for key in [k for k in self.pending if k[0] == old]:
                        self.pending.pop(key)
            elif kind == "signal" and member == "VerifyStatus":
                result = args[0]
                if len(self.holders) == 1:
                    phase.verdicts[next(iter(self.holders.values()))][result] += 1
                else:
                    phase.unattributed += 1
            elif kind == "signal" and interface == MARK_IFACE:
                if args[0] == "ready":
                    self.ready.set()
                self.done[args[0]] = phase
                self.phase = BusPhase()
                self.lock.notify_all()

    def take_phase(self, mark, timeout=30):
        deadline = time.monotonic() + timeout
        with self.lock:
            while mark not in self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.lock.wait(min(left, 0.1))
            return self.done.pop(mark)

    def close(self):
        stop_process(self.proc)
        self.join(5)
        if self.proc.stdout:
            self.proc.stdout.close()


# ============================================================================
# The locks: who waits for which lock file
# ============================================================================

class LockSampler(threading.Thread):
    """Reads /proc/locks every `interval` s and records every process waiting
    for an flock on a lock file (or the directory) of the state directory:
    whose transaction it is (from its command line) and whose lock it waits
    for. A wait is seen only while it lasts, so short waits are missed:
    what is seen is a lower bound (the samples are counted)."""

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

    def _read(self):
        """(holders {lock: pid}, waiters {(pid, lock)}) of the state
        directory's locks, from /proc/locks; None when unreadable."""
        try:
            text = Path("/proc/locks").read_text()
        except OSError:
            return None
        holders, waiters = {}, set()
        for line in text.splitlines():
            fields = line.split()
            # "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF" holds the lock,
            # "N: -> FLOCK ..." waits for it.
            waiting = len(fields) > 1 and fields[1] == "->"
            if waiting:
                fields = fields[:1] + fields[2:]
            if len(fields) < 6 or fields[1] != "FLOCK":
                continue
            device, _, inode = fields[5].rpartition(":")
            key = (device, int(inode))
            if key not in self.targets:
                continue
            if waiting:
                waiters.add((int(fields[4]), key))
            else:
                holders[key] = int(fields[4])
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


# ============================================================================
# Transactions
# ============================================================================

@dataclass
class Planned:
    group: str            # "one-user", "users", "control", "reset"
    user: str
    kind: str
    answers: list
    wrapper: list = field(default_factory=list)


@dataclass
class Outcome:
    """One transaction's own report, read from its messages and result code."""
    plan: Planned
    code: int
    elapsed_us: int
    instruction: int = 0
    busy: int = 0
    not_recognized: int = 0
    hints: int = 0
    locked: bool = False
    refused: bool = False        # the back-off refused the password
    fingerprint_success: bool = False
    password_charged: int = 0
    password_right: bool = False
    fail_delay: bool = False
    problems: list = field(default_factory=list)
    exit_status: int = None

    @property
    def fingerprint_charges(self):
        return self.not_recognized + (1 if self.fingerprint_success else 0)

    @property
    def charges(self):
        return self.fingerprint_charges + self.password_charged

    @property
    def success(self):
        return self.code == PAM_SUCCESS


def outcome_of(plan: Planned, stdout: str) -> Outcome:
    run = parse_run(stdout)
    result = Outcome(plan, run.code, run.elapsed_us if run.elapsed_us is not None else -1)
    result.fail_delay = bool(run.fail_delay)
    for style, text in run.messages:
        if style == "info" and text.endswith(INSTRUCTION) and "your finger" in text:
            result.instruction += 1
        elif text == READER_BUSY:
            result.busy += 1
        elif text.startswith(NOT_RECOGNIZED):
            result.not_recognized += 1
        elif text in HINTS:
            result.hints += 1
        elif LOCKED in text:
            result.locked = True
        elif text.startswith(BACKOFF):
            result.refused = True
        elif any(text.startswith(u) for u in UNEXPECTED):
            result.problems.append(f"says {text!r}")
    prompts = run.prompts()
    answered = [plan.answers[i] for i in range(min(len(prompts), len(plan.answers)))]
    typed = [a for a in answered if a]
    if run.code == -1:
        result.problems.append("no result: did not end (killed at the bound) or crashed")
        return result
    if len(typed) > 1:
        result.problems.append(f"asked for the password twice: {prompts}")
    if typed and not result.refused:
        result.password_charged = 1
        result.password_right = typed[0] == password_of(plan.user)
    result.fingerprint_success = (run.code == PAM_SUCCESS and not typed and answered == [""]
                                  and result.instruction == 1)
    # What the result code must be, given what the transaction saw.
    if result.fingerprint_success or (result.password_charged and result.password_right):
        expected = PAM_SUCCESS
    elif result.password_charged or result.refused:
        expected = PAM_AUTH_ERR
    else:
        expected = PAM_CONV_ERR   # the answers ran out: a cancel
    if run.code != expected:
        result.problems.append(f"result {run.code}, expected {expected}")
    if result.fail_delay != bool(result.password_charged and not result.password_right):
        result.problems.append(f"fail delay {run.fail_delay} does not fit a {'wrong' if result.password_charged else 'no'} password")
    if result.instruction + result.busy > 1 or (result.instruction and result.busy):
        result.problems.append("held the reader and was told it is busy")
    # Told the reader is busy: on to the password (or refused by its back-off).
    if result.busy and not result.refused and prompts[1:2] != [PASSCODE_PROMPT]:
        result.problems.append(f"told the reader is busy, then prompted {prompts[1:]} instead of the password")
    if result.not_recognized > 3:
        result.problems.append(f"{result.not_recognized} no-match verdicts in one prompt (max_tries is 3)")
    return result


class Launcher:
    """Starts many harness processes at once in a private mount namespace
    (the world's service files bound over /etc/pam.d, libpam unwrapped,
    nss_wrapper for the users; the host's /etc is untouched) and collects
    their reports. A phase that is not over within `bound` seconds is killed
    (its process group: the namespace's shell and every harness)."""

    def __init__(self, world, rig, bound):
        self.world = world
        self.rig = rig
        self.bound = bound
        self.count = 0
        self.shell_errors = []

    def prelude(self, nss=True, rig=None):
        lines = ["set -e", "mount --make-rprivate /", f"mount --bind {self.world.services} /etc/pam.d",
                 f"export DBUS_SYSTEM_BUS_ADDRESS={(rig or self.rig).bus_address}"]
        if nss:
            lines += ["export LD_PRELOAD=libnss_wrapper.so", f"export NSS_WRAPPER_PASSWD={self.world.passwd}",
                      f"export NSS_WRAPPER_GROUP={self.world.group}"]
        return lines

    def run(self, plans):
        self.count += 1
        out = self.world.base / "runs" / str(self.count)
        out.mkdir(parents=True)
        lines = self.prelude() + ["pids="]
        for index, plan in enumerate(plans):
            argv = plan.wrapper + self.world.harness_args("sudo", plan.user, plan.answers, latency=True)
            # The exit status too: a signal shows as 128 + its number.
            lines.append("{ " + " ".join(f"'{a}'" for a in argv) + f" > {out}/{index}.out 2>&1; echo $? > {out}/{index}.rc; }} & "
                         + 'pids="$pids $!"')
        lines.append("for p in $pids; do wait $p || true; done")
        started = time.monotonic()
        with open(out / "shell.err", "w") as shell_err:
            proc = subprocess.Popen(["unshare", "--mount", "bash", "-c", "\n".join(lines)], start_new_session=True,
                                    stderr=shell_err, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        killed = False
        try:
            proc.wait(timeout=self.bound)
        except subprocess.TimeoutExpired:
            killed = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        wall = time.monotonic() - started
        outcomes = []
        for index, plan in enumerate(plans):
            output = out / f"{index}.out"
            status = out / f"{index}.rc"
            outcome = outcome_of(plan, output.read_text(errors="replace") if output.exists() else "")
            outcome.exit_status = int(status.read_text()) if status.exists() else None
            if outcome.code == -1:
                outcome.problems.append(f"exit status {outcome.exit_status}, output {output.read_text(errors='replace')[-300:]!r}"
                                        if output.exists() else "never started")
            outcomes.append(outcome)
        shell = (out / "shell.err").read_text(errors="replace").strip()
        if shell:
            self.shell_errors.append(shell[-2000:])
        shutil.rmtree(out)
        return outcomes, wall, killed

    def start_soak(self, cycles, threads, rig):
        """The long-running multi-cycle process, on its own rig: root (from
        the host's passwd, read only: nss_wrapper is not thread-safe) presses
        Enter for the finger, then types the right password if asked."""
        argv = self.world.harness_args(SOAK_SERVICE, "root", ["", password_of("root")]) + ["-n", str(cycles), "-T", str(threads), "-q"]
        script = "\n".join(self.prelude(nss=False, rig=rig) + ["exec " + " ".join(f"'{a}'" for a in argv)])
        return subprocess.Popen(["unshare", "--mount", "bash", "-c", script], start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


# ============================================================================
# Phases and their accounting
# ============================================================================

FAIL_KINDS = [("fp-wrong", 6), ("typed-wrong", 3), ("fp-cancel", 1)]
MIXED_KINDS = [("fp-right", 3), ("fp-wrong", 3), ("typed-right", 1), ("typed-wrong", 2), ("fp-cancel", 1)]


def answers_for(kind, user, tag):
    wrong = f"wrong-{tag}"
    return {"fp-wrong": ["", wrong], "typed-wrong": [wrong], "fp-cancel": [""], "fp-right": ["", password_of(user)],
            "typed-right": [password_of(user)]}[kind]


def plan_group(rng, group, users, kinds, tag):
    names, weights = zip(*kinds)
    plans = []
    for index, user in enumerate(users):
        kind = rng.choices(names, weights)[0]
        plans.append(Planned(group, user, kind, answers_for(kind, user, f"{tag}-{index}")))
    return plans


class Accounts:
    """Everything measured, and every mismatch found."""

    def __init__(self):
        self.mismatches = []
        self.transactions = collections.Counter()      # group -> count
        self.latencies = collections.defaultdict(list)  # (group, phase kind) -> [us]
        self.expected_charges = collections.Counter()  # group -> attempt numbers expected to be used
        self.disk_charges = collections.Counter()      # group -> attempt numbers used on disk
        self.exact_checks = collections.Counter()      # group -> (user, phase) pairs with F and P exact
        self.exact_F = collections.Counter()           # group -> sum of F expected in exact checks
        self.exact_F_disk = collections.Counter()
        self.exact_P = collections.Counter()
        self.exact_P_disk = collections.Counter()
        self.bounded_checks = collections.Counter()
        self.fed = collections.Counter()
        self.reported = collections.Counter()          # transactions' fingerprint verdicts: match / no-match
        self.reader = collections.Counter()            # held / busy / locked / bus claims / bus busy
        self.refusals = collections.Counter()          # lockout / back-off
        self.successes = collections.Counter()
        self.phases = collections.Counter()
        self.max_holders = 0
        self.problems = collections.Counter()

    def fail(self, text):
        self.mismatches.append(text)


def group_of(world, user):
    if user == world.one_user:
        return "one-user"
    return "users" if user in world.users else "control"


def check_phase(world, accounts, label, kind, outcomes, before, after, fed, bus):
    """Compares one phase's transactions with the records, the feeder and the bus."""
    lockout, backoff_after = world.config.lockout, world.config.backoff_after
    accounts.phases[f"{kind} ({world.config.name})"] += 1
    by_user = collections.defaultdict(list)
    for outcome in outcomes:
        by_user[outcome.plan.user].append(outcome)
        group = outcome.plan.group
        accounts.transactions[group] += 1
        if outcome.elapsed_us >= 0:
            accounts.latencies[(group, kind)].append(outcome.elapsed_us)
        for problem in outcome.problems:
            accounts.problems[problem] += 1
            accounts.fail(f"{label}: {outcome.plan.user} ({outcome.plan.kind}, answers {outcome.plan.answers}): {problem}")
        accounts.reader["held"] += outcome.instruction
        accounts.reader["told busy"] += outcome.busy
        accounts.reader["hints shown"] += outcome.hints
        accounts.reported["match"] += int(outcome.fingerprint_success)
        accounts.reported["no-match"] += outcome.not_recognized
        accounts.successes[group] += int(outcome.success)
        if outcome.locked and not outcome.instruction:
            accounts.refusals["fingerprint locked"] += 1
        if outcome.refused:
            accounts.refusals["password back-off"] += 1

    # The feeder: what it sent is what the transactions saw.
    accounts.fed.update(fed)
    matches = sum(o.fingerprint_success for o in outcomes)
    misses = sum(o.not_recognized for o in outcomes)
    hints = sum(o.hints for o in outcomes)
    if (fed["match"], fed["no-match"], fed["retry"]) != (matches, misses, hints):
        accounts.fail(f"{label}: the feeder sent {fed['match']} match, {fed['no-match']} no-match, {fed['retry']} hints; "
                      f"the transactions report {matches}, {misses}, {hints}")

    # The bus: claims, refusals and verdicts per user.
    if bus is None:
        accounts.fail(f"{label}: the bus monitor never saw the phase's end")
    else:
        accounts.reader["bus claims"] += sum(bus.claims.values())
        accounts.reader["bus AlreadyInUse"] += sum(bus.busy.values())
        accounts.max_holders = max(accounts.max_holders, bus.max_holders)
        if bus.overlaps:
            accounts.fail(f"{label}: {bus.overlaps} Claim(s) succeeded while another prompt held the reader")
        if bus.claim_errors:
            accounts.fail(f"{label}: Claim errors other than AlreadyInUse: {dict(bus.claim_errors)}")
        if bus.unattributed:
            accounts.fail(f"{label}: {bus.unattributed} VerifyStatus while no single prompt held the reader")
        for user in set(by_user) | set(bus.claims) | set(bus.busy) | set(bus.verdicts):
            mine = by_user.get(user, [])
            held, busy = sum(o.instruction for o in mine), sum(o.busy for o in mine)
            verdicts = bus.verdicts.get(user, collections.Counter())
            seen = (verdicts["verify-match"], verdicts["verify-no-match"])
            reported = (sum(o.fingerprint_success for o in mine), sum(o.not_recognized for o in mine))
            if (bus.claims[user], bus.busy[user]) != (held, busy):
                accounts.fail(f"{label}: {user}: the bus saw {bus.claims[user]} claims and {bus.busy[user]} AlreadyInUse; "
                              f"the transactions report {held} holding the reader and {busy} told it is busy")
            if seen != reported:
                accounts.fail(f"{label}: {user}: fprintd sent {seen[0]} match and {seen[1]} no-match to its prompts; "
                              f"they report {reported[0]} and {reported[1]}")

    # The records.
    for user, mine in by_user.items():
        group = group_of(world, user) if mine[0].plan.group != "reset" else "reset"
        old, new = before.get(user), after.get(user)
        if new is None:
            if any(o.charges for o in mine):
                accounts.fail(f"{label}: {user}: attempts were reported but no record exists")
            continue
        old = old or Snapshot(0, 0, 0, None, [])
        charges = sum(o.charges for o in mine)
        used = new.sequence - old.sequence if old.sequence is not None else None
        accounts.expected_charges[group] += charges
        accounts.disk_charges[group] += used if used is not None else charges
        if used is not None and used != charges:
            accounts.fail(f"{label}: {user}: the attempt number rose by {used}; the transactions report {charges} attempts")
        fingerprint = sum(o.not_recognized for o in mine)
        passwords = sum(o.password_charged for o in mine if not o.password_right)
        succeeded = [o for o in mine if o.success]
        if new.F > lockout:
            accounts.fail(f"{label}: {user}: F = {new.F} above the lockout {lockout}")
        if not succeeded:
            expected = (old.F + fingerprint, old.P + passwords)
            exact = True
        elif len(mine) == 1:
            expected = (0, 0)
            exact = True
        else:
            exact = False
        if exact:
            accounts.exact_checks[group] += 1
            accounts.exact_F[group] += expected[0]
            accounts.exact_P[group] += expected[1]
            accounts.exact_F_disk[group] += new.F
            accounts.exact_P_disk[group] += new.P
            if (new.F, new.P) != expected:
                accounts.fail(f"{label}: {user}: F, P on disk {new.F}, {new.P}; expected {expected[0]}, {expected[1]} "
                              f"(before {old.F}, {old.P}; {len(mine)} transactions)")
            if not succeeded:
                if any(o.locked for o in mine) and new.F != lockout:
                    accounts.fail(f"{label}: {user}: a prompt was told the finger is locked but F = {new.F}")
                if any(o.refused for o in mine) and new.P != backoff_after:
                    accounts.fail(f"{label}: {user}: a password was refused by the back-off but P = {new.P}")
                if old.P <= backoff_after and new.P > backoff_after:
                    accounts.fail(f"{label}: {user}: P = {new.P} above the back-off threshold {backoff_after}")
        else:
            accounts.bounded_checks[group] += 1
            if new.F > old.F + fingerprint or new.P > old.P + passwords:
                accounts.fail(f"{label}: {user}: F, P on disk {new.F}, {new.P} above what was charged "
                              f"({old.F}+{fingerprint}, {old.P}+{passwords})")
        check_recent_failures(accounts, label, user, new)


def check_recent_failures(accounts, label, user, snapshot):
    """The record's own consistency: the recent failures not settled by a
    success are the newest F+P attempt numbers, F of them fingerprint ones."""
    owed = snapshot.F + snapshot.P
    open_entries = [(seq, kind & 0x7F) for seq, kind in snapshot.entries if not kind & SETTLED]
    if owed <= MAX_FAILURES:
        numbers = sorted(seq for seq, _ in open_entries)
        expected = list(range(snapshot.sequence - owed, snapshot.sequence))
        kinds = collections.Counter(kind for _, kind in open_entries)
        if numbers != expected or (kinds[KIND_FINGERPRINT], kinds[KIND_PASSWORD]) != (snapshot.F, snapshot.P):
            accounts.fail(f"{label}: {user}: unsettled recent failures {open_entries} do not match F={snapshot.F}, "
                          f"P={snapshot.P}, next attempt {snapshot.sequence}")
    elif len(open_entries) != min(len(snapshot.entries), MAX_FAILURES):
        accounts.fail(f"{label}: {user}: F+P={owed} but only {len(open_entries)} recent failures are unsettled")


# ============================================================================
# The run
# ============================================================================

WINDOWS = 8


def window_peaks(samples):
    """(median attempts, peak VmRSS KB) of each of WINDOWS equal runs of
    (KB, attempts so far) samples. Peaks, because a sample taken between
    two transactions finds the module and libsystemd unloaded by pam_end
    (about 1.3 MB less), and a leak raises the peaks as well."""
    if len(samples) < 4 * WINDOWS:
        return []
    size = len(samples) // WINDOWS
    windows = [samples[i * size:(i + 1) * size] for i in range(WINDOWS)]
    return [(statistics.median(d for _, d in w), max(r for r, _ in w)) for w in windows]


def growth_per_attempt(samples):
    """Bytes of VmRSS per attempt: the least-squares slope of the windows'
    peaks over their attempts, the first two windows (warm-up) left out.
    None with too few samples."""
    peaks = window_peaks(samples)[2:]
    if len(peaks) < 3:
        return None
    xs, ys = [d for d, _ in peaks], [r * 1024 for _, r in peaks]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def rss_kb(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


class LoadTest:
    def __init__(self, rig, base, seconds, group_size=32, seed=None, bound=120, log=print, module=MODULE):
        self.rig = rig
        self.seconds = seconds
        self.group_size = group_size
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self.rng = random.Random(self.seed)
        self.bound = bound
        self.log = log
        self.world = LoadWorld(base, group_size, module)
        self.accounts = Accounts()
        self.exits = contextlib.ExitStack()
        self.marks = 0
        self.memory = {}
        self.soak = {}

    # -- setup -------------------------------------------------------------
    def prepare(self):
        for user in self.world.all_users():
            self.rig.enroll(user, print_id=PRINT_ID)
        for user in self.world.all_users():
            password_entered(self.world.state, self.world.uids[user], user, self.rig.bus_address)
        # The soak process's own rig (a second bus, fprintd and virtual
        # reader), so that its fingerprint prompts leave the main rig's
        # accounting alone; root is enrolled there and starts from "password
        # entered" with that rig's enrollment (its attempt number is then
        # known before its first transaction).
        self.soak_rig = self.exits.enter_context(FprintRig())
        self.soak_rig.enroll("root", print_id=PRINT_ID)
        password_entered(self.world.state, 0, "root", self.soak_rig.bus_address)
        self.world.write_owner_stack(SOAK_SERVICE, args=SOAK_ARGS)
        self.soak_feeder = ScanFeeder(self.soak_rig, self.rng.randrange(1 << 30))
        self.soak_feeder.configure(0.5, 0.05)
        self.soak_feeder.start()
        self.soak_rig_pids = {"soak fprintd": self.soak_rig.fprintd_pid, "soak dbus-daemon": self.soak_rig.bus_proc.pid,
                              "soak polkit": self.soak_rig.polkit_proc.pid}
        self.feeder = ScanFeeder(self.rig, self.rng.randrange(1 << 30))
        self.bus = BusWatch(self.rig)
        self.feeder.start()
        self.bus.start()
        # The monitor is listening once it sees a mark.
        deadline = time.monotonic() + 10
        while not self.bus.ready.is_set():
            self.mark_signal("ready")
            if time.monotonic() > deadline:
                raise RuntimeError("dbus-monitor never saw the first mark")
            self.bus.ready.wait(0.2)
        self.bus.take_phase("ready", timeout=1)
        self.feeder.take_phase("ready", timeout=1)
        self.locks = LockSampler(self.world)
        self.locks.start()
        self.launcher = Launcher(self.world, self.rig, self.bound)

    def mark_signal(self, name):
        self.rig.ctl.conn.emit_signal(None, MARK_PATH, MARK_IFACE, "Phase", GLib.Variant("(s)", (name,)))
        self.rig.ctl.conn.flush_sync(None)

    def snapshots(self, users):
        return {user: self.world.record_state(user) for user in users}

    # -- one phase -----------------------------------------------------------
    def phase(self, kind, plans, match_probability=0.0, retry_probability=0.0):
        self.marks += 1
        label = f"#{self.marks} {kind}"
        users = sorted({p.user for p in plans})
        self.feeder.configure(match_probability, retry_probability)
        before = self.snapshots(users)
        self.rng.shuffle(plans)
        outcomes, wall, killed = self.launcher.run(plans)
        mark = f"end-{self.marks}"
        self.mark_signal(mark)
        fed = self.feeder.take_phase(mark)
        bus = self.bus.take_phase(mark)
        after = self.snapshots(users)
        if killed:
            self.accounts.fail(f"{label}: not over within {self.bound} s: killed")
        check_phase(self.world, self.accounts, label, kind, outcomes, before, after, fed, bus)
        self.locks.refresh()
        return outcomes, wall

    def reset(self, users):
        """Each user with a count or a wait left types the right password;
        one in the back-off does so with the boot clock moved past it."""
        plans = []
        for user in users:
            state = self.world.record_state(user)
            if state is None or (state.F, state.P, state.backoff_ms) == (0, 0, 0):
                continue
            wrapper = later_boot_clock(MAX_BACKOFF_SECONDS + 60) if state.backoff_ms else []
            plans.append(Planned("reset", user, "typed-right", [password_of(user)], wrapper))
        if not plans:
            return
        self.phase("reset", plans)
        for user in users:
            state = self.world.record_state(user)
            if state is not None and (state.F, state.P, state.backoff_ms) != (0, 0, 0):
                self.accounts.fail(f"reset: {user} still has F={state.F} P={state.P} backoff_ms={state.backoff_ms}")

    def round(self, number):
        world, rng, size = self.world, self.rng, self.group_size
        world.use(CONFIGS[(number - 1) % len(CONFIGS)])
        tag = f"r{number}"
        one_user = [world.one_user] * size
        timings = {}
        plans = plan_group(rng, "one-user", one_user, FAIL_KINDS, f"{tag}a") + plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}b")
        timings["fail"] = self.phase("fail", plans)[1]
        self.reset([world.one_user] + world.users)
        plans = plan_group(rng, "one-user", one_user, MIXED_KINDS, f"{tag}c") + plan_group(rng, "users", world.users, MIXED_KINDS, f"{tag}d")
        timings["mixed"] = self.phase("mixed", plans, match_probability=0.35, retry_probability=0.1)[1]
        self.reset([world.one_user] + world.users)
        plans = plan_group(rng, "control", world.controls, FAIL_KINDS, f"{tag}e") + plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}f")
        timings["control"] = self.phase("control", plans)[1]
        self.reset(world.controls + world.users)
        plans = plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}g")
        timings["solo"] = self.phase("solo", plans)[1]
        self.reset(world.users)
        return timings

    # -- the soak processes ----------------------------------------------------
    class Soak:
        """One multi-cycle harness process: its own figures and its samples."""

        def __init__(self, test, cycles, threads):
            self.test = test
            self.cycles, self.threads = cycles, threads
            warm = max(cycles // 10, 1)
            self.warm = warm
            self.transactions = warm + (cycles - warm) * threads   # pamharness -n/-T: a tenth on the main thread
            self.proc = test.launcher.start_soak(cycles, threads, test.soak_rig)
            self.started = time.monotonic()
            self.ended = None
            self.output = None
            self.samples = []    # (VmRSS KB, root's attempts so far: the soaks' progress)
            # Its output is read, and its end timed, as it happens.
            self.waiter = threading.Thread(target=self._wait, name="load-soak", daemon=True)
            self.waiter.start()

        def _wait(self):
            self.output = self.proc.communicate()
            self.ended = time.monotonic()

        def running(self):
            return self.ended is None

        def sample(self, done):
            """VmRSS now, while all its threads run (not as they end: their
            stacks go); `done` is root's attempts since the soaks started."""
            if not self.running():
                return
            try:   # the harness: bash exec'd it
                status = Path(f"/proc/{self.proc.pid}/status").read_text()
                rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
                threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
            except (OSError, AttributeError):
                return
            if threads == self.threads + 1:   # its main thread waits for the workers
                self.samples.append((rss, done))

        def finish(self, timeout, accounts, name):
            self.waiter.join(max(1, timeout))
            if self.waiter.is_alive():
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.waiter.join(30)
                accounts.fail(f"{name}: did not end within its bound ({timeout:.0f} s): killed")
            out, err = self.output or ("", "")
            result = {"cycles": self.cycles, "threads": self.threads, "transactions": self.transactions,
                      "seconds": (self.ended or time.monotonic()) - self.started, "pid": self.proc.pid}
            values = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
            if self.proc.returncode != 0 or "rss_kb_end" not in values:
                accounts.fail(f"{name}: failed ({self.proc.returncode}): {out}{err}")
                return result
            result.update({"rss_kb_warm": int(values["rss_kb_warm"]), "rss_kb_end": int(values["rss_kb_end"]),
                           "failures": int(values["failures"])})
            if result["failures"]:
                accounts.fail(f"{name}: {result['failures']} of {self.transactions} transactions did not succeed: "
                              + ", ".join(f"{k}={v}" for k, v in values.items() if k.startswith("code_")))
            peaks = window_peaks(self.samples)
            if peaks:
                result["sampled_rss_kb"] = {"first": peaks[2][1], "last": peaks[-1][1],
                                            "max": max(r for r, _ in self.samples), "samples": len(self.samples),
                                            "window_peaks": [r for _, r in peaks],
                                            "window_attempts": [d for d, _ in peaks],
                                            "bytes_per_attempt": growth_per_attempt(self.samples)}
            return result

    class SoakGroup:
        """Soak processes started together on the soak rig, and root's exact
        accounting over all of them: every cycle ends in a success, by a
        match (its attempt charged) or by the password (charged) after
        no-matches (each charged) or a busy reader. So root's attempt number
        rises by one per cycle plus one per no-match the soak feeder sent."""

        def __init__(self, test, cycles, threads_list):
            self.test = test
            before = test.world.record_state("root")
            self.sequence_before = before.sequence
            test.soak_feeder.take()
            self.soaks = [LoadTest.Soak(test, cycles, threads) for threads in threads_list]
            self.stop = threading.Event()
            self.sampler = threading.Thread(target=self._sample, name="load-soak-sampler", daemon=True)
            self.sampler.start()

        SAMPLE_INTERVAL = 0.1

        def _sample(self):
            while not self.stop.wait(self.SAMPLE_INTERVAL) and self.running():
                self.sample()

        def running(self):
            return any(soak.running() for soak in self.soaks)

        def sample(self):
            """Every SAMPLE_INTERVAL, once each process's threads run: their
            main threads' tenths are done well before root has seen four
            times their cycles' attempts (at most two attempts a cycle
            each). The record is read as it is being written: a slot
            being written is not whole, and the other one is read."""
            try:
                state = self.test.world.record_state("root")
            except AssertionError:
                return
            done = state.sequence - self.sequence_before if state else 0
            if done > 4 * sum(soak.warm for soak in self.soaks):
                for soak in self.soaks:
                    soak.sample(done)

        def kill(self):
            self.stop.set()
            for soak in self.soaks:
                if soak.running():
                    os.killpg(soak.proc.pid, signal.SIGKILL)
                    soak.waiter.join(30)

        def finish(self, timeout, accounts, name):
            results = [soak.finish(timeout, accounts, f"{name} ({soak.threads} thread{'s' if soak.threads > 1 else ''})")
                       for soak in self.soaks]
            self.stop.set()
            self.sampler.join(5)
            after = self.test.world.record_state("root")
            used = after.sequence - self.sequence_before
            fed = self.test.soak_feeder.take()
            transactions = sum(soak.transactions for soak in self.soaks)
            expected = transactions + fed["no-match"]
            if used != expected:
                accounts.fail(f"{name}: {transactions} transactions and {fed['no-match']} no-matches fed; "
                              f"root's attempt number rose by {used}")
            if (after.F, after.P) != (0, 0):
                accounts.fail(f"{name}: root's record at the end: F={after.F} P={after.P}")
            return {"processes": results, "transactions": transactions, "fed": dict(fed), "attempts_on_disk": used,
                    "attempts_expected": expected, "failures": sum(r.get("failures", 0) for r in results),
                    "seconds": max(r["seconds"] for r in results)}

    CALIBRATION_CYCLES = 40
    # The soak processes: 4 threads (transactions side by side in one
    # process), and 1 (one malloc arena: its growth per attempt is the
    # clean measure of a leak).
    SOAK_THREADS = (4, 1)

    def start_calibration(self):
        """A short soak run alongside round 1: how long one cycle takes
        under the rounds' load."""
        self.calibration = self.SoakGroup(self, self.CALIBRATION_CYCLES, self.SOAK_THREADS)

    def start_soak(self, deadline):
        result = self.calibration.finish(self.bound, self.accounts, "the calibration soak")
        per_cycle = result["seconds"] / self.CALIBRATION_CYCLES
        # Sized to the time left at round 1's pace (the heaviest: the later
        # rounds run it somewhat faster, so it tends to end a little early;
        # the rounds go on until it ends if it is late).
        cycles = max(100, int((deadline - time.monotonic()) / per_cycle))
        self.soak_run = self.SoakGroup(self, cycles, self.SOAK_THREADS)
        self.soak = {"calibration": result, "calibration_s_per_cycle": per_cycle}

    def finish_soak(self):
        self.soak.update(self.soak_run.finish(self.bound, self.accounts, "the soak"))

    # -- the whole run ---------------------------------------------------------
    def sample_memory(self):
        for name, pid in (("fprintd", self.rig.fprintd_pid), ("dbus-daemon", self.rig.bus_proc.pid),
                          ("fprintd (soak rig)", self.soak_rig_pids["soak fprintd"])):
            value = rss_kb(pid)
            if value is not None:
                self.memory.setdefault(name, []).append(value)

    def run(self):
        started = time.monotonic()
        self.prepare()
        self.setup_seconds = time.monotonic() - started
        rounds = []
        deadline = started + self.seconds
        try:
            self.start_calibration()
            while True:
                rounds.append(self.round(len(rounds) + 1))
                if len(rounds) == 1:
                    self.start_soak(deadline)
                self.sample_memory()
                now = time.monotonic()
                self.log(f"round {len(rounds)} ({self.world.config.name}): "
                         + ", ".join(f"{k} {v:.1f} s" for k, v in rounds[-1].items())
                         + f"; {len(self.accounts.mismatches)} mismatches so far")
                if now >= deadline and (not self.soak_run.running() or now >= deadline + self.seconds):
                    break
            self.finish_soak()
        finally:
            self.close()
        self.rounds = rounds
        self.runtime = time.monotonic() - started
        return self.report()


    def close(self):
        for name in ("locks",):
            thread = getattr(self, name, None)
            if thread is not None:
                thread.stop.set()
                thread.join(5)
        for feeder in (getattr(self, "feeder", None), getattr(self, "soak_feeder", None)):
            if feeder is not None:
                feeder.stop.set()
                feeder.join(10)
        bus = getattr(self, "bus", None)
        if bus is not None:
            bus.close()
        for group in (getattr(self, "calibration", None), getattr(self, "soak_run", None)):
            if group is not None:
                group.kill()
        self.exits.close()

    # -- the report ------------------------------------------------------------
    def report(self):
        a = self.accounts
        for error in self.feeder.errors + self.soak_feeder.errors:
            a.fail(f"feeder: {error}")
        for error in self.launcher.shell_errors:
            a.fail(f"the launching shell said: {error}")
        if a.max_holders > 1:
            a.fail(f"{a.max_holders} prompts held the reader at once")
        if a.reader["held"] != a.reader["bus claims"] or a.reader["told busy"] != a.reader["bus AlreadyInUse"]:
            a.fail(f"reader: {dict(a.reader)}")
        foreign = self.locks.foreign_waits()
        for (waiter, owner), samples in sorted(foreign.items()):
            a.fail(f"a transaction of {waiter} waited for the lock of {owner} ({samples} samples)")
        latency = {}
        for (group, kind), values in sorted(a.latencies.items()):
            values = sorted(values)
            latency[f"{group}/{kind}"] = {"n": len(values), "median_ms": statistics.median(values) / 1000,
                                          "p90_ms": values[int(0.9 * (len(values) - 1))] / 1000, "max_ms": values[-1] / 1000}
        max_latency_ms = max((v["max_ms"] for v in latency.values()), default=0)
        if max_latency_ms > self.bound * 1000:
            a.fail(f"a transaction took {max_latency_ms:.0f} ms, above the bound")
        memory = {name: {"first": values[0], "end": values[-1], "max": max(values), "samples": len(values),
                         "series": values} for name, values in self.memory.items()}
        return {
            "seed": self.seed, "seconds": self.seconds, "runtime_s": self.runtime, "setup_s": self.setup_seconds,
            "module_sha256": self.world.module_sha256, "module": str(self.world.module_source),
            "rounds": len(self.rounds), "configs": [c.name for c in CONFIGS],
            "group_size": self.group_size, "transactions": dict(a.transactions), "phases": dict(a.phases),
            "expected_charges": dict(a.expected_charges), "disk_charges": dict(a.disk_charges),
            "exact_checks": dict(a.exact_checks), "bounded_checks": dict(a.bounded_checks),
            "exact_F": dict(a.exact_F), "exact_F_disk": dict(a.exact_F_disk),
            "exact_P": dict(a.exact_P), "exact_P_disk": dict(a.exact_P_disk),
            "successes": dict(a.successes), "refusals": dict(a.refusals),
            "fed": dict(a.fed), "reported_verdicts": dict(a.reported), "reader": dict(a.reader),
            "max_holders": a.max_holders, "latency": latency, "max_latency_ms": max_latency_ms,
            "lock_samples": self.locks.samples, "lock_waits": {f"{w} -> {o}": n for (w, o), n in sorted(self.locks.waits.items())},
            "foreign_lock_waits": len(foreign), "lock_waits_unconfirmed": self.locks.unconfirmed,
            "lock_holder_activity": {f"{u}: {what}": n for (u, what), n in sorted(self.locks.holder_activities().items())},
            "longest_lock_wait_ms": {g: 1000 * self.locks.longest_wait(users) for g, users in
                                     (("one-user", {self.world.one_user}), ("users", set(self.world.users)),
                                      ("control", set(self.world.controls)))},
            "memory_kb": memory, "soak": dict(self.soak), "bus_lines": self.bus.lines,
            "processes": {"fprintd": self.rig.fprintd_pid, "dbus-daemon": self.rig.bus_proc.pid,
                          "polkit": self.rig.polkit_proc.pid, "dbus-monitor": self.bus.proc.pid,
                          **{f"soak {i}": r.get("pid") for i, r in enumerate(self.soak.get("processes", []))},
                          **{f"calibration soak {i}": r.get("pid") for i, r in enumerate(self.soak.get("calibration", {}).get("processes", []))},
                          **self.soak_rig_pids},
            "mismatches": list(a.mismatches),
        }


def independence(report):
    """The different-users group's median latency with the one-user group's
    load (fail) over the same with the control group's load (control)."""
    lat = report["latency"]
    try:
        return lat["users/fail"]["median_ms"] / lat["users/control"]["median_ms"]
    except (KeyError, ZeroDivisionError):
        return None


def format_rate(value):
    return "growth not measured" if value is None else f"{value:.1f} bytes per attempt"


def format_report(r):
    lines = []
    add = lines.append
    add(f"load test: {r['rounds']} rounds in {r['runtime_s']:.0f} s (asked {r['seconds']} s; setup {r['setup_s']:.1f} s), "
        f"seed {r['seed']}, {r['group_size']} concurrent per group, configurations {' / '.join(r['configs'])} alternating")
    add(f"module: a copy of {r['module']} (sha256 {r['module_sha256'][:16]}...)")
    add("")
    add(f"{'group':<10} {'transactions':>12} {'successes':>9} {'attempts expected':>17} {'on disk':>8} "
        f"{'exact F,P checks':>16} {'F exp/disk':>11} {'P exp/disk':>11} {'bounded':>7}")
    for group in ("one-user", "users", "control", "reset"):
        add(f"{group:<10} {r['transactions'].get(group, 0):>12} {r['successes'].get(group, 0):>9} "
            f"{r['expected_charges'].get(group, 0):>17} {r['disk_charges'].get(group, 0):>8} "
            f"{r['exact_checks'].get(group, 0):>16} "
            f"{str(r['exact_F'].get(group, 0)) + '/' + str(r['exact_F_disk'].get(group, 0)):>11} "
            f"{str(r['exact_P'].get(group, 0)) + '/' + str(r['exact_P_disk'].get(group, 0)):>11} "
            f"{r['bounded_checks'].get(group, 0):>7}")
    add("")
    add(f"phases: {r['phases']}")
    add(f"reader: fed {r['fed']}; transactions saw {r['reported_verdicts']}; {r['reader']}; "
        f"max prompts holding it at once {r['max_holders']}")
    add(f"refused without a charge: {r['refusals']}")
    add("")
    add(f"{'latency (pam_authenticate)':<28} {'n':>6} {'median ms':>10} {'p90 ms':>9} {'max ms':>9}")
    for key, value in r["latency"].items():
        add(f"{key:<28} {value['n']:>6} {value['median_ms']:>10.1f} {value['p90_ms']:>9.1f} {value['max_ms']:>9.1f}")
    ratio = independence(r)
    add(f"different users' median with the one-user load / with the control load: "
        f"{ratio:.2f}" if ratio is not None else "different users' latency: not measured")
    add("")
    add(f"lock waits seen (and confirmed) in {r['lock_samples']} samples of /proc/locks: {r['lock_waits'] or 'none'} "
        f"({r['lock_waits_unconfirmed']} gone by the second look); "
        f"waits for another user's lock: {r['foreign_lock_waits']}; longest seen (ms): "
        + ", ".join(f"{g} {v:.1f}" for g, v in r["longest_lock_wait_ms"].items()))
    add("lock holders while someone waited: " + (", ".join(f"{k} {v}" for k, v in r["lock_holder_activity"].items()) or "none"))
    m, s = r["memory_kb"], r["soak"]
    add("RSS (KB) after round 1 -> at the end (max): " + "; ".join(
        f"{name} {v['first']} -> {v['end']} ({v['max']})" for name, v in m.items()))
    for process in s.get("processes", []):
        sampled = process.get("sampled_rss_kb", {})
        add(f"soak process, {process.get('threads')} thread(s): {process.get('cycles')} cycles = {process.get('transactions')} "
            f"transactions in {process.get('seconds', 0):.0f} s; its VmRSS {process.get('rss_kb_warm')} KB after the first "
            f"tenth -> {process.get('rss_kb_end')} KB at the end; sampled every 0.1 s, peaks {sampled.get('first')} -> "
            f"{sampled.get('last')} KB (max {sampled.get('max')}, {sampled.get('samples', 0)} samples, "
            f"{format_rate(sampled.get('bytes_per_attempt'))}); {process.get('failures')} failures")
    add(f"soak (own rig): fed {s.get('fed')}; root's attempt number rose by {s.get('attempts_on_disk')} "
        f"(expected {s.get('attempts_expected')}: {s.get('transactions')} transactions + the no-matches)")
    add("")
    if r["mismatches"]:
        add(f"MISMATCHES ({len(r['mismatches'])}):")
        lines.extend(f"  {m}" for m in r["mismatches"][:200])
    else:
        add("no mismatch")
    return "\n".join(lines)


# Bounds on memory, shared with tests/test_load.py. fprintd and dbus-daemon
# are sampled after every round: the growth from after round 1 (everything
# allocated once is in by then) to the end, in KB. The soak processes are
# sampled every 0.1 s; their peaks (of 8 windows, the first two left out)
# may grow SOAK_SAMPLED_GROWTH_KB, and their own figures (after the first
# tenth of their cycles, on the main thread, and at the end) SOAK_GROWTH_KB,
# which includes the threads' stacks and malloc arenas, made after the
# first figure.
FPRINTD_GROWTH_KB = 2048
DBUS_GROWTH_KB = 2048
SOAK_SAMPLED_GROWTH_KB = 1024
SOAK_GROWTH_KB = 4096
# The single-threaded soak's growth (growth_per_attempt), in bytes per
# attempt on root's record (both soaks' attempts: their progress). Measured
# here in 30 s runs: the module from before LogindSeat's names became
# computed properties (234 bytes lost per fingerprint prompt) grew 89 and
# 76; the module after it 1.8 and 6.2. The 4-threaded one is noisier (20-37
# for both) and has no such bound.
SOAK_BYTES_PER_ATTEMPT = 32


def memory_problems(report):
    m, s = report["memory_kb"], report["soak"]
    problems = []
    for name, values, bound in (("fprintd", m.get("fprintd"), FPRINTD_GROWTH_KB),
                                ("fprintd (soak rig)", m.get("fprintd (soak rig)"), FPRINTD_GROWTH_KB),
                                ("dbus-daemon", m.get("dbus-daemon"), DBUS_GROWTH_KB)):
        if not values or values.get("samples", 0) < 2:
            problems.append(f"{name}: RSS not sampled twice")
        elif values["end"] - values["first"] > bound:
            problems.append(f"{name}: RSS grew {values['end'] - values['first']} KB (bound {bound})")
    processes = s.get("processes", [])
    if not processes:
        problems.append("soak: no process ran")
    for process in processes:
        name = f"soak process ({process.get('threads')} thread(s))"
        sampled = process.get("sampled_rss_kb") or {}
        if sampled.get("samples", 0) < 2:
            problems.append(f"{name}: RSS not sampled twice")
        elif sampled["last"] - sampled["first"] > SOAK_SAMPLED_GROWTH_KB:
            problems.append(f"{name}: its peak RSS grew {sampled['last'] - sampled['first']} KB (bound {SOAK_SAMPLED_GROWTH_KB})")
        rate = sampled.get("bytes_per_attempt")
        if process.get("threads") == 1:
            if rate is None:
                problems.append(f"{name}: growth per attempt not measured (too few samples)")
            elif rate > SOAK_BYTES_PER_ATTEMPT:
                problems.append(f"{name}: VmRSS grows {rate:.0f} bytes per attempt (bound {SOAK_BYTES_PER_ATTEMPT})")
        if process.get("rss_kb_warm") is None:
            problems.append(f"{name}: VmRSS not reported")
        elif process["rss_kb_end"] - process["rss_kb_warm"] > SOAK_GROWTH_KB:
            problems.append(f"{name}: VmRSS grew {process['rss_kb_end'] - process['rss_kb_warm']} KB (bound {SOAK_GROWTH_KB})")
    return problems


def leftover_processes(base, pids):
    """Processes still alive that the run started: any of `pids`, or any
    process whose environment or command line names the run's directory."""
    found = []
    marker = str(base).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in "ZX":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            if int(entry.name) in pids or marker in (entry / "environ").read_bytes() or marker in cmdline:
                command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:120]
                found.append(f"{entry.name} {command}")
        except (OSError, IndexError):
            continue
    return found


def run_load(seconds, group_size=32, seed=None, bound=120, rig=None, log=print, module=MODULE):
    """Runs the load test; -> its report (a dict), with the memory bounds and
    the processes left behind checked. Starts (and stops) its own rig unless
    one is given (the caller then stops it and checks its processes)."""
    base = Path(tempfile.mkdtemp(prefix="localauth-load-"))
    try:
        if rig is None:
            with FprintRig() as own:
                report = LoadTest(own, base, seconds, group_size, seed, bound, log=log, module=module).run()
            pids = set(report["processes"].values())
        else:
            report = LoadTest(rig, base, seconds, group_size, seed, bound, log=log, module=module).run()
            pids = {pid for name, pid in report["processes"].items() if name not in ("fprintd", "dbus-daemon", "polkit")}
        report["memory_problems"] = memory_problems(report)
        report["leftover_processes"] = leftover_processes(base, pids)
        report["mismatches"].extend(report["memory_problems"])
        report["mismatches"].extend(f"left running: {p}" for p in report["leftover_processes"])
        return report
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=300, help="how long to run rounds (default 300)")
    parser.add_argument("--group-size", type=int, default=32, help="concurrent transactions per group (default 32)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--bound", type=int, default=120, help="seconds a phase may take before it is killed")
    parser.add_argument("--json", help="also write the report as JSON to this file")
    parser.add_argument("--module", type=Path, default=MODULE, help=f"the module to load-test (default {MODULE})")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root (mount namespaces, the state directory's checks)")
    if not HARNESS.exists():
        parser.error(f"{HARNESS} is missing: run make test-artifacts")
    # A SIGTERM (timeout(1), a CI's cancel) ends the run through its
    # teardown, so that fprintd, the bus and every harness are stopped.
    for signo in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signo, lambda number, frame: sys.exit(128 + number))
    report = run_load(args.seconds, args.group_size, args.seed, args.bound,
                      log=lambda text: print(text, flush=True), module=args.module)
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 1 if report["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
