"""logind for the tests: python-dbusmock's logind template on the rig's
private system bus, and sessions as sd-login finds them (a cgroup named
session-ID.scope, which a process enters by writing its pid).

    with LogindMock(rig) as logind:
        session = logind.add_session("c7", uid=1001, name="alice")
        logind.set_locked("c7", True); logind.set_lid(True)
        pam.run(..., preexec_fn=session.enter)
"""
import os
import subprocess
import sys
import time
from pathlib import Path

from gi.repository import GLib

from fprint_rig import DIE_WITH_TESTS, _Client, stop_process

CGROUP_ROOT = Path("/sys/fs/cgroup/unified")
LOGIND = "org.freedesktop.login1"
MANAGER_PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
MOCK = "org.freedesktop.DBus.Mock"
PROPERTIES = "org.freedesktop.DBus.Properties"


class Session:
    """A logind session as sd-login sees it: a cgroup named session-NAME.scope
    (the unified hierarchy, or cgroup2 at the root)."""

    def __init__(self, name):
        self.name = name
        self.path = CGROUP_ROOT / "localauth-test.slice" / f"session-{name}.scope"

    @staticmethod
    def available():
        return (CGROUP_ROOT / "cgroup.procs").exists()

    def create(self):
        self.path.mkdir(parents=True, exist_ok=True)

    def enter(self):
        """Moves the calling process (e.g. from preexec_fn: the child) into it."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def prefix(self):
        """A command prefix that runs the command inside the session."""
        return ["/bin/sh", "-c", f'echo $$ > "{self.path}/cgroup.procs" && exec "$@"', "sh"]

    def remove(self):
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)      # its last process is still exiting
        try:
            self.path.parent.rmdir()
        except OSError:
            pass


class UserManagerPlace(Session):
    """Where systemd's user manager of `uid` runs a unit (user@UID.service,
    below the user-UID.slice root makes): GNOME's and Plasma's default
    sessions run the desktop's terminals, apps and polkit agents there, in
    no login session. A process enters it as it enters a session."""

    def __init__(self, uid):
        self.name = f"user@{uid}"
        self.path = CGROUP_ROOT / "localauth-test.slice" / f"user-{uid}.slice" / f"user@{uid}.service" / "app.slice" / "localauth-test.scope"

    def remove(self):
        super().remove()
        for parent in list(self.path.parents)[:3]:   # app.slice, user@UID.service, user-UID.slice
            try:
                parent.rmdir()
            except OSError:
                pass


class LogindMock:
    def __init__(self, rig):
        self.rig = rig
        self.proc = None
        self.client = None
        self.sessions = []

    def __enter__(self):
        log = open(os.path.join(self.rig.dir, "logind-mock.log"), "w")
        self.proc = subprocess.Popen(DIE_WITH_TESTS + [sys.executable, "-m", "dbusmock", "--system", "--template", "logind"],
                                     env=self.rig.env(os.environ), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.client = _Client(self.rig.bus_address)
        deadline = time.monotonic() + 15
        while not self.client.has_owner(LOGIND):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the logind mock did not start")
            time.sleep(0.05)
        self.client.call(LOGIND, MANAGER_PATH, MOCK, "AddProperty",
                         GLib.Variant("(ssv)", (MANAGER, "LidClosed", GLib.Variant("b", False))))
        return self

    def __exit__(self, *exc):
        for session in self.sessions:
            session.remove()
        if self.client:
            self.client.close()
        if self.proc:
            stop_process(self.proc)
        return False

    def add_session(self, session_id, uid, name, active=True, seat="seat0"):
        self.client.call(LOGIND, MANAGER_PATH, MOCK, "AddSession",
                         GLib.Variant("(ssusb)", (session_id, seat, uid, name, active)))
        session = Session(session_id)
        session.create()
        self.sessions.append(session)
        return session

    def add_user_manager(self, uid):
        """A place in `uid`'s user manager, as sd-login finds it."""
        place = UserManagerPlace(uid)
        place.create()
        self.sessions.append(place)
        return place

    def _set(self, path, interface, name, value):
        self.client.call(LOGIND, path, PROPERTIES, "Set", GLib.Variant("(ssv)", (interface, name, value)))

    def set_locked(self, session_id, locked):
        self._set(f"{MANAGER_PATH}/session/{session_id}", "org.freedesktop.login1.Session", "LockedHint",
                  GLib.Variant("b", locked))

    def set_active(self, session_id, active):
        self._set(f"{MANAGER_PATH}/session/{session_id}", "org.freedesktop.login1.Session", "Active",
                  GLib.Variant("b", active))

    def set_remote(self, session_id, remote):
        self._set(f"{MANAGER_PATH}/session/{session_id}", "org.freedesktop.login1.Session", "Remote",
                  GLib.Variant("b", remote))

    def set_lid(self, closed):
        self._set(MANAGER_PATH, MANAGER, "LidClosed", GLib.Variant("b", closed))
