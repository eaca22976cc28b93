"""The load test's world: what the module says, the record's offsets, the
virtual reader's scans, the configurations rounds run under, the private
PAM world of 65 users (LoadWorld), snapshots of their records, and the
feeder that answers the reader."""
import collections
import hashlib
import os
import random
import shutil
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fprint_rig import DEVICE_IFACE, FPRINT_NAME, _Client
from pamenv import (HARNESS, MODULE, OFFSET_FAILURE_COUNT, OFFSET_NEXT_SEQUENCE, USERS, PamEnv, current_slot,
                    parse_record)


# ---- what the module says (sentences.py; these are not constant sentences) --
INSTRUCTION = "the fingerprint reader."          # ends the instruction ("Swipe your finger across ...")
BACKOFF = "Too many wrong passwords. Try again in "
HINTS = ("Scan failed. Try again.", "Swipe was too short. Try again.", "Finger was not centered. Try again.",
         "Remove your finger and try again.")
# Anything else the fingerprint phase can say ends it without a verdict (and
# refunds the attempt): under this load that is a fault to report.
UNEXPECTED = ("Timed out waiting for a fingerprint.", "The fingerprint reader was disconnected.",
              "The fingerprint reader stopped working.", "Your password is required")

# ---- the record (docs/DESIGN.md, "The state store"; offsets of tests/support/pamenv.py) --
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
