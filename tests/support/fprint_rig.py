"""FprintRig: a real fprintd 1.94.2 (libfprint 1.94.5 virtual_device driver) on a
private system bus, with a polkit stand-in (python3-dbusmock), for tests and the
demo. See docs/DESIGN.md, "The fingerprint (fprintd)". Needs /usr/bin/python3
(python3-gi, python3-dbusmock); no pytest import here.

    with FprintRig() as rig:
        rig.enroll("alice")                      # print id "finger-alice"
        rig.feed(["SCAN finger-alice"])          # before the client's VerifyStart
        run = pam.run(env=rig.env())             # any client on rig.bus_address
        report = rig.feed_wait()                 # what was sent, any timeout

MEASURED (this machine, 2 vCPUs, `pytest -s tests/module/test_fprint_rig.py`, 4 runs):
  rig start (dbus-daemon + polkit mock + fprintd owning its name): 58-65 ms
    (111-202 ms with 4 CPU hogs running); teardown about 0.1 s.
  Claim -> VerifyStatus(verify-match), feeder on cue, python3-dbus client,
    median of 10: 2.3-3.3 ms (min 2.1, max 3.8; 2.4-3.7 ms under CPU load).
  UNPLUG during a verify -> VerifyStatus(verify-unknown-error, done) after 501-503 ms.

fprintd 1.94.2 / virtual_device behaviour a client must handle (all observed here):
  * Signals are broadcast (no destination): any connection with a match rule
    sees every session's VerifyFingerSelected/VerifyStatus; they say nothing
    about which session they belong to.
  * Normal attempt order on the client: VerifyStart reply, VerifyFingerSelected,
    then VerifyStatus. A scan already queued in the driver is reported *before*
    the VerifyStart reply, and VerifyFingerSelected comes after it.
  * done=true does not end the verify: a second VerifyStart without VerifyStop
    fails with AlreadyInUse "Verification already in progress". VerifyStop
    after done=true is silent. Release without VerifyStop is allowed.
  * VerifyStop or Release during a running verify emits
    VerifyStatus(verify-no-match, done=true), *before* the method reply. A client
    making synchronous calls (sd_bus_call) finds that signal queued after the
    reply and must drop it, or it counts as a failed attempt/next result.
  * Retry hints (RETRY 0..3 -> verify-retry-scan, -swipe-too-short,
    -finger-not-centered, -remove-and-retry) come with done=false; fprintd
    restarts the verify itself, with no new VerifyFingerSelected.
  * ERROR 5 -> verify-disconnected, ERROR 0 -> verify-unknown-error (done=true);
    the device works again after VerifyStop + VerifyStart.
  * UNPLUG: nothing at once; verify-unknown-error (not verify-disconnected),
    done=true, about 0.5 s later. VerifyStop then succeeds, Release fails with
    ...Error.Internal "Release failed with error: This device has been removed
    from the system.", then InterfacesRemoved on /net/reactivated/Fprint;
    GetDevices -> [], GetDefaultDevice -> ...Error.NoSuchDevice.
  * Claim while claimed (by anyone, the same connection included):
    net.reactivated.Fprint.Error.AlreadyInUse "Device was already claimed".
    A claimer whose connection closes loses the claim (a running verify
    emits verify-no-match).
  * VerifyStart for a user with no prints: ...Error.NoEnrolledPrints;
    ListEnrolledFingers of such a user is that same error, not [].
  * fprintd not running: calls fail with org.freedesktop.DBus.Error.ServiceUnknown
    (this bus has no activation; a real system bus would start fprintd);
    NameOwnerChanged(net.reactivated.Fprint, old, "") when it dies.
  * scan-type of the virtual device is "swipe" unless SET_SCAN_TYPE press.

Feeder cues (FprintRig.feed, on_cue=True), per kind of command:
  * attempt commands -- SCAN <id>, ERROR <n>, UNPLUG, and a RETRY <n> that
    opens an attempt: wait for the next not-yet-used VerifyFingerSelected
    signal from fprintd. fprintd emits it (broadcast, no eavesdropping needed)
    while handling VerifyStart, after sending the VerifyStart reply, so the
    client has started the attempt and is listening. A scan sent earlier is
    queued by the driver and consumed at once by the next VerifyStart: its
    VerifyStatus then reaches the client *before* the VerifyStart reply.
    Each such command uses up one VerifyFingerSelected; signals that arrive
    early are counted, not lost (the match rule is active before feed()
    returns, so call feed() before the client's VerifyStart).
  * the command after a RETRY <n>: a retry hint does not end the attempt
    (VerifyStatus done=false; fprintd restarts the verify by itself with no
    new VerifyFingerSelected), so the cue is: the driver closed the RETRY
    connection AND fprintd emitted that VerifyStatus(done=false). The driver
    queues commands, so the close alone would do; the status makes the order
    (hint seen by the client, then the next scan) certain and observable.
  * modifiers -- SLEEP <ms>, SET_SCAN_TYPE ..., SET_ENROLL_STAGES n, any other
    command: no cue of their own; sent right before the next cued command,
    after that command's cue (SLEEP <ms> delays the driver's handling of the
    next command; the driver closes the SLEEP connection at once). Trailing
    modifiers are sent right after the previous command.
  * every command: wait until the virtual-device socket accepts a connection
    (it exists only between Claim and Release; after Release the file stays
    and refuses connections), send the command with no newline, wait until
    the driver closes the connection (EOF) before the next one.
  on_cue=False: no signal cues at all, only the socket rules above.
All waits are bounded (cue_timeout per command, 10 s by default).
"""
import contextlib
import math
import os
import random
import shutil
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gi.repository import Gio, GLib

PY3 = "/usr/bin/python3"
FPRINTD = "/usr/libexec/fprintd"
DBUS_DAEMON = "dbus-daemon"
# A prefix that makes a started process die with the test process that
# started it (PR_SET_PDEATHSIG), even when that one dies without a teardown.
DIE_WITH_TESTS = ["setpriv", "--pdeathsig", "KILL", "--"]

FPRINT_NAME = "net.reactivated.Fprint"
FPRINT_ROOT = "/net/reactivated/Fprint"
MANAGER_PATH = "/net/reactivated/Fprint/Manager"
MANAGER_IFACE = "net.reactivated.Fprint.Manager"
DEVICE_IFACE = "net.reactivated.Fprint.Device"
POLKIT_NAME = "org.freedesktop.PolicyKit1"
POLKIT_PATH = "/org/freedesktop/PolicyKit1/Authority"
POLKIT_ACTIONS = [
    "net.reactivated.fprint.device.verify",
    "net.reactivated.fprint.device.enroll",
    "net.reactivated.fprint.device.setusername",
]
ENROLL_FINGER = "right-index-finger"

# Error names observed from fprintd 1.94.2 on this rig.
ERR_ALREADY_IN_USE = "net.reactivated.Fprint.Error.AlreadyInUse"      # Claim while claimed; VerifyStart twice
ERR_CLAIM_DEVICE = "net.reactivated.Fprint.Error.ClaimDevice"         # VerifyStop/Release when not claimed
ERR_NO_ENROLLED = "net.reactivated.Fprint.Error.NoEnrolledPrints"     # VerifyStart/ListEnrolledFingers, no prints
ERR_NO_ACTION = "net.reactivated.Fprint.Error.NoActionInProgress"     # VerifyStop with no verify
ERR_NO_SUCH_DEVICE = "net.reactivated.Fprint.Error.NoSuchDevice"      # GetDefaultDevice after UNPLUG
ERR_INTERNAL = "net.reactivated.Fprint.Error.Internal"                # Release after UNPLUG

# Commands that start (and use up) a verify attempt's cue; RETRY does too when
# it is the first command of an attempt.
ATTEMPT_COMMANDS = ("SCAN", "ERROR", "UNPLUG", "RETRY")

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
"""


def pump_context(ctx, pred, timeout):
    """Dispatch a GLib main context until pred() or timeout (s). -> pred()"""
    deadline = time.monotonic() + timeout
    while not pred():
        left = deadline - time.monotonic()
        if left <= 0:
            return bool(pred())
        src = GLib.timeout_source_new(int(min(left, 0.05) * 1000) + 1)
        src.set_callback(lambda *_: False)
        src.attach(ctx)
        try:
            ctx.iteration(True)
        finally:
            src.destroy()
    return True


class RigError(RuntimeError):
    pass


def process_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, Z, ...); None when gone.
    comm may contain spaces and parentheses: the state follows the last ')'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2]


def proc_gone(pid):
    """True once PID has exited: /proc/PID/stat missing or state Z/X. (PID 1
    here does not reap orphans, so kill -0 would still succeed on a zombie.)"""
    state = process_state(pid)
    return state is None or state in "ZXx"


def _tail(path, chars=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-chars:]
    except (OSError, TypeError):
        return ""


def _wait_until(pred, timeout, interval=0.005):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def stop_process(proc, term_timeout=3.0, kill_timeout=2.0):
    """SIGTERM, then SIGKILL, by PID; exit checked via /proc/PID/stat. Reaps."""
    if proc is None:
        return
    pid = proc.pid
    if not proc_gone(pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if not _wait_until(lambda: proc_gone(pid), term_timeout):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _wait_until(lambda: proc_gone(pid), kill_timeout)
    try:
        proc.wait(timeout=kill_timeout)  # reap our child (it is a zombie now)
    except subprocess.TimeoutExpired:
        pass


def dbus_error_name(err):
    """The D-Bus error name of a GLib.Error from GDBus (or None)."""
    name = Gio.DBusError.get_remote_error(err)
    if name:
        return name
    msg = getattr(err, "message", str(err))
    if msg.startswith("GDBus.Error:"):
        return msg[len("GDBus.Error:"):].split(":", 1)[0]
    return None


class _Client:
    """A private GDBus connection to the rig bus with its own main context; use
    it from one thread at a time (signal callbacks run in pump())."""

    def __init__(self, address):
        self.ctx = GLib.MainContext.new()
        self.ctx.push_thread_default()
        try:
            self.conn = Gio.DBusConnection.new_for_address_sync(
                address,
                Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
                | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
                None, None)
        finally:
            self.ctx.pop_thread_default()
        self.subs = []

    @property
    def unique_name(self):
        return self.conn.get_unique_name()

    def call(self, dest, path, iface, method, args=None, reply=None, timeout=10.0):
        v = self.conn.call_sync(dest, path, iface, method, args,
                                GLib.VariantType.new(reply) if reply else None,
                                Gio.DBusCallFlags.NONE, int(timeout * 1000), None)
        return v.unpack() if v is not None else None

    def bus_call(self, method, args=None, reply=None):
        return self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                         "org.freedesktop.DBus", method, args, reply)

    def has_owner(self, name):
        return self.bus_call("NameHasOwner", GLib.Variant("(s)", (name,)), "(b)")[0]

    def subscribe(self, sender, iface, member, path, callback):
        """callback(sender, path, iface, member, args_tuple). Returns once the
        match rule is in effect in dbus-daemon."""
        self.ctx.push_thread_default()
        try:
            sid = self.conn.signal_subscribe(
                sender, iface, member, path, None, Gio.DBusSignalFlags.NONE,
                lambda c, s, p, i, m, params, *_: callback(s, p, i, m, params.unpack()))
        finally:
            self.ctx.pop_thread_default()
        self.subs.append(sid)
        # dbus-daemon handles one connection's messages in order: once this is
        # answered, the AddMatch GDBus sent before it is in effect.
        self.bus_call("GetId", None, "(s)")
        return sid

    def unsubscribe(self, sid):
        if sid in self.subs:
            self.subs.remove(sid)
            self.conn.signal_unsubscribe(sid)

    def pump(self, pred, timeout):
        """Dispatch this client's signals until pred() or timeout (s). -> pred()"""
        return pump_context(self.ctx, pred, timeout)

    def close(self):
        for sid in list(self.subs):
            self.unsubscribe(sid)
        try:
            self.conn.close_sync(None)
        except GLib.Error:
            pass
        for _ in range(1000):  # drain idle callbacks queued for this context
            if not self.ctx.iteration(False):
                break


@dataclass
class FeedReport:
    commands: list                                  # what feed() was asked to send
    sent: list = field(default_factory=list)        # (command, cue, seconds since feed())
    events: list = field(default_factory=list)      # (seconds, member, args) seen from fprintd
    selected_at: list = field(default_factory=list)  # time.monotonic() of each VerifyFingerSelected
    error: str = None                               # first failure (e.g. a timed-out cue)
    timed_out: bool = False

    @property
    def ok(self):
        return self.error is None and not self.timed_out and len(self.sent) == len(self.commands)

    def sent_commands(self):
        return [c for c, _, _ in self.sent]

    def statuses(self):
        """VerifyStatus (result, done) pairs seen while feeding."""
        return [tuple(a) for _, m, a in self.events if m == "VerifyStatus"]


class _Feeder(threading.Thread):
    def __init__(self, rig, commands, on_cue, cue_timeout):
        super().__init__(name="fprint-rig-feeder", daemon=True)
        self.rig = rig
        self.commands = list(commands)
        self.on_cue = on_cue
        self.cue_timeout = cue_timeout
        self.report = FeedReport(self.commands)
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.client = None
        self.selected = 0       # VerifyFingerSelected seen
        self.used = 0           # ... used up by attempt commands
        if on_cue:
            self.client = _Client(rig.bus_address)
            self.client.subscribe(FPRINT_NAME, DEVICE_IFACE, None, None, self._on_signal)

    def _on_signal(self, sender, path, iface, member, args):
        if member not in ("VerifyFingerSelected", "VerifyStatus"):
            return
        with self.lock:
            self.report.events.append((round(time.monotonic() - self.t0, 4), member, args))
            if member == "VerifyFingerSelected":
                self.selected += 1
                self.report.selected_at.append(time.monotonic())

    def _pump(self, pred, what):
        if self.client is None:
            return
        deadline = time.monotonic() + self.cue_timeout
        while not pred():
            if self.stop.is_set():
                raise RigError(f"feeder stopped while waiting for {what}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no {what} within {self.cue_timeout} s")
            self.client.pump(pred, min(0.1, max(0.0, deadline - time.monotonic())))

    def _send(self, cmd, cue):
        self.rig.send_vdev(cmd, timeout=self.cue_timeout, stop=self.stop)
        self.report.sent.append((cmd, cue, round(time.monotonic() - self.t0, 4)))

    def run(self):
        try:
            self._run()
        except TimeoutError as e:
            self.report.timed_out = True
            self.report.error = str(e)
        except Exception as e:  # noqa: BLE001 -- reported through feed_wait()
            self.report.error = f"{type(e).__name__}: {e}"
        finally:
            if self.client is not None:
                self.client.close()

    def _run(self):
        pending_modifiers = []
        after_retry = None    # index into events after which the retry's status must show
        for cmd in self.commands:
            word = cmd.split()[0].upper() if cmd.strip() else ""
            if word not in ATTEMPT_COMMANDS:
                pending_modifiers.append(cmd)
                continue
            cue = "socket"
            if self.on_cue:
                if after_retry is not None:
                    start = after_retry
                    self._pump(lambda: any(m == "VerifyStatus" and not a[1]
                                           for _, m, a in self.report.events[start:]),
                               "VerifyStatus(done=false) after RETRY")
                    cue = "retry-status"
                else:
                    need = self.used + 1
                    self._pump(lambda: self.selected >= need,
                               f"VerifyFingerSelected #{need} (for {cmd!r})")
                    self.used = need
                    cue = f"VerifyFingerSelected#{need}"
            for mod in pending_modifiers:
                self._send(mod, cue)
            pending_modifiers = []
            with self.lock:
                mark = len(self.report.events)
            self._send(cmd, cue)
            after_retry = mark if word == "RETRY" else None
        for mod in pending_modifiers:
            self._send(mod, "after-previous")


class FprintRig:
    """Private system bus + polkit stand-in + real fprintd with virtual_device.

    FprintRig(debug=False, keep_dir=False, start_timeout=10.0)
      debug: G_MESSAGES_DEBUG=all for fprintd (log in .fprintd_log)
      keep_dir: leave the temp dir (logs, prints) in place on exit
                (also with FPRINT_RIG_KEEP=1)
    Attributes: bus_address ("unix:path=DIR/system_bus_socket"), socket_path,
      prints_dir, vdev_socket, dir, fprintd_log, start_seconds, fprintd_pid.
    env(base=None)            {"DBUS_SYSTEM_BUS_ADDRESS": bus_address} (+ base)
    enroll(user, print_id=None)   print "finger-<user>" on right-index-finger
    list_enrolled(user)       -> finger names ([] if none)
    start_fprintd() / stop_fprintd() / restart_fprintd()
    claim_elsewhere(user) / release_elsewhere(disconnect_only=False)
    send_vdev(command)        one virtual-device command, now (device claimed)
    feed(commands, on_cue=True, cue_timeout=10.0) / feed_wait() -> FeedReport
    device_call(method, *args, sig=None, reply=None)   raw Device call (GDBus)
    """

    def __init__(self, debug=False, keep_dir=False, start_timeout=10.0, image_reader=False, polkit_stand_in=True,
                 bus_users=None):
        self.debug = debug or os.environ.get("FPRINT_RIG_DEBUG") == "1"
        # libfprint's virtual_image driver instead of virtual_device: an image
        # reader (FpImageDevice, like most USB press readers) that clears
        # finger-needed when it captures, before its verdict.
        self.image_reader = image_reader
        # False: no stand-in owns polkit's name; the test starts the real
        # polkitd on this bus itself (it must, before fprintd is asked).
        self.polkit_stand_in = polkit_stand_in
        # {name: uid} of users that are not the host's but connect to the
        # bus themselves (an agent, not only the setuid helper): the bus
        # daemon looks up every client's groups, and refuses one it cannot
        # find, so it gets them through nss_wrapper.
        self.bus_users = dict(bus_users or {})
        self.keep_dir = keep_dir or os.environ.get("FPRINT_RIG_KEEP") == "1"
        self.start_timeout = start_timeout
        self.dir = None
        self.bus_proc = self.polkit_proc = self.fprintd_proc = None
        self.ctl = None
        self._elsewhere = None
        self._feeder = None
        self._lock = threading.RLock()
        self.start_seconds = None

    # ----- setup / teardown -------------------------------------------------
    def __enter__(self):
        t0 = time.monotonic()
        try:
            self._start()
        except BaseException:
            self._teardown()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def __exit__(self, *exc):
        self._teardown()
        return False

    def _start(self):
        self.dir = tempfile.mkdtemp(prefix="fprint-rig-")
        self.socket_path = os.path.join(self.dir, "system_bus_socket")
        self.bus_address = f"unix:path={self.socket_path}"
        self.prints_dir = os.path.join(self.dir, "prints")
        self.vdev_socket = os.path.join(self.dir, "vdev.sock")
        self.config_path = os.path.join(self.dir, "system-bus.conf")
        self.fprintd_log = os.path.join(self.dir, "fprintd.log")
        self.polkit_log = os.path.join(self.dir, "polkitd.log")
        self.bus_log = os.path.join(self.dir, "dbus-daemon.log")
        with open(self.config_path, "w") as f:
            f.write(BUS_CONFIG.format(socket=self.socket_path))

        bus_env = None
        if self.bus_users:
            passwd, group = os.path.join(self.dir, "passwd"), os.path.join(self.dir, "group")
            with open("/etc/passwd") as host, open(passwd, "w") as f:
                f.write(host.read() + "".join(f"{n}:x:{u}:{u}:{n}:/:/bin/sh\n" for n, u in self.bus_users.items()))
            with open("/etc/group") as host, open(group, "w") as f:
                f.write(host.read() + "".join(f"{n}:x:{u}:\n" for n, u in self.bus_users.items()))
            bus_env = dict(os.environ, LD_PRELOAD="libnss_wrapper.so", NSS_WRAPPER_PASSWD=passwd, NSS_WRAPPER_GROUP=group)
        with open(self.bus_log, "w") as log:
            self.bus_proc = subprocess.Popen(
                DIE_WITH_TESTS + [DBUS_DAEMON, f"--config-file={self.config_path}", "--nofork", "--print-address"],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, env=bus_env)
        # --print-address prints once the socket listens: the readiness cue.
        line = self._readline(self.bus_proc, self.start_timeout)
        if not line.startswith("unix:"):
            raise RigError(f"dbus-daemon did not start: {line!r}; see {self.bus_log}")
        self.ctl = _Client(self.bus_address)

        if not self.polkit_stand_in:
            # The real polkitd drops to its own user, and agents run as the
            # test's user: both must reach the bus's socket.
            os.chmod(self.dir, 0o755)
        if self.polkit_stand_in:
            self._start_polkit_stand_in()
        self.start_fprintd()

    def _start_polkit_stand_in(self):
        with open(self.polkit_log, "a") as log:
            self.polkit_proc = subprocess.Popen(
                DIE_WITH_TESTS + [PY3, "-m", "dbusmock", "--system", "--template", "polkitd"],
                env=self.env(os.environ), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self._wait_name(POLKIT_NAME, True, self.polkit_proc, self.polkit_log)
        self._polkit_allows(POLKIT_ACTIONS)

    def _polkit_allows(self, actions):
        self.ctl.call(POLKIT_NAME, POLKIT_PATH, "org.freedesktop.DBus.Mock", "SetAllowed", GLib.Variant("(as)", (actions,)))

    @contextlib.contextmanager
    def polkit_refusing(self, stopped=False):
        """Inside, fprintd's polkit checks fail, so it answers every caller's
        ListEnrolledFingers and Claim with an error: the stand-in denies
        every action, or (stopped=True) is not on the bus at all, as while
        polkitd is down. On the way out it allows fprintd's actions again."""
        if not self.polkit_stand_in:
            raise RigError("polkit_refusing needs the rig's polkit stand-in")
        if stopped:
            stop_process(self.polkit_proc)
            self._wait_name(POLKIT_NAME, False)
        else:
            self._polkit_allows([])
        try:
            yield
        finally:
            if stopped:
                self._start_polkit_stand_in()
            else:
                self._polkit_allows(POLKIT_ACTIONS)

    @staticmethod
    def _readline(proc, timeout):
        out = []

        def reader():
            out.append(proc.stdout.readline().decode(errors="replace").strip())

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        return out[0] if out else ""

    def _wait_name(self, name, present, proc=None, log=None, timeout=None):
        timeout = self.start_timeout if timeout is None else timeout

        def ready():
            if proc is not None and present and proc_gone(proc.pid):
                raise RigError(f"{proc.args[0]} exited ({proc.poll()}); log tail:\n{_tail(log)}")
            return self.ctl.has_owner(name) == present

        if not _wait_until(ready, timeout):
            raise RigError(f"{name} {'has no owner' if present else 'still owned'} after {timeout} s")

    def _teardown(self):
        if self._feeder is not None:
            self._feeder.stop.set()
            self._feeder.join(5)
            self._feeder = None
        if self._elsewhere is not None:
            self._elsewhere.close()
            self._elsewhere = None
        stop_process(self.fprintd_proc)
        stop_process(self.polkit_proc)
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        stop_process(self.bus_proc)
        if self.bus_proc is not None and self.bus_proc.stdout:
            self.bus_proc.stdout.close()
        self.fprintd_proc = self.polkit_proc = self.bus_proc = None
        if self.dir and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def env(self, base=None):
        """{"DBUS_SYSTEM_BUS_ADDRESS": ...} (merged into a copy of base if given)."""
        env = dict(base) if base is not None else {}
        env["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus_address
        return env

    # ----- fprintd lifecycle --------------------------------------------------
    @property
    def fprintd_pid(self):
        return self.fprintd_proc.pid if self.fprintd_proc else None

    def fprintd_running(self):
        return self.fprintd_proc is not None and not proc_gone(self.fprintd_proc.pid)

    def start_fprintd(self):
        """Start fprintd (if not running) and wait until it owns its name."""
        with self._lock:
            if self.fprintd_running():
                return
            env = self.env(os.environ)
            driver = "FP_VIRTUAL_IMAGE" if self.image_reader else "FP_VIRTUAL_DEVICE"
            env.update({driver: self.vdev_socket, "STATE_DIRECTORY": self.prints_dir})
            env.pop("G_MESSAGES_DEBUG", None)
            if self.debug:
                env["G_MESSAGES_DEBUG"] = "all"
            with open(self.fprintd_log, "a") as log:
                self.fprintd_proc = subprocess.Popen(
                    DIE_WITH_TESTS + [FPRINTD, "--no-timeout"], env=env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True)
            self._wait_name(FPRINT_NAME, True, self.fprintd_proc, self.fprintd_log)

    def stop_fprintd(self):
        """Kill fprintd by PID (SIGTERM, then SIGKILL) and wait until its bus
        name is gone. For "fprintd not running" tests."""
        with self._lock:
            stop_process(self.fprintd_proc)
            self.fprintd_proc = None
            self._wait_name(FPRINT_NAME, False)

    def restart_fprintd(self):
        """stop_fprintd() then start_fprintd(); enrolled prints are kept."""
        self.stop_fprintd()
        self.start_fprintd()

    # ----- fprintd calls -------------------------------------------------------
    def device_path(self, client=None):
        c = client or self.ctl
        try:
            return c.call(FPRINT_NAME, MANAGER_PATH, MANAGER_IFACE, "GetDefaultDevice", None, "(o)")[0]
        except GLib.Error as error:
            self._explain_a_vanished_fprintd(error)
            raise

    def _explain_a_vanished_fprintd(self, error):
        """A call found no fprintd while the rig had started one and not
        stopped it: fprintd died under the test. Say how (exit status or
        signal) with its log, instead of a bare ServiceUnknown."""
        if dbus_error_name(error) != "org.freedesktop.DBus.Error.ServiceUnknown":
            return
        proc = self.fprintd_proc
        if proc is None or not proc_gone(proc.pid):
            return
        try:
            status = proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            status = "unknown"
        raise RigError(f"fprintd (pid {proc.pid}) died under the test, status {status}; "
                       f"log tail:\n{_tail(self.fprintd_log)}") from error

    def device_call(self, method, *args, sig=None, reply=None, client=None, timeout=10.0):
        c = client or self.ctl
        return c.call(FPRINT_NAME, self.device_path(c), DEVICE_IFACE, method,
                      GLib.Variant(sig, args) if sig else None, reply, timeout)

    def list_enrolled(self, user):
        """Enrolled finger names of user ([] when fprintd says NoEnrolledPrints)."""
        with self._lock:
            try:
                return list(self.device_call("ListEnrolledFingers", user, sig="(s)", reply="(as)")[0])
            except GLib.Error as e:
                if dbus_error_name(e) == ERR_NO_ENROLLED:
                    return []
                raise

    @contextlib.contextmanager
    def _enrolling(self, user, finger, prepare=lambda: None):
        """A claimed enrollment of `finger` for `user`: yields the list that
        fprintd's EnrollStatus signals are appended to. `prepare` runs
        between Claim and EnrollStart. EnrollStop, the unsubscription and
        Release happen on every way out."""
        with self._lock:
            statuses = []
            sid = self.ctl.subscribe(FPRINT_NAME, DEVICE_IFACE, "EnrollStatus", None,
                                     lambda s, p, i, m, a: statuses.append(tuple(a)))
            self.device_call("Claim", user, sig="(s)")
            try:
                prepare()
                self.device_call("EnrollStart", finger, sig="(s)")
                try:
                    yield statuses
                finally:
                    self.device_call("EnrollStop")
            finally:
                self.ctl.unsubscribe(sid)
                self.device_call("Release")

    def enroll(self, user, print_id=None, finger=ENROLL_FINGER, timeout=10.0):
        """Enroll one finger for user whose virtual print is print_id
        (default "finger-<user>"); replaces the user's earlier prints."""
        print_id = print_id or f"finger-{user}"

        def prepare():
            try:
                self.device_call("DeleteEnrolledFingers2")
            except GLib.Error as e:
                if dbus_error_name(e) != ERR_NO_ENROLLED:
                    raise
            self.send_vdev("SET_ENROLL_STAGES 1", timeout=timeout)

        with self._enrolling(user, finger, prepare) as statuses:
            self.send_vdev(f"SCAN {print_id}", timeout=timeout)
            if not self.ctl.pump(lambda: any(st[1] for st in statuses), timeout):
                raise RigError(f"no final EnrollStatus within {timeout} s: {statuses}")
            if statuses[-1][0] != "enroll-completed":
                raise RigError(f"enroll failed: {statuses}")

    def claim_elsewhere(self, user):
        """Claim the device for user from a separate bus connection (another
        "prompt") and hold it until release_elsewhere()."""
        with self._lock:
            if self._elsewhere is not None:
                raise RigError("already claimed elsewhere")
            other = _Client(self.bus_address)
            try:
                self.device_call("Claim", user, sig="(s)", client=other)
            except BaseException:
                other.close()
                raise
            self._elsewhere = other

    def reader_given_back(self, user="alice", timeout=10.0):
        """After a client was killed while fprintd verified for it: the
        reader can be claimed again once its connection is gone. fprintd
        1.94 can crash on that disconnection (a NULL dereference, seen in
        CI after SIGKILL, SIGINT and SIGTERM of the client); a real system's
        bus starts it again at the next call, and so does this, with a
        warning naming the crash, so that fprintd's bug does not stand for
        the module's."""
        try:
            self.wait_until_claimable(user, timeout=timeout)
        except (RigError, GLib.Error):
            if self.fprintd_running():
                raise
            warnings.warn("fprintd crashed when the killed client's connection went (fprintd 1.94); started again")
            self.start_fprintd()
            self.wait_until_claimable(user, timeout=timeout)

    def wait_until_claimable(self, user="alice", timeout=10.0):
        """Bounded wait until another client can claim the device, then
        releases it again. fprintd drops a claim only once it sees the
        claiming connection close (a killed prompt, or pam_fprintd, which
        does not Release after a match)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.claim_elsewhere(user)
            except GLib.Error as error:
                if dbus_error_name(error) != ERR_ALREADY_IN_USE:
                    raise
                if time.monotonic() >= deadline:
                    raise RigError("the device was never released") from error
                time.sleep(0.005)  # polling a condition, bounded by the deadline
                continue
            self.release_elsewhere()
            return

    def claiming_process(self, user):
        """Another program holding the reader: a process of its own that
        claims the device for `user` and never releases it (a client that
        hangs, or one a suspend left holding it). Returns the process once
        fprintd granted the claim; the test kills it (fprintd releases a
        claim when its holder's bus connection closes)."""
        script = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
                  "from fprint_rig import _Client, FPRINT_NAME, MANAGER_PATH, MANAGER_IFACE, DEVICE_IFACE; "
                  "from gi.repository import GLib; "
                  f"c = _Client({self.bus_address!r}); "
                  "path = c.call(FPRINT_NAME, MANAGER_PATH, MANAGER_IFACE, 'GetDefaultDevice', None, '(o)')[0]; "
                  f"c.call(FPRINT_NAME, path, DEVICE_IFACE, 'Claim', GLib.Variant('(s)', ({user!r},))); "
                  "print('claimed', flush=True); sys.stdin.read()")
        proc = subprocess.Popen(DIE_WITH_TESTS + [PY3, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env(os.environ))
        line = self._readline(proc, self.start_timeout)
        if line != "claimed":
            stop_process(proc)
            raise RigError(f"the claiming process did not claim: {line!r} {proc.stderr.read().decode(errors='replace')}")
        return proc

    def release_elsewhere(self, disconnect_only=False):
        """Release the claim_elsewhere() claim (or just drop that connection,
        which makes fprintd release it too)."""
        with self._lock:
            other, self._elsewhere = self._elsewhere, None
            if other is None:
                return
            try:
                if not disconnect_only:
                    self.device_call("Release", client=other)
            finally:
                other.close()

    # ----- other bus clients (attacks) ----------------------------------------
    def bus_name_of(self, pid, timeout=10.0):
        """The unique bus name of the connection that process pid holds."""
        deadline = time.monotonic() + timeout
        while True:
            for name in self.ctl.bus_call("ListNames", None, "(as)")[0]:
                if not name.startswith(":"):
                    continue
                try:
                    owner = self.ctl.bus_call("GetConnectionUnixProcessID", GLib.Variant("(s)", (name,)), "(u)")[0]
                except GLib.Error:
                    continue  # gone meanwhile
                if owner == pid:
                    return name
            if time.monotonic() >= deadline:
                raise RigError(f"process {pid} holds no connection on the rig bus")
            time.sleep(0.01)  # polling a condition, bounded by the deadline

    def flood(self, destination, count=160, size=256 * 1024):
        """Sends `count` unicast signals of `size` bytes each to `destination`
        from a fresh connection (anyone on the bus may), so that whatever is
        sent to it later queues behind them. Returns once all are sent."""
        other = _Client(self.bus_address)
        try:
            payload = GLib.Variant("(ay)", (b"\0" * size,))
            for _ in range(count):
                other.conn.emit_signal(destination, "/flood", "org.example.Flood", "Noise", payload)
            other.conn.flush_sync(None)
        finally:
            other.close()

    # ----- virtual device ------------------------------------------------------
    def _connect_vdev(self, deadline, what, stop=None):
        """A connection to the virtual device's socket, waiting (bounded by
        `deadline`) until it accepts: it exists only while claimed."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.vdev_socket)
                return s
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if stop is not None and stop.is_set():
                    raise RigError(f"stopped before sending {what}")
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"virtual device socket not accepting (device not claimed?) for {what}")
                time.sleep(0.002)  # polling a condition, bounded by the deadline
            except BaseException:
                s.close()
                raise

    def send_vdev(self, command, timeout=10.0, stop=None):
        """Send one command to the virtual device: wait (bounded) until its
        socket accepts, send without newline, wait for the driver to close."""
        deadline = time.monotonic() + timeout
        s = self._connect_vdev(deadline, repr(command), stop)
        try:
            s.sendall(command.encode())
            reply = b""
            while True:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    chunk = s.recv(4096)
                except socket.timeout:
                    raise TimeoutError(f"driver did not close the connection for {command!r}") from None
                if not chunk:
                    return reply.decode(errors="replace")
                reply += chunk
        finally:
            s.close()

    # ----- image reader (image_reader=True) -------------------------------------
    def send_image(self, image, timeout=10.0):
        """Puts a finger image (width, height, 8-bit gray bytes) on the
        virtual image reader; returns the open socket (the driver reads
        further images from it), which the caller closes."""
        width, height, pixels = image
        s = self._connect_vdev(time.monotonic() + timeout, "an image")
        s.sendall(struct.pack("<ii", width, height) + pixels)
        return s

    def enroll_image(self, user, image, timeout=20.0):
        """Enrolls `image` as the user's right index finger (one image per
        enroll stage until fprintd says it is complete)."""
        sockets = []
        try:
            with self._enrolling(user, ENROLL_FINGER) as statuses:
                for _ in range(12):
                    count = len(statuses)
                    sockets.append(self.send_image(image))
                    if not self.ctl.pump(lambda: len(statuses) > count, timeout):
                        raise RigError(f"no EnrollStatus within {timeout} s: {statuses}")
                    if statuses[-1][1]:
                        break
                if statuses[-1][0] != "enroll-completed":
                    raise RigError(f"enroll failed: {statuses}")
        finally:
            for s in sockets:
                s.close()

    # ----- scan feeder ---------------------------------------------------------
    def feed(self, commands, on_cue=True, cue_timeout=10.0):
        """Start feeding commands to the virtual device from a background thread
        (see the module docstring for the cues). The signal subscription is in
        effect when this returns: call it before the client's VerifyStart."""
        if self._feeder is not None and self._feeder.is_alive():
            raise RigError("a feed is still running; call feed_wait() first")
        self._feeder = _Feeder(self, commands, on_cue, cue_timeout)
        self._feeder.start()

    def feed_wait(self, timeout=None):
        """Join the feeder; -> FeedReport (sent commands with their cues, the
        fprintd signals it saw, error/timed_out)."""
        f = self._feeder
        if f is None:
            raise RigError("no feed running")
        if timeout is None:
            timeout = f.cue_timeout * (len(f.commands) + 1)
        f.join(timeout)
        if f.is_alive():
            f.stop.set()
            f.join(5)
            f.report.timed_out = True
            f.report.error = f.report.error or f"feeder still running after {timeout} s"
        self._feeder = None
        return f.report

    def fed(self, timeout=30):
        """Waits for the feed to end and asserts that every scan went on its
        cue; -> the FeedReport."""
        report = self.feed_wait(timeout=timeout)
        assert report.ok, report
        return report

    def drop_feed(self):
        """After a test: ends a feed that a test failing half-way left
        running (none running is fine)."""
        try:
            self.feed_wait(timeout=1)
        except RigError:
            pass

    def fprintd_log_text(self):
        try:
            with open(self.fprintd_log) as f:
                return f.read()
        except OSError:
            return ""


def synthetic_finger(seed, width=320, height=360, period=9.0, points=40):
    """A synthetic fingerprint image: ridges around a core, bent by `points`
    singular points placed by `seed`. Two seeds give two different fingers
    that libfprint's matcher tells apart; the same seed always the same one."""
    rnd = random.Random(seed)
    cx, cy = width / 2 + rnd.uniform(-20, 20), height / 2 + rnd.uniform(-20, 20)
    singular = [(rnd.uniform(30, width - 30), rnd.uniform(30, height - 30), rnd.choice((-1, 1))) for _ in range(points)]
    pixels = bytearray(width * height)
    for y in range(height):
        for x in range(width):
            phase = 2 * math.pi * math.hypot(x - cx, (y - cy) * 0.8) / period
            for px, py, sign in singular:
                phase += sign * math.atan2(y - py, x - px)
            value = math.cos(phase)
            pixels[y * width + x] = 255 if value > 0.2 else (0 if value < -0.2 else int(127 + 300 * value))
    return width, height, bytes(pixels)


class BusMonitor:
    """dbus-monitor on the rig's bus: fprintd's device signals and every
    call to the device, in the order the bus routed them."""

    def __init__(self, rig):
        rules = [f"type='signal',interface='{DEVICE_IFACE}'", f"type='method_call',interface='{DEVICE_IFACE}'"]
        # Unbuffered: select() sees only what no reader buffer took yet.
        self.proc = subprocess.Popen(DIE_WITH_TESTS + ["dbus-monitor", "--address", rig.bus_address] + rules, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        self.lines = []
        self.partial = b""
        self.wait_for("NameAcquired", interface=False)

    def _read_until(self, predicate, timeout=20):
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            assert left > 0, f"dbus-monitor never showed it: {self.lines}"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "dbus-monitor ended"
                *complete, self.partial = (self.partial + chunk).split(b"\n")
                self.lines += [line.decode(errors="replace") + "\n" for line in complete]

    def wait_for(self, member, interface=True):
        self._read_until(lambda: any(f"member={member}" in line for line in self.lines))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.close()

    def close(self):
        """Stops the monitor. -> [(member, first string argument or None)]"""
        self.proc.terminate()
        rest, _ = self.proc.communicate(timeout=10)
        self.lines += (self.partial + rest).decode(errors="replace").splitlines(keepends=True)
        self.partial = b""
        events = []
        for index, line in enumerate(self.lines):
            if f"interface={DEVICE_IFACE}" in line and "member=" in line:
                member = line.rsplit("member=", 1)[1].strip()
                following = self.lines[index + 1].strip() if index + 1 < len(self.lines) else ""
                argument = following.split('"')[1] if following.startswith("string \"") else None
                events.append((member, argument))
        return events
