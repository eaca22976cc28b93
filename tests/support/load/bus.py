"""The load test's bus watch: who holds the reader, who was told it is busy,
what fprintd said (a dbus-monitor on the rig's bus)."""
import collections
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field

from fprint_rig import stop_process
from .world import ERR_ALREADY_IN_USE, MARK_IFACE


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
