"""A private machine inside a mount namespace, for the tests that run the
setuid helper and programs as an unprivileged user.

Every command runs as
    unshare --mount  /bin/sh enter.sh  [setpriv --reuid=U --regid=U --init-groups --]  <program ...>
where enter.sh makes / rprivate and binds private copies over /etc/pam.d,
/etc/passwd, /etc/group, /etc/shadow and /etc/security (with the test's
localauth.conf), the rig's directory over /run/dbus (so
/run/dbus/system_bus_socket is the rig's bus: the helper ignores the
environment), and mounts a read-only overlay on /usr/libexec that adds
localauth/localauth-helper: the built helper, owned by root, mode 4755.
/dev is a private tmpfs holding the host's usual devices and a /dev/log
that is this world's own syslog socket, so the tests read what the helper
and the module tell the administrator. The host's files are never changed.
"""
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from pamenv import (BUILD, HELPER_PATH, MODULE, ROOT, SeededState, parse_record, password_entered, read_only_state,
                    runtime_dir)

HELPER = BUILD / "localauth-helper"
SHIPPED = ROOT / "pam.d"


def openssl_hash(password):
    return subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password, capture_output=True, text=True,
                          check=True).stdout.strip()


# What a program in the world finds in /dev (bound from the host's /dev).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx", "console")
DEVICE_DIRECTORIES = ("pts", "shm")
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                "stderr": "/proc/self/fd/2"}


class SystemLog:
    """A datagram socket that takes the place of /dev/log; every line the
    world's programs send to syslog lands in `lines` (read by a thread, so a
    sender never blocks on a full socket)."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o666)
        self.sock.settimeout(0.2)
        self.lines = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while self.running:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.lines.append(data.decode("utf-8", "replace"))

    def mark(self):
        with self.lock:
            return len(self.lines)

    def since(self, mark=0):
        with self.lock:
            return list(self.lines[mark:])

    STOP_DELAY = re.compile(r"it stays counted \(the stop followed the probe after (\d+) us\)")

    def charged_only_by_the_stops_delay(self, mark, timeout=5.0):
        """Whether the attempts kept charged since `mark` were kept, each one,
        only because the stop left more than 1 ms after the probe (the one
        denial that load causes), as the log says."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            gaps = [int(m.group(1)) for line in self.since(mark) for m in [self.STOP_DELAY.search(line)] if m]
            if gaps:
                return all(gap > 1000 for gap in gaps)
            time.sleep(0.02)
        return False

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


class PrivateWorld(SeededState):
    """users: {name: (uid, password)}. config: lines of localauth.conf
    (state_dir is always this world's)."""

    def __init__(self, base: Path, rig=None, users=None, config=(), helper=HELPER, helper_mode=0o4755, etc_files=None,
                 sessions=False):
        self.base = base
        self.rig = rig
        self.users = dict(users or {})
        self.state = base / "state"
        self.state.mkdir(mode=0o700)
        os.chmod(self.state, 0o700)
        self.pamd = base / "pam.d"
        self.pamd.mkdir()
        shutil.copy(SHIPPED / "localauth-passcode", self.pamd / "localauth-passcode")
        for entry in Path("/etc/pam.d").iterdir():
            if entry.name.startswith("common-") or entry.name == "other":
                shutil.copy(entry, self.pamd / entry.name)
        self.security = base / "security"
        shutil.copytree("/etc/security", self.security, symlinks=True)
        os.chmod(self.security, 0o755)
        self.config_path = self.security / "localauth.conf"
        self.write_config(config)

        etc = base / "etc"
        etc.mkdir()
        self.passwd, self.group, self.shadow = (etc / n for n in ("passwd", "group", "shadow"))
        home = base / "home"
        home.mkdir(mode=0o755)
        self.home = home
        self.passwd.write_text(Path("/etc/passwd").read_text()
                               + "".join(f"{n}:x:{u}:{u}:{n}:{home}:/bin/sh\n" for n, (u, _) in self.users.items()))
        self.group.write_text(Path("/etc/group").read_text() + "".join(f"{n}:x:{u}:\n" for n, (u, _) in self.users.items()))
        self.shadow.write_text("".join(f"{line.split(':', 1)[0]}:*:19700:0:99999:7:::\n"
                                       for line in Path("/etc/passwd").read_text().splitlines() if line)
                               + "".join(f"{n}:{openssl_hash(p)}:19700:0:99999:7:::\n" for n, (_, p) in self.users.items()))
        shutil.copymode("/etc/shadow", self.shadow)
        os.chown(self.shadow, 0, os.stat("/etc/shadow").st_gid)

        # The helper, setuid root, in an overlay over /usr/libexec.
        self.libexec_upper = base / "libexec-upper"
        (self.libexec_upper / "localauth").mkdir(parents=True)
        os.chmod(self.libexec_upper, 0o755)
        os.chmod(self.libexec_upper / "localauth", 0o755)
        self.helper = self.libexec_upper / "localauth" / "localauth-helper"
        if helper is not None:
            self.install_helper(helper, helper_mode)

        binds = [(self.pamd, "/etc/pam.d"), (self.passwd, "/etc/passwd"), (self.group, "/etc/group"),
                 (self.shadow, "/etc/shadow"), (self.security, "/etc/security")]
        if rig is not None:
            binds.append((rig.dir, "/run/dbus"))
        # sd-login's session and user files (sessions=True): directories of
        # this world's over /run/systemd/sessions and /run/systemd/users,
        # for add_session and add_display.
        self.sessions = self.user_files = None
        if sessions:
            self.sessions = base / "sessions"
            self.sessions.mkdir(mode=0o755)
            binds.append((self.sessions, "/run/systemd/sessions"))
            self.user_files = base / "users"
            self.user_files.mkdir(mode=0o755)
            binds.append((self.user_files, "/run/systemd/users"))
        self.syslog = SystemLog(base / "log.sock")
        host_dev = base / "host-dev"
        host_dev.mkdir()
        dev = [f"mount --rbind /dev '{host_dev}'", "mount -t tmpfs -o mode=755,size=1m localauth-dev /dev"]
        dev += [f"touch /dev/{d} && mount --bind '{host_dev}/{d}' /dev/{d}" for d in DEVICES]
        dev += [f"mkdir /dev/{d} && mount --rbind '{host_dev}/{d}' /dev/{d}" for d in DEVICE_DIRECTORIES]
        dev += [f"ln -s {target} /dev/{name}" for name, target in DEVICE_LINKS.items()]
        dev += [f"touch /dev/log && mount --bind '{self.syslog.path}' /dev/log"]
        # Files added to /etc ({name: text}, root's, 0644) through a
        # read-only overlay under the binds (a program's own configuration,
        # such as doas.conf, which the host may not have).
        etc_overlay = ""
        if etc_files:
            etc_upper = base / "etc-upper"
            etc_upper.mkdir(mode=0o755)
            for name, text in etc_files.items():
                (etc_upper / name).write_text(text)
                os.chmod(etc_upper / name, 0o644)
            etc_overlay = f"mount -t overlay overlay -o lowerdir={etc_upper}:/etc /etc\n"
        self.enter = base / "enter.sh"
        self.enter.write_text("set -e\nmount --make-rprivate /\n" + etc_overlay
                              + "".join(f"mount --bind '{src}' '{dst}'\n" for src, dst in binds)
                              # read-only: no work directory, so namespaces may mount it at once
                              + f"mount -t overlay overlay -o lowerdir={self.libexec_upper}:/usr/libexec /usr/libexec\n"
                              + "".join(line + "\n" for line in dev)
                              + 'exec "$@"\n')

    read_only_state = False

    def add_session(self, name, uid, user):
        """sd-login's file of a local, active graphical session `name` on
        seat0 (the world was made with sessions=True); its processes are
        those of the cgroup session-NAME.scope (tests/support/logind_mock.py)."""
        (self.sessions / name).write_text(f"UID={uid}\nUSER={user}\nACTIVE=1\nSTATE=active\nREMOTE=0\nTYPE=x11\n"
                                          f"CLASS=user\nSEAT=seat0\nSCOPE=session-{name}.scope\n")

    def add_display(self, uid, name):
        """sd-login's file of user `uid` whose display session is `name`
        (added with add_session): what polkitd takes a process of the
        user's manager, in no session, to belong to."""
        (self.user_files / str(uid)).write_text(f"NAME=u{uid}\nSTATE=active\nDISPLAY={name}\nSESSIONS={name}\n"
                                           f"ACTIVE_SESSIONS={name}\nONLINE_SESSIONS={name}\n")

    def close(self):
        self.syslog.close()

    def install_helper(self, source, mode=0o4755):
        if self.helper.exists():
            self.helper.unlink()
        shutil.copy(source, self.helper)
        os.chown(self.helper, 0, 0)
        os.chmod(self.helper, mode)

    def write_config(self, lines):
        """The world's configuration: its state directory, no TPM (a machine
        that has one must not lend it to the tests: the TPM's own tests name
        a software one, whose line comes later and wins), then `lines`."""
        self.config_path.write_text("\n".join([f"state_dir = {self.state}", "tpm = off"] + list(lines)) + "\n")
        os.chmod(self.config_path, 0o644)

    def module_line(self, control="[success=2 ignore=ignore authinfo_unavail=ignore default=die]", args=""):
        return f"auth {control} {MODULE} {args}".rstrip()

    def write_service(self, name, lines):
        (self.pamd / name).write_text("\n".join(lines) + "\n")

    def write_profile_common_auth(self):
        """common-auth as pam-auth-update writes it from the package's
        profile (tests/package/test_install.py runs the real pam-auth-update on it):
        the module first, jumping past pam_unix on success."""
        self.write_service("common-auth", [
            f"auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] {MODULE}",
            "auth [success=1 default=ignore] pam_unix.so nullok", "auth requisite pam_deny.so", "auth required pam_permit.so"])

    def write_locker_stack(self, name, args=""):
        """The shipped owner pattern: our line, then pam_unix, then deny."""
        self.write_service(name, [self.module_line(args=args), "auth [success=1 default=ignore] pam_unix.so",
                                  "auth requisite pam_deny.so", "auth required pam_permit.so",
                                  "account required pam_permit.so"])

    def argv(self, *command, uid=None):
        """The command inside the private namespace, as `uid` (None: root).
        With `read_only_state` set, the state directory is a filesystem of
        its own there, with the state in it, mounted read-only, as a disk
        that went read-only leaves it."""
        prefix = ["unshare", "--mount", "/bin/sh", str(self.enter)]
        if self.read_only_state:
            prefix += ["/bin/sh", "-ec", read_only_state(self.state) + '; exec "$@"', "sh"]
        if uid is not None:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups", "--"]
        return prefix + [str(c) for c in command]

    def env(self, user=None):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C", "HOME": str(self.home)}
        if user:
            env.update(USER=user, LOGNAME=user)
        return env

    def record(self, uid):
        path = self.state / f"{uid}.rec"
        return parse_record(path.read_bytes(), uid) if path.exists() else None

    def counts(self, uid):
        """(F, P) on disk; (0, 0) when no record exists."""
        rec = self.record(uid)
        return (rec.F, rec.P) if rec else (0, 0)

    def runtime_counts(self, uid):
        """(F, P) in this world's /run/localauth (counting while the state
        directory is read-only); None when it holds no record."""
        path = runtime_dir(self.state) / f"{uid}.rec"
        if not path.exists():
            return None
        rec = parse_record(path.read_bytes(), uid)
        return (rec.F, rec.P)

    def state_files(self):
        """The records and their locks (not the helper's slot directory)."""
        return sorted(p.name for p in self.state.iterdir() if p.name != "helpers")

    def password_entered(self, *names):
        """These users (default: all) typed the password once this boot: the
        state from which the finger is enough (pamenv.password_entered)."""
        for name in names or self.users:
            password_entered(self.state, self.users[name][0], name, self.rig.bus_address if self.rig else None)
        self.note_seed()

    def clear_state(self):
        self.seeded = {}
        for p in self.state.iterdir():
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
        shutil.rmtree(runtime_dir(self.state), ignore_errors=True)
