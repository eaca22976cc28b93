"""The fprintd rig itself (tests/support/fprint_rig.py), driven by a python3-dbus client;
no PAM module involved. Run: /usr/bin/python3 -m pytest -q -s tests/module/test_fprint_rig.py
(-s prints the measured rig start time and Claim->match latency)."""
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

dbus = pytest.importorskip("dbus")
import dbus.mainloop.glib  # noqa: E402
from gi.repository import GLib  # noqa: E402

from fprint_rig import (  # noqa: E402
    DEVICE_IFACE, ERR_ALREADY_IN_USE, ERR_CLAIM_DEVICE, ERR_INTERNAL, ERR_NO_ACTION, ERR_NO_ENROLLED,
    ERR_NO_SUCH_DEVICE, FPRINT_NAME, FPRINT_ROOT, MANAGER_IFACE, MANAGER_PATH, PY3, proc_gone, pump_context)
from worlds import shared_rig  # noqa: E402

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)

ERR_SERVICE_UNKNOWN = "org.freedesktop.DBus.Error.ServiceUnknown"  # a call to fprintd while it is not running


def pump(pred, timeout):
    """Run the default GLib main context (dbus-python's signals) until pred()."""
    return pump_context(GLib.MainContext.default(), pred, timeout)


class Client:
    """A python3-dbus fprintd client like the module's: one private connection."""

    def __init__(self, rig):
        self.bus = dbus.bus.BusConnection(rig.bus_address)
        self.events = []  # (monotonic, member, args)
        self.bus.add_signal_receiver(self._on_signal, bus_name=FPRINT_NAME, dbus_interface=DEVICE_IFACE,
                                     member_keyword="member")
        self.bus.add_signal_receiver(self._on_signal, bus_name="org.freedesktop.DBus",
                                     signal_name="NameOwnerChanged", arg0=FPRINT_NAME, member_keyword="member")
        self.bus.add_signal_receiver(self._on_signal, dbus_interface="org.freedesktop.DBus.ObjectManager",
                                     path=FPRINT_ROOT, member_keyword="member")

    def _on_signal(self, *args, member=None):
        self.events.append((time.monotonic(), member, tuple(args)))

    def manager(self):
        return dbus.Interface(self.bus.get_object(FPRINT_NAME, MANAGER_PATH), MANAGER_IFACE)

    def device(self):
        path = self.manager().GetDefaultDevice()
        return dbus.Interface(self.bus.get_object(FPRINT_NAME, path), DEVICE_IFACE)

    def statuses(self):
        return [(str(a[0]), bool(a[1])) for _, m, a in self.events if m == "VerifyStatus"]

    def wait_done(self, timeout=5.0):
        """Wait for VerifyStatus(done=true); -> all VerifyStatus so far."""
        assert pump(lambda: any(done for _, done in self.statuses()), timeout), self.events
        return self.statuses()

    def close(self):
        self.bus.close()


def error_name(excinfo):
    return excinfo.value.get_dbus_name()


rig = shared_rig(scope="function")


@pytest.fixture
def enrolled(rig):
    rig.enroll("alice")
    return rig


@pytest.fixture
def client(rig):
    c = Client(rig)
    yield c
    c.close()


def verify_once(client, rig, commands, user="alice"):
    dev = client.device()
    dev.Claim(user)
    rig.feed(commands)
    dev.VerifyStart("any")
    statuses = client.wait_done()
    dev.VerifyStop()
    dev.Release()
    report = rig.feed_wait()
    return statuses, report


def test_rig_starts_and_enrolls(rig, client):
    print(f"\n[fprint rig] start (dbus-daemon+polkit mock+fprintd ready): {rig.start_seconds * 1000:.0f} ms")
    assert rig.bus_address == f"unix:path={rig.socket_path}"
    assert rig.env() == {"DBUS_SYSTEM_BUS_ADDRESS": rig.bus_address}
    assert list(client.manager().GetDevices()) == ["/net/reactivated/Fprint/Device/0"]
    assert client.device().Get(DEVICE_IFACE, "name", dbus_interface="org.freedesktop.DBus.Properties") \
        == "Virtual device for debugging"
    assert rig.list_enrolled("alice") == []
    rig.enroll("alice")
    rig.enroll("bob")
    assert rig.list_enrolled("alice") == ["right-index-finger"]
    assert rig.list_enrolled("bob") == ["right-index-finger"]
    assert rig.list_enrolled("carol") == []
    rig.enroll("alice")  # idempotent: replaces alice's print
    assert rig.list_enrolled("alice") == ["right-index-finger"]
    # an unenrolled user's ListEnrolledFingers is an error, not an empty list
    with pytest.raises(dbus.DBusException) as e:
        client.device().ListEnrolledFingers("carol")
    assert error_name(e) == ERR_NO_ENROLLED


def test_verify_match(enrolled, client):
    statuses, report = verify_once(client, enrolled, ["SCAN finger-alice"])
    assert statuses == [("verify-match", True)]
    assert report.ok, report
    assert report.sent[0][:2] == ("SCAN finger-alice", "VerifyFingerSelected#1")
    # the client saw VerifyFingerSelected before VerifyStatus
    members = [m for _, m, _ in client.events if m in ("VerifyFingerSelected", "VerifyStatus")]
    assert members == ["VerifyFingerSelected", "VerifyStatus"]


def test_verify_no_match(enrolled, client):
    statuses, report = verify_once(client, enrolled, ["SCAN wrong"])
    assert statuses == [("verify-no-match", True)]
    assert report.ok, report


def test_other_users_print_does_not_match(enrolled, client):
    enrolled.enroll("bob")
    statuses, report = verify_once(client, enrolled, ["SCAN finger-alice"], user="bob")
    assert statuses == [("verify-no-match", True)]
    assert report.ok


def test_retry_then_match(enrolled, client):
    statuses, report = verify_once(client, enrolled, ["RETRY 0", "SCAN finger-alice"])
    assert statuses == [("verify-retry-scan", False), ("verify-match", True)]
    assert report.ok, report
    assert [cue for _, cue, _ in report.sent] == ["VerifyFingerSelected#1", "retry-status"]
    # one attempt: a retry hint brings no new VerifyFingerSelected
    assert [m for _, m, _ in client.events].count("VerifyFingerSelected") == 1


def test_all_retry_hints(enrolled, client):
    statuses, report = verify_once(client, enrolled, ["RETRY 1", "RETRY 2", "RETRY 3", "SCAN wrong"])
    assert statuses == [("verify-swipe-too-short", False), ("verify-finger-not-centered", False),
                        ("verify-remove-and-retry", False), ("verify-no-match", True)]
    assert report.ok, report


def test_error5_is_disconnected_and_error0_unknown(enrolled, client):
    statuses, report = verify_once(client, enrolled, ["ERROR 5"])
    assert statuses == [("verify-disconnected", True)]
    assert report.ok
    client.events.clear()
    statuses, report = verify_once(client, enrolled, ["ERROR 0"])
    assert statuses == [("verify-unknown-error", True)]
    # the device still works afterwards
    client.events.clear()
    statuses, _ = verify_once(client, enrolled, ["SCAN finger-alice"])
    assert statuses == [("verify-match", True)]


def test_attempts_in_one_claim(enrolled, client):
    """Feeder cues count VerifyFingerSelected: one attempt command per VerifyStart."""
    dev = client.device()
    dev.Claim("alice")
    enrolled.feed(["SCAN wrong", "SLEEP 200", "SCAN finger-alice"])
    dev.VerifyStart("any")
    assert client.wait_done() == [("verify-no-match", True)]
    # done=true does not end the verify in fprintd: VerifyStop is required
    with pytest.raises(dbus.DBusException) as e:
        dev.VerifyStart("any")
    assert error_name(e) == ERR_ALREADY_IN_USE  # "Verification already in progress"
    dev.VerifyStop()
    client.events.clear()
    t0 = time.monotonic()
    dev.VerifyStart("any")
    assert client.wait_done() == [("verify-match", True)]
    assert time.monotonic() - t0 >= 0.19  # SLEEP 200 delayed the scan
    dev.VerifyStop()
    dev.Release()
    report = enrolled.feed_wait()
    assert report.ok, report
    assert [(c, cue) for c, cue, _ in report.sent] == [
        ("SCAN wrong", "VerifyFingerSelected#1"), ("SLEEP 200", "VerifyFingerSelected#2"),
        ("SCAN finger-alice", "VerifyFingerSelected#2")]


def test_client_in_another_process(enrolled):
    """The way PAM tests use it: the feeder cues on a client it does not own."""
    script = textwrap.dedent(f"""
        import dbus, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.bus.BusConnection({enrolled.bus_address!r})
        loop = GLib.MainLoop()
        out = []
        def st(result, done):
            out.append(str(result))
            if done: loop.quit()
        bus.add_signal_receiver(st, "VerifyStatus", {DEVICE_IFACE!r}, {FPRINT_NAME!r})
        mgr = bus.get_object({FPRINT_NAME!r}, {MANAGER_PATH!r})
        dev = dbus.Interface(bus.get_object({FPRINT_NAME!r}, mgr.GetDefaultDevice(dbus_interface={MANAGER_IFACE!r})),
                             {DEVICE_IFACE!r})
        dev.Claim("alice")
        for attempt in range(2):
            dev.VerifyStart("any")
            GLib.timeout_add(5000, loop.quit)
            loop.run()
            dev.VerifyStop()
        dev.Release()
        print(" ".join(out))
    """)
    enrolled.feed(["SCAN wrong", "RETRY 2", "SCAN finger-alice"])
    proc = subprocess.run([PY3, "-c", script], capture_output=True, text=True, timeout=20, env=enrolled.env(
        {"PATH": "/usr/bin:/bin"}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["verify-no-match", "verify-finger-not-centered", "verify-match"]
    report = enrolled.feed_wait()
    assert report.ok, report
    assert [cue for _, cue, _ in report.sent] == ["VerifyFingerSelected#1", "VerifyFingerSelected#2",
                                                  "retry-status"]


def test_verify_stop_and_release_mid_verify_report_no_match(enrolled, client):
    """fprintd 1.94.2 reports a cancelled verify as verify-no-match done=true."""
    dev = client.device()
    dev.Claim("alice")
    dev.VerifyStart("any")
    assert pump(lambda: any(m == "VerifyFingerSelected" for _, m, _ in client.events), 5)
    dev.VerifyStop()
    assert client.wait_done() == [("verify-no-match", True)]
    with pytest.raises(dbus.DBusException) as e:
        dev.VerifyStop()
    assert error_name(e) == ERR_NO_ACTION
    client.events.clear()
    dev.VerifyStart("any")
    dev.Release()  # without VerifyStop: allowed, and the same no-match follows
    assert client.wait_done() == [("verify-no-match", True)]
    with pytest.raises(dbus.DBusException) as e:
        dev.Release()
    assert error_name(e) == ERR_CLAIM_DEVICE


def test_unplug(enrolled, client):
    dev = client.device()
    dev.Claim("alice")
    enrolled.feed(["UNPLUG"])
    dev.VerifyStart("any")
    assert enrolled.feed_wait().ok
    t_sent = time.monotonic()
    # no VerifyStatus at once: verify-unknown-error about 0.5 s later
    statuses = client.wait_done()
    delay = time.monotonic() - t_sent
    print(f"\n[fprint rig] UNPLUG -> {statuses} after {delay * 1000:.0f} ms")
    assert statuses == [("verify-unknown-error", True)]
    dev.VerifyStop()
    with pytest.raises(dbus.DBusException) as e:
        dev.Release()
    assert error_name(e) == ERR_INTERNAL  # "Release failed with error: This device has been removed..."
    assert pump(lambda: any(m == "InterfacesRemoved" for _, m, _ in client.events), 5)
    assert list(client.manager().GetDevices()) == []
    with pytest.raises(dbus.DBusException) as e:
        client.manager().GetDefaultDevice()
    assert error_name(e) == ERR_NO_SUCH_DEVICE


def test_restart_keeps_enrollment(enrolled, client):
    old = enrolled.fprintd_pid
    enrolled.restart_fprintd()
    assert enrolled.fprintd_pid != old and proc_gone(old)
    assert enrolled.list_enrolled("alice") == ["right-index-finger"]
    statuses, report = verify_once(client, enrolled, ["SCAN finger-alice"])
    assert statuses == [("verify-match", True)]
    assert report.ok


def test_stop_fprintd(enrolled, client):
    dev = client.device()
    pid = enrolled.fprintd_pid
    enrolled.stop_fprintd()
    assert proc_gone(pid)
    assert not client.bus.name_has_owner(FPRINT_NAME)
    assert pump(lambda: any(m == "NameOwnerChanged" and a[2] == "" for _, m, a in client.events), 5)
    with pytest.raises(dbus.DBusException) as e:
        dev.Claim("alice")
    assert error_name(e) == ERR_SERVICE_UNKNOWN
    enrolled.start_fprintd()
    assert enrolled.list_enrolled("alice") == ["right-index-finger"]


def test_claim_elsewhere(enrolled, client):
    enrolled.claim_elsewhere("alice")
    dev = client.device()
    with pytest.raises(dbus.DBusException) as e:
        dev.Claim("alice")
    # observed: net.reactivated.Fprint.Error.AlreadyInUse "Device was already claimed"
    assert error_name(e) == ERR_ALREADY_IN_USE
    assert "already claimed" in e.value.get_dbus_message()
    enrolled.release_elsewhere()
    statuses, _ = verify_once(client, enrolled, ["SCAN finger-alice"])
    assert statuses == [("verify-match", True)]
    # a claimer that just disconnects loses its claim too
    enrolled.claim_elsewhere("bob")
    enrolled.release_elsewhere(disconnect_only=True)
    assert pump(lambda: _claim_ok(dev), 5)


def _claim_ok(dev):
    try:
        dev.Claim("alice")
    except dbus.DBusException:
        return False
    dev.Release()
    return True


def test_scan_before_verify_start_is_consumed_at_once(enrolled, client):
    """Why the feeder waits for VerifyFingerSelected: a scan sent after Claim but
    before VerifyStart is queued by the driver and reported immediately."""
    dev = client.device()
    dev.Claim("alice")
    enrolled.feed(["SCAN finger-alice"], on_cue=False)
    assert enrolled.feed_wait().ok
    dev.VerifyStart("any")
    assert client.wait_done() == [("verify-match", True)]
    pump(lambda: any(m == "VerifyFingerSelected" for _, m, _ in client.events), 2)
    members = [m for _, m, _ in client.events if m in ("VerifyFingerSelected", "VerifyStatus")]
    assert members == ["VerifyStatus", "VerifyFingerSelected"]  # status first!
    dev.VerifyStop()
    dev.Release()


def test_feed_times_out_bounded(enrolled):
    enrolled.feed(["SCAN finger-alice"], cue_timeout=0.3)  # nobody calls VerifyStart
    t0 = time.monotonic()
    report = enrolled.feed_wait()
    assert time.monotonic() - t0 < 2
    assert report.timed_out and not report.ok and report.sent == []
    assert "VerifyFingerSelected" in report.error


def test_claim_to_match_latency(enrolled, client):
    dev = client.device()
    samples = []
    for _ in range(10):
        client.events.clear()
        enrolled.feed(["SCAN finger-alice"])
        t0 = time.monotonic()
        dev.Claim("alice")
        dev.VerifyStart("any")
        assert pump(lambda: client.statuses(), 5)
        t1 = client.events[-1][0]
        assert client.statuses() == [("verify-match", True)]
        samples.append(t1 - t0)
        dev.VerifyStop()
        dev.Release()
        assert enrolled.feed_wait().ok
    med = statistics.median(samples)
    print(f"\n[fprint rig] Claim->verify-match: median {med * 1000:.1f} ms "
          f"(min {min(samples) * 1000:.1f}, max {max(samples) * 1000:.1f}, n=10)")
    assert med < 1.0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s"]))
