"""End to end: the REAL sudo, su and pamtester (login stack) with pam_localauth.so,
against a real fprintd with libfprint's virtual device (tests/support/fprint_rig.py).
what the user sees (docs/PROGRAMS.md, "In real programs"), the fprintd rig, and the private mount namespace.

The host's /etc is never changed. Every program runs as
    setsid -w -c  unshare --mount  /bin/sh enter.sh  <program ...>
where enter.sh makes / rprivate in the new mount namespace and binds private
copies over /etc/pam.d, /etc/passwd, /etc/shadow, /etc/group, /etc/sudoers,
the rig's directory over /run/dbus (so /run/dbus/system_bus_socket is the
rig's bus: sudo and su are setuid, and sd-bus ignores DBUS_SYSTEM_BUS_ADDRESS
there) and an empty directory over /run/sudo (sudo's timestamps). The
private /etc/pam.d holds the shipped sudo, su, login and localauth-passcode
files with pam_localauth.so replaced by the built module's absolute path plus
state_dir=<test dir> conf=<absent file>, pam_unix kept (a real password
check against the private /etc/shadow), and the host's common-* and other.

Test users: latest (uid 4242, fingerprint enrolled, may run /usr/bin/id as
root through sudo with a password) and other (uid 4243, no fingerprint).

Terminal: a pseudo-terminal made the controlling terminal of a new session
(`setsid -c`); its process group is the foreground one, so writing \\x03 to
the master makes the line discipline send SIGINT, as a typed Ctrl-C does.
No fixed sleeps: every step waits (bounded) for text on the terminal, and the
scans are fed on fprintd's VerifyFingerSelected cue.

Observed (sudo 1.9.13p3, util-linux su, pamtester 0.1.2, Debian 12), each
asserted below as the exact terminal transcript and exit status:
  sudo (terminal mode, PAM_SILENT): fingerprint first, no prompt; misses
    offer "Press Ctrl-C to Enter Password."; the module's prompt is
    "Enter Password: "; sudo's 3 tries give 3, 2, then 0 fingerprint tries
    (locked); Ctrl-C before any failure and an empty password both end sudo
    with "sudo: PAM authentication error: Conversation error" (sudo's words
    for PAM_CONV_ERR that its own conversation did not cause); Ctrl-C at the
    password prompt ends it as without the module ("a password is required").
  sudo -S / -A / no terminal (no person at sudo's terminal): prompt mode
    ("Password, or press Enter to use your fingerprint: "), the piped or
    askpass password checked at once, fprintd never claimed; no terminal and
    no -S: sudo's own "a terminal is required"; sudo -n: the module is never
    asked.
  sudo -i and su - (services sudo-i, su-l): as sudo and su.
  su other: out of scope, byte-for-byte the host stack's behaviour; su self:
    fingerprint first.
  pamtester login: prompt mode unless -I tty=<its terminal> (terminal mode).

Run: /usr/bin/python3 -m pytest -q tests/programs/test_real_programs.py
"""
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import termios
import time
from pathlib import Path

import pytest

from fprint_rig import BusMonitor, FprintRig
from pamenv import MODULE, ROOT, SeededState, parse_record, password_entered
from sentences import (FIRST_PROMPT, LOCKED, NOT_RECOGNIZED as NOT_RECOGNIZED_LAST, NO_MATCH_TOUCH_OR_TYPE as NOT_RECOGNIZED_TRY,
                       PASSCODE_PROMPT, READER_BUSY)
from worlds import shared_rig

USER, UID = "latest", 4242
OTHER, OTHER_UID = "other", 4243
PASSWORD = "latest-pw-1"
OTHER_PASSWORD = "other-pw-2"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"

SHIPPED = ROOT / "pam.d"
# Touch or type: the module reads sudo's terminal while the reader waits.
INSTRUCTION = f"sudo needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader or type your password:"
# Prompt mode (no person at sudo's terminal): Enter first, then the reader.
PROMPT_INSTRUCTION = f"sudo needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader."
SUDO_SORRY = "Sorry, try again."
ID_ROOT = "uid=0(root) gid=0(root) groups=0(root)"  # /usr/bin/id run by sudo
STEP = 15.0     # bound on any single wait for terminal text
RUN = 40.0      # bound on a whole program run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, setuid programs)")


# ---------------------------------------------------------------- the private world

def openssl_hash(password):
    return subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password, capture_output=True, text=True,
                          check=True).stdout.strip()


def stack_with_module(name, state_dir, conf):
    """A shipped pam.d file with pam_localauth.so replaced by the absolute path
    of the built module plus state_dir= and conf= (pam_unix kept)."""
    lines = []
    for line in (SHIPPED / name).read_text().splitlines():
        if not line.startswith("#") and re.search(r"\bpam_localauth\.so\b", line):
            line = re.sub(r"\bpam_localauth\.so\b", f"{MODULE} state_dir={state_dir} conf={conf}", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def host_snapshot():
    """What the tests must never change on the host: the files the namespace
    covers, and the logs su and sudo could write."""
    paths = [Path(p) for p in ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/sudoers", "/var/log/btmp",
                               "/var/log/wtmp")]
    paths += sorted(Path("/etc/pam.d").iterdir())
    snap = {str(p): (p.read_bytes() if p.is_file() else None) for p in paths}
    snap["/run/sudo"] = sorted(os.listdir("/run/sudo")) if os.path.isdir("/run/sudo") else None
    snap["/etc/pam.d (names)"] = sorted(os.listdir("/etc/pam.d"))
    return snap


class World(SeededState):
    """Private copies of what the programs read, and the script that binds them
    over the real paths inside a new mount namespace."""

    def __init__(self, base: Path, rig: FprintRig):
        self.base = base
        self.rig = rig
        self.state = base / "state"
        self.state.mkdir(mode=0o700)
        os.chmod(self.state, 0o700)
        self.pamd = base / "pam.d"
        self.pamd.mkdir()
        conf = base / "localauth.conf"  # never written: no host configuration leaks in
        for name in ("sudo", "su", "login"):
            (self.pamd / name).write_text(stack_with_module(name, self.state, conf))
        # `sudo -i` and `su -`: Debian's sudo-i includes common-auth, where the
        # pam-auth-update profile puts the module; here it is sudo's stack.
        # Debian's su-l is su's.
        (self.pamd / "sudo-i").write_text(stack_with_module("sudo", self.state, conf))
        (self.pamd / "su-l").write_text("auth include su\naccount include su\npassword include su\nsession include su\n")
        shutil.copy(SHIPPED / "localauth-passcode", self.pamd / "localauth-passcode")
        for entry in Path("/etc/pam.d").iterdir():
            if entry.name.startswith("common-") or entry.name == "other":
                shutil.copy(entry, self.pamd / entry.name)

        etc = base / "etc"
        etc.mkdir()
        self.passwd, self.group, self.shadow, self.sudoers = (etc / n for n in ("passwd", "group", "shadow", "sudoers"))
        self.passwd.write_text(Path("/etc/passwd").read_text()
                               + f"{USER}:x:{UID}:{UID}:Latest:/nonexistent:/bin/sh\n"
                               + f"{OTHER}:x:{OTHER_UID}:{OTHER_UID}:Other:/nonexistent:/bin/sh\n")
        self.group.write_text(Path("/etc/group").read_text() + f"{USER}:x:{UID}:\n{OTHER}:x:{OTHER_UID}:\n")
        # every host account locked ("*"): the host's password hashes are not copied
        self.shadow.write_text("".join(f"{line.split(':', 1)[0]}:*:19700:0:99999:7:::\n"
                                       for line in Path("/etc/passwd").read_text().splitlines() if line)
                               + f"{USER}:{openssl_hash(PASSWORD)}:19700:0:99999:7:::\n"
                               + f"{OTHER}:{openssl_hash(OTHER_PASSWORD)}:19700:0:99999:7:::\n")
        shutil.copymode("/etc/shadow", self.shadow)
        st = os.stat("/etc/shadow")
        os.chown(self.shadow, 0, st.st_gid)
        self.sudoers.write_text(
            "Defaults env_reset\n"
            "Defaults !fqdn\n"
            "Defaults !lecture\n"
            "Defaults !mail_badpass\n"
            "Defaults timestamp_timeout=0\n"
            "Defaults passwd_tries=3\n"
            'Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n'
            "root ALL=(ALL:ALL) ALL\n"
            f"{USER} ALL=(root) /usr/bin/id\n"
            f"{USER} ALL=(root) /bin/bash -c /usr/bin/id\n"   # sudo -i /usr/bin/id, through root's shell
            f"{OTHER} ALL=(root) /usr/bin/id\n")
        os.chmod(self.sudoers, 0o440)
        self.run_sudo = base / "run-sudo"
        self.run_sudo.mkdir(mode=0o711)

        binds = [(self.pamd, "/etc/pam.d"), (self.passwd, "/etc/passwd"), (self.group, "/etc/group"),
                 (self.shadow, "/etc/shadow"), (self.sudoers, "/etc/sudoers"), (rig.dir, "/run/dbus"),
                 (self.run_sudo, "/run/sudo")]
        # su records a failed attempt in /var/log/btmp: give it an empty private copy.
        for log in ("btmp", "wtmp"):
            if Path("/var/log", log).is_file():
                copy = etc / log
                copy.touch()
                shutil.copymode(Path("/var/log", log), copy)
                binds.append((copy, f"/var/log/{log}"))
        self.host_before = host_snapshot()
        self.enter = base / "enter.sh"
        self.enter.write_text("set -e\nmount --make-rprivate /\n"
                              + "".join(f"mount --bind '{src}' '{dst}'\n" for src, dst in binds)
                              + 'exec "$@"\n')

    def sudoers_default(self, setting):
        """One more `Defaults` line in the world's sudoers."""
        with open(self.sudoers, "a") as sudoers:
            sudoers.write(f"Defaults {setting}\n")

    def argv(self, *command, as_user=True, uid=UID):
        """The command inside the private namespace, as a test user or root."""
        prefix = ["unshare", "--mount", "/bin/sh", str(self.enter)]
        if as_user:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups", "--"]
        return prefix + list(command)

    def env(self, user=USER):
        return {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "TERM": "dumb", "LANG": "C",
                "HOME": "/", "USER": user, "LOGNAME": user}

    def record(self, uid=UID):
        path = self.state / f"{uid}.rec"
        return parse_record(path.read_bytes(), uid) if path.exists() else None

    def counts(self, uid=UID):
        """(F, P) on disk; (0, 0) when no record exists."""
        rec = self.record(uid)
        return (rec.F, rec.P) if rec else (0, 0)

    def state_files(self):
        return sorted(p.name for p in self.state.iterdir())

    def clear_state(self):
        self.seeded = {}
        for p in self.state.iterdir():
            p.unlink()

    def password_entered(self, uid=UID, name=USER):
        """The user typed the password once this boot (pamenv.password_entered)."""
        password_entered(self.state, uid, name, self.rig.bus_address)
        self.note_seed()


# ---------------------------------------------------------------- a terminal

class Terminal:
    """A program on a fresh pseudo-terminal that is its controlling terminal.
    `setsid -c` (not a process-group leader, so it does not fork) starts a new
    session and makes stdin, the pty, its controlling terminal; the program
    keeps that pid through the exec chain (setsid, unshare, sh, setpriv,
    sudo), so proc.pid is sudo's own pid and its exit status is returned."""

    def __init__(self, argv, env):
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen(["setsid", "-w", "-c"] + argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     close_fds=True)
        os.close(slave)
        self.data = b""
        self.mark = 0    # expect() searches from here
        self.eof = False

    @property
    def text(self):
        return self.data.decode(errors="replace").replace("\r\n", "\n")

    def _read(self, timeout):
        if self.eof:
            return False
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: every slave fd closed
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.data += chunk
        return True

    def expect(self, needle, timeout=STEP):
        """Wait until `needle` appears after the previous match; -> text up to it."""
        want = needle.encode()
        deadline = time.monotonic() + timeout
        while True:
            at = self.data.find(want, self.mark)
            if at >= 0:
                start, self.mark = self.mark, at + len(want)
                return self.data[start:self.mark].decode(errors="replace")
            if self.eof or time.monotonic() >= deadline:
                raise AssertionError(f"{needle!r} not seen within {timeout} s (eof={self.eof}); terminal:\n{self.text}")
            self._read(deadline - time.monotonic())

    def wait_reading_terminal(self, timeout=STEP):
        """Wait until the program is blocked in read() on its terminal. sudo
        writes its password prompt and only then calls read(): a Ctrl-C in
        between is caught by its handler but does not end the read, and sudo
        then waits for a line forever (seen with pam_unix alone too: 2 of 30
        runs). A person cannot type that fast; a test can, so it waits for
        this state (/proc/PID/syscall: "0 <fd> ..." with fd a tty)."""
        pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/syscall") as f:
                    fields = f.read().split()
                if len(fields) > 1 and fields[0] == "0":
                    target = os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}")
                    if target == "/dev/tty" or target.startswith("/dev/pts/"):
                        return
            except (OSError, ValueError):
                pass
            self._read(0.002)
        raise AssertionError(f"not reading its terminal within {timeout} s; terminal:\n{self.text}")

    def type(self, text):
        os.write(self.master, text.encode())

    def ctrl_c(self, timeout=STEP):
        """Ctrl-C, once what the program wrote last is read to the end of its
        line (or of a prompt, "...: "). The terminal's Ctrl-C flushes the
        output the test has not read yet (n_tty's signal keys, without
        NOFLSH, flush the pty's buffer toward the master): a line's "\\r\\n",
        written after its text, was lost that way (the next message began on
        the same line in the transcript)."""
        deadline = time.monotonic() + timeout
        while not (self.data.endswith(b"\n") or self.data.endswith(b": ")):
            if self.eof or time.monotonic() >= deadline:
                raise AssertionError(f"the last line never ended within {timeout} s; terminal:\n{self.text}")
            self._read(deadline - time.monotonic())
        os.write(self.master, b"\x03")

    def finish(self, timeout=RUN):
        """Read to EOF and reap; -> exit status. Kills the session on timeout."""
        deadline = time.monotonic() + timeout
        exited_at = None
        while not self.eof and time.monotonic() < deadline:
            self._read(min(0.1, deadline - time.monotonic()))
            if exited_at is None and self.proc.poll() is not None:
                exited_at = time.monotonic()
            if exited_at is not None and time.monotonic() - exited_at > 2:
                break  # something else holds the terminal open: stop waiting for EOF
        try:
            return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {timeout} s; terminal:\n{self.text}") from None

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=5)

    def close(self):
        if self.proc.poll() is None:
            self.kill()
        os.close(self.master)


def run_plain(world, argv, input=None, timeout=RUN, **kwargs):
    """No terminal at all: a new session without a controlling terminal."""
    return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=world.env(),
                          start_new_session=True, **kwargs)


# ---------------------------------------------------------------- fixtures

rig = shared_rig(enroll=USER)


@pytest.fixture(scope="module")
def world(rig, tmp_path_factory):
    return World(tmp_path_factory.mktemp("real-programs"), rig)


@pytest.fixture
def w(world, rig):
    world.clear_state()
    world.password_entered()  # the first password of this boot: the finger is enough now
    yield world
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running


@pytest.fixture
def term(w):
    terms = []

    def start(*command, as_user=True, uid=UID, prefix=()):
        name = {UID: USER, OTHER_UID: OTHER}[uid] if as_user else "root"
        t = Terminal(list(prefix) + w.argv(*command, as_user=as_user, uid=uid), w.env(name))
        terms.append(t)
        return t
    yield start
    for t in terms:
        t.close()


def fed(rig):
    return rig.fed().sent_commands()


def sudo_id(term):
    return term("sudo", "-k", "/usr/bin/id")


def transcript(*lines):
    """Terminal text: each line ends with a newline, except a prompt ("...: "),
    which the program's newline after the hidden answer ends (written "")."""
    return "".join(line if line.endswith(": ") else line + "\n" for line in lines)


# ================================================================ sudo

def test_sudo_match_runs_the_command_without_a_password(w, rig, term):
    rig.feed([MATCH])
    t = sudo_id(term)
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)  # no password prompt
    rec = w.record()
    assert (rec.F, rec.P) == (0, 0) and rec.last_fingerprint_wall > 0


def test_sudo_three_misses_then_the_password(w, rig, term):
    rig.feed([MISS] * 3)
    t = sudo_id(term)
    t.expect(PASSCODE_PROMPT)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert fed(rig) == [MISS] * 3
    assert t.text == transcript(INSTRUCTION, NOT_RECOGNIZED_TRY, NOT_RECOGNIZED_TRY,
                                NOT_RECOGNIZED_LAST, PASSCODE_PROMPT, "", ID_ROOT)
    assert PASSWORD not in t.text  # typed with echo off
    assert w.counts() == (0, 0)
    assert w.record().last_passcode_wall > 0


def test_sudo_wrong_passwords_three_then_two_then_locked(w, rig, term):
    """sudo's own loop (passwd_tries=3) re-enters the module: 3 fingerprint
    tries, then 2 (F reaches 5: locked), then none; each wrong password is
    charged. sudo says "Sorry, try again." after each of the first two."""
    rig.feed([MISS] * 5)
    t = sudo_id(term)
    for n in range(3):
        t.expect(PASSCODE_PROMPT)
        t.type(f"wrong-{n}\n")
    assert t.finish() == 1
    assert fed(rig) == [MISS] * 5
    assert t.text == transcript(
        INSTRUCTION, NOT_RECOGNIZED_TRY, NOT_RECOGNIZED_TRY, NOT_RECOGNIZED_LAST, PASSCODE_PROMPT, "",
        SUDO_SORRY,
        INSTRUCTION, NOT_RECOGNIZED_TRY, NOT_RECOGNIZED_LAST, LOCKED, PASSCODE_PROMPT, "",
        SUDO_SORRY,
        LOCKED, PASSCODE_PROMPT, "",
        "sudo: 3 incorrect password attempts")
    assert "wrong-" not in t.text
    assert w.counts() == (5, 3)


def test_sudo_lockout_persists_into_the_next_sudo_until_the_password(w, rig, term):
    """Build F = 5 with two sudo runs that end with Ctrl-C at the password
    prompt (the misses stay charged, no password is), then: the sensor is
    skipped and the module says why; the password unlocks; a match works again."""
    for misses, F in ((3, 3), (2, 5)):
        rig.feed([MISS] * misses)
        t = sudo_id(term)
        t.expect(PASSCODE_PROMPT)
        t.wait_reading_terminal()
        t.ctrl_c()
        assert t.finish() == 1
        assert fed(rig) == [MISS] * misses
        assert t.text.endswith(transcript(PASSCODE_PROMPT, "", "sudo: a password is required"))
        assert w.counts() == (F, 0)
    assert LOCKED in t.text

    locked = sudo_id(term)
    locked.expect(PASSCODE_PROMPT)
    locked.type(PASSWORD + "\n")
    assert locked.finish() == 0
    assert locked.text == transcript(LOCKED, PASSCODE_PROMPT, "", ID_ROOT)
    assert "fingerprint reader" not in locked.text
    assert w.counts() == (0, 0)

    rig.feed([MATCH])
    again = sudo_id(term)
    assert again.finish() == 0
    assert fed(rig) == [MATCH]
    assert again.text == transcript(INSTRUCTION, ID_ROOT)


def test_sudo_retries_do_not_let_a_misplaced_authsucc_line_reset_the_misses(w, rig, term):
    """An administrator puts the authsucc line first, before the biometrics
    line, as well as in its place (the lint calls this an error). sudo's own
    loop (passwd_tries=3) runs the stack three times on one PAM handle, so
    the module's note that it prompted outlives each run; the first line of
    the next run must not take a wrong password's run as earning a reset.
    libpam clears PAM_AUTHTOK when each run begins: the line resets only when
    a password module set it in the same run. Run 1: three misses, a wrong
    password; run 2: two misses (F = 5, locked), a wrong password; run 3:
    locked, a wrong password. Without that check run 2 reset F to 0 and
    offered three more fingerprint tries."""
    module = f"{MODULE} state_dir={w.state} conf={w.base / 'localauth.conf'}"
    stack = (f"auth optional {module} authsucc\n"
             f"auth [success=3 conv_err=die default=ignore] {module} policy=biometrics\n"
             "auth [success=1 default=die] pam_unix.so\n"
             "auth requisite pam_deny.so\n"
             f"auth optional {module} authsucc\n"
             "auth required pam_permit.so\n")
    shipped = (w.pamd / "sudo").read_text()
    (w.pamd / "sudo").write_text(stack + "".join(line + "\n" for line in shipped.splitlines() if not line.startswith("auth")
                                                 and "pam_localauth" not in line))
    try:
        rig.feed([MISS] * 5)
        t = sudo_id(term)
        for n in range(3):
            t.expect(f"password for {USER}: ")
            t.type(f"wrong-{n}\n")
        assert t.finish() == 1
        assert fed(rig) == [MISS] * 5
        assert t.text.count(NOT_RECOGNIZED_LAST) == 5 and t.text.count(LOCKED) == 2, t.text
        assert w.counts() == (5, 0)   # pam_unix's wrong passwords are not the module's to count
    finally:
        (w.pamd / "sudo").write_text(shipped)


@pytest.mark.stop_proof
def test_sudo_ctrl_c_before_the_first_failure_cancels_uncharged(w, rig, term):
    """The instruction is shown once the sensor is claimed and SIGINT blocked:
    Ctrl-C from then on is the module's. It cancels (PAM_CONV_ERR, the
    interrupt left pending): sudo reports a PAM conversation error and exits
    1, the command does not run. Echo is off while the reader waits, so the
    terminal shows no ^C."""
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    t.ctrl_c()
    assert t.finish() == 1
    assert t.text == transcript(INSTRUCTION, "sudo: PAM authentication error: Conversation error",
                                "sudo: a password is required")
    assert w.counts() == (0, 0)


@pytest.mark.stop_proof
def test_sudo_ctrl_c_after_a_miss_cancels_and_the_miss_stays_counted(w, rig, term):
    """Touch or type: the password is typed, so Ctrl-C is a cancel at any
    time, as at sudo's own prompt; the miss before it counts."""
    rig.feed([MISS])
    t = sudo_id(term)
    t.expect(NOT_RECOGNIZED_TRY)
    t.ctrl_c()
    assert t.finish() == 1
    assert fed(rig) == [MISS]
    assert t.text == transcript(INSTRUCTION, NOT_RECOGNIZED_TRY, "sudo: PAM authentication error: Conversation error",
                                "sudo: a password is required")
    assert w.counts() == (1, 0)


def test_sudo_empty_password_is_a_cancel_not_a_wrong_password(w, rig, term):
    """R8: Enter on the module's password prompt is not charged and cancels;
    sudo reports the conversation error and does not ask again (with
    pam_unix alone an empty entry is a wrong password: "Sorry, try again.")."""
    rig.feed([MISS] * 3)
    t = sudo_id(term)
    t.expect(PASSCODE_PROMPT)
    t.type("\n")
    assert t.finish() == 1
    assert fed(rig) == [MISS] * 3
    assert t.text.endswith(transcript(NOT_RECOGNIZED_LAST, PASSCODE_PROMPT, "",
                                      "sudo: PAM authentication error: Conversation error",
                                      "sudo: a password is required"))
    assert w.counts() == (3, 0)


def test_sudo_sensor_error_goes_to_the_password_status_dropped_under_pam_silent(w, rig, term):
    """sudo passes PAM_SILENT: the status line "The fingerprint reader was
    disconnected." is dropped (R15), the instruction and prompt are not."""
    rig.feed(["ERROR 5"])
    t = sudo_id(term)
    t.expect(PASSCODE_PROMPT)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert fed(rig) == ["ERROR 5"]
    assert t.text == transcript(INSTRUCTION, PASSCODE_PROMPT, "", ID_ROOT)
    assert w.counts() == (0, 0)


def test_sudo_without_fprintd_or_without_prints_asks_only_the_password(w, rig, term):
    """No usable biometrics (fprintd not running; a user with no enrolled
    finger): straight to the module's password prompt, no instruction."""
    rig.stop_fprintd()
    try:
        t = sudo_id(term)
        t.expect(PASSCODE_PROMPT)
        t.type(PASSWORD + "\n")
        assert t.finish() == 0
    finally:
        rig.start_fprintd()
    assert t.text == transcript(PASSCODE_PROMPT, "", ID_ROOT)
    assert w.counts() == (0, 0)

    other = term("sudo", "-k", "/usr/bin/id", uid=OTHER_UID)
    other.expect(PASSCODE_PROMPT)
    other.type(OTHER_PASSWORD + "\n")
    assert other.finish() == 0
    assert other.text == transcript(PASSCODE_PROMPT, "", ID_ROOT)
    assert w.counts(OTHER_UID) == (0, 0)


def test_sudo_with_the_lid_closed_asks_the_password_and_the_finger_works_once_it_opens(w, rig, term, logind):
    session = logind.add_session("lt20", UID, USER)
    logind.set_lid(True)
    t = term("sudo", "-k", "/usr/bin/id", prefix=session.prefix())
    t.expect(PASSCODE_PROMPT)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert t.text == transcript("The lid is closed: the fingerprint reader is not used.", PASSCODE_PROMPT, "", ID_ROOT)
    logind.set_lid(False)
    rig.feed([MATCH])
    t = term("sudo", "-k", "/usr/bin/id", prefix=session.prefix())
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)


def test_sudo_typed_in_a_desktop_terminal_under_the_user_manager_gets_the_finger(w, rig, term, logind):
    """GNOME's and Plasma's terminals run under systemd's user manager
    (user@UID.service), in no login session: real sudo there stands in the
    user's active session at the seat and takes the finger."""
    logind.add_session("lt22", UID, USER)
    manager = logind.add_user_manager(UID)
    rig.feed([MATCH])
    t = term("sudo", "-k", "/usr/bin/id", prefix=manager.prefix())
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)
    assert w.counts() == (0, 0)


def test_sudo_behind_a_locked_screen_gets_the_password_not_the_lockers_touch(w, rig, term, logind):
    session = logind.add_session("lt21", UID, USER)
    logind.set_locked("lt21", True)
    t = term("sudo", "-k", "/usr/bin/id", prefix=session.prefix())
    t.expect(PASSCODE_PROMPT)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert t.text == transcript("The screen is locked: the fingerprint reader is kept for unlocking it; sudo needs your password.",
                                PASSCODE_PROMPT, "", ID_ROOT)
    assert w.counts() == (0, 0)


def test_sudo_S_password_on_stdin_without_a_terminal(w):
    """No terminal: prompt mode; sudo -S answers the first prompt from stdin."""
    r = run_plain(w, w.argv("sudo", "-S", "-k", "/usr/bin/id"), input=PASSWORD + "\n")
    assert r.returncode == 0, r
    assert r.stdout == ID_ROOT + "\n"
    assert r.stderr == FIRST_PROMPT
    assert w.counts() == (0, 0) and w.record().last_passcode_wall > 0


def test_sudo_S_empty_line_starts_the_sensor(w, rig):
    rig.feed([MATCH])
    r = run_plain(w, w.argv("sudo", "-S", "-k", "/usr/bin/id"), input="\n")
    assert r.returncode == 0, r
    assert fed(rig) == [MATCH]
    assert r.stderr == FIRST_PROMPT
    # sudo prints PAM text to its (here block-buffered) stdout: it comes last
    assert r.stdout == ID_ROOT + "\n" + PROMPT_INSTRUCTION + "\n"
    assert w.counts() == (0, 0)


def test_sudo_without_any_terminal_fails_cleanly(w):
    """stdin /dev/null, no controlling terminal: sudo's conversation fails on
    the module's first prompt; nothing is charged, nothing hangs."""
    started = time.monotonic()
    r = run_plain(w, w.argv("sudo", "-k", "/usr/bin/id"), stdin=subprocess.DEVNULL, timeout=20)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr == ("sudo: a terminal is required to read the password; either use the -S option to read from "
                        "standard input or configure an askpass helper\nsudo: a password is required\n")
    assert w.record_untouched(UID)
    r = run_plain(w, w.argv("sudo", "-S", "-k", "/usr/bin/id"), stdin=subprocess.DEVNULL, timeout=20)
    assert r.returncode == 1
    assert r.stderr == FIRST_PROMPT + "\nsudo: no password was provided\nsudo: a password is required\n"
    assert w.counts() == (0, 0)
    assert time.monotonic() - started < 10


# ================================================================ touch or type
#
# A person at sudo's terminal: the reader waits and the password can be
# typed at once. The module reads the keys itself with echo off; Enter after
# a password ends the wait with it (the wait's fingerprint attempt given
# back, the password charged and checked), Enter alone asks sudo's password
# prompt, Ctrl-C cancels; the terminal is put back on every way out.

def sudo_pid(t):
    """The sudo process of a terminal's session."""
    from lockers import descendants
    for pid in [t.proc.pid, *descendants(t.proc.pid)]:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sudo":
                return pid
        except OSError:
            continue
    raise AssertionError(f"no sudo in the session; terminal:\n{t.text}")


def wait_for_echo(t, on):
    """Waits (polled, bounded) until the terminal's echo is on or off, as
    the program behind it set it (read on the master side)."""
    deadline = time.monotonic() + STEP
    while bool(termios.tcgetattr(t.master)[3] & termios.ECHO) != on:
        assert time.monotonic() < deadline, f"echo never went {'on' if on else 'off'}; terminal:\n{t.text}"
        time.sleep(0.002)


def test_sudo_password_typed_while_the_reader_waits_is_checked_at_once(w, rig, term):
    with BusMonitor(rig) as monitor:
        t = sudo_id(term)
        t.expect(INSTRUCTION)
        monitor.wait_for("VerifyStart")
        t.type(PASSWORD + "\n")
        assert t.finish(timeout=10) == 0
        calls = [member for member, _ in monitor.close() if member in ("Claim", "VerifyStart", "VerifyStop", "Release")]
    assert calls == ["Claim", "VerifyStart", "VerifyStop", "Release"]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)       # the password never shows
    rec = w.record()
    assert (rec.F, rec.P) == (0, 0) and rec.last_passcode_wall > 0


def test_sudo_wrong_password_typed_while_waiting_is_one_password_attempt(w, rig, term):
    """sudo's next try starts the reader again; Ctrl-C there ends it. The
    wrong password is charged (P 1); the waits' attempts are given back."""
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    t.type("not-the-password\n")
    t.expect(SUDO_SORRY)
    t.expect(INSTRUCTION)
    t.ctrl_c()
    assert t.finish() == 1
    assert t.text == transcript(INSTRUCTION, SUDO_SORRY, INSTRUCTION, "sudo: PAM authentication error: Conversation error",
                                "sudo: a password is required")
    assert "not-the-password" not in t.text
    assert w.counts() == (0, 1)


def test_sudo_during_the_password_back_off_says_the_wait_once(w, term):
    """A user without an enrolled finger (sudo asks only the password): five
    wrong ones over two sudo runs start the back-off, and the refusal of the
    next try unasked ends that sudo at once. A later sudo says the wait once
    and stops: no "Sorry, try again." and no "incorrect password attempts"
    for tries the person never made, and nothing is charged."""
    wait = r"Too many wrong passwords\. Try again in \d+ (second|minute)s?\."
    stopped = ["sudo: PAM authentication error: Insufficient credentials to access authentication data",
               "sudo: a password is required"]
    for wrongs in (3, 2):
        t = term("sudo", "-k", "/usr/bin/id", uid=OTHER_UID)
        for n in range(wrongs):
            t.expect(PASSCODE_PROMPT)
            t.type(f"wrong-{n}\n")
        assert t.finish() == 1
    # The second run's third try came after the 5th wrong password: refused unasked.
    lines = t.text.splitlines()
    assert re.fullmatch(wait, lines[-3]) and lines[-2:] == stopped, t.text
    assert w.counts(OTHER_UID) == (0, 5)
    t = term("sudo", "-k", "/usr/bin/id", uid=OTHER_UID)
    assert t.finish() == 1
    lines = t.text.splitlines()
    assert len(lines) == 3 and re.fullmatch(wait, lines[0]) and lines[1:] == stopped, t.text
    assert w.counts(OTHER_UID) == (0, 5), "nothing charged"


@pytest.mark.parametrize("early", ["", "early-keys\n"], ids=["enter", "enter-then-keys"])
def test_sudo_enter_alone_asks_the_password(w, rig, term, early):
    """Enter alone asks the password. Keys typed at once after it, before
    sudo's prompt shows, are dropped, not handed to the prompt as a (wrong,
    charged) password; the password typed at the prompt is."""
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    t.type("\n" + early)
    t.expect(PASSCODE_PROMPT)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert t.text == transcript(INSTRUCTION, PASSCODE_PROMPT, "", ID_ROOT)
    assert w.counts() == (0, 0)


def test_sudo_keys_typed_then_a_touch_the_finger_wins_and_nothing_is_echoed(w, rig, term):
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    t.type("half-typed")
    rig.send_vdev(MATCH, timeout=10)
    assert t.finish() == 0
    assert t.text == transcript(INSTRUCTION, ID_ROOT)
    assert w.counts() == (0, 0) and w.record().last_fingerprint_wall > 0


def test_sudo_backspace_and_ctrl_u_edit_the_hidden_password(w, rig, term):
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    t.type("garbage\x15" + PASSWORD + "x\x7f\n")     # Ctrl-U clears, Backspace takes the x back
    assert t.finish(timeout=10) == 0
    assert t.text == transcript(INSTRUCTION, ID_ROOT)
    assert w.counts() == (0, 0)


def test_a_password_typed_while_the_reader_is_claimed_elsewhere_is_edited_and_taken(w, rig, term):
    """The reader is busy (another prompt holds it): the password typed
    while the terminal was quiet is the answer to the password prompt, with
    its Backspace applied, not raw bytes."""
    rig.claim_elsewhere(USER)
    try:
        t = sudo_id(term)
        wait_for_echo(t, on=False)
        t.type(PASSWORD + "x\x7f\n")
        assert t.finish() == 0, t.text
    finally:
        rig.release_elsewhere()
    assert SUDO_SORRY not in t.text and PASSWORD not in t.text
    assert w.counts() == (0, 0)


@pytest.mark.parametrize("gone", ["killed", "exited"])
def test_a_reader_another_program_keeps_gives_the_password_at_once_and_the_finger_after(w, rig, term, gone):
    """What fprintd's users report most after the keyring: a reader left
    claimed, by a client that hangs or dies holding it, or by a suspend. A
    program of its own claims the reader and never releases it: sudo says
    the reader is in use and asks the password at once (no wait for a
    finger that cannot come), charging nothing. Once that program is gone,
    SIGKILLed holding the claim or ended (fprintd drops a claim whose
    holder left the bus), the next sudo takes the finger."""
    holder = rig.claiming_process(USER)
    try:
        t = sudo_id(term)
        t.expect(READER_BUSY)
        wait_for_echo(t, on=False)
        assert INSTRUCTION not in t.text, t.text
        t.type(PASSWORD + "\n")
        assert t.finish() == 0, t.text
        assert w.counts() == (0, 0)
    finally:
        if gone == "killed":
            holder.kill()
        else:
            holder.stdin.close()
        holder.wait(timeout=30)
    rig.feed([MATCH])
    t = sudo_id(term)
    assert t.finish() == 0, t.text
    assert fed(rig) == [MATCH]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)
    assert w.counts() == (0, 0)


def test_keys_typed_after_enter_stay_for_the_next_program(w, rig, term):
    """Type-ahead: what is typed after the password's Enter is not the
    module's; the shell's next `read` gets it. sudo itself is told not to
    run the command in a terminal of its own (use_pty, the default from
    sudo 1.9.14), which would pass the keys on to the command it runs."""
    w.sudoers_default("!use_pty")
    t = term("sh", "-c", 'sudo -k /usr/bin/id; read -r next; echo "next got: [$next]"')
    t.expect(INSTRUCTION)
    t.type(PASSWORD + "\nahead\n")
    t.expect("next got: [ahead]")
    assert t.finish() == 0
    assert w.counts() == (0, 0)


def test_a_touch_while_typing_keeps_the_rest_of_the_password_from_the_next_program(w, rig, term):
    """The finger wins while the password is half typed; the person goes
    on typing its rest and Enter. None of it reaches the shell after sudo,
    nor the terminal: the module swallows the rest of that line."""
    with BusMonitor(rig) as monitor:
        t = term("sh", "-c", 'sudo -k /usr/bin/id; read -r next; echo "next got: [$next]"')
        t.expect(INSTRUCTION)
        monitor.wait_for("VerifyStart")
        t.type("hunt")
        rig.send_vdev(MATCH, timeout=10)
        monitor._read_until(lambda: any("verify-match" in line for line in monitor.lines))
        t.type("er2\n")
        t.expect(ID_ROOT)
        t.type("after\n")
        t.expect("next got: [after]")
        assert t.finish() == 0
    assert "hunt" not in t.text and "er2" not in t.text
    assert w.counts() == (0, 0)


def test_ctrl_z_does_not_stop_the_prompt_and_is_no_part_of_the_password(w, rig, term):
    """util-linux su does not catch SIGTSTP: Ctrl-Z is off while the keys
    are read, and its byte is dropped."""
    t = term("su", USER, "-c", "/usr/bin/id -u")
    t.expect("su needs to confirm your identity")
    t.type("\x1a" + PASSWORD + "\n")
    assert t.finish() == 0
    assert t.text.endswith(f"{UID}\n")
    assert w.counts() == (0, 0)


def test_a_stop_and_continue_that_turned_echo_on_again_is_quieted(w, rig, term):
    """SIGSTOP, then a job-control shell puts its own settings back (here
    the test does, on the terminal's master side), then SIGCONT: the module
    turns echo off again before anything more is typed."""
    t = sudo_id(term)
    t.expect(INSTRUCTION)
    pid = sudo_pid(t)
    os.kill(pid, signal.SIGSTOP)
    settings = termios.tcgetattr(t.master)
    settings[3] |= termios.ECHO | termios.ICANON
    termios.tcsetattr(t.master, termios.TCSANOW, settings)
    os.kill(pid, signal.SIGCONT)
    wait_for_echo(t, on=False)
    t.type(PASSWORD + "\n")
    assert t.finish() == 0
    assert PASSWORD not in t.text
    assert w.counts() == (0, 0)


def test_sudo_in_a_background_job_never_takes_the_reader(w, rig, term):
    """A job sent to the background is no person at the terminal: prompt
    mode, whose question sudo's conversation cannot ask from the
    background, so sudo ends with its own "a password is required", as
    without the module; fprintd is never claimed. (sudo 1.9.13 refuses
    before showing the question; 1.9.16 shows it, is stopped reading the
    answer, and gives up when the shell ends: the job's status is then 149,
    stopped by SIGTTIN.) Terminal mode's instruction is never shown."""
    with BusMonitor(rig) as monitor:
        t = term("sh", "-c", "set -m; sudo -k /usr/bin/id & wait $!; echo job-status=$?")
        t.expect("job-status=1")
        assert t.finish() == 0
        assert reader_calls(monitor) == []
    assert "sudo: a password is required" in t.text
    shown = t.text.replace(FIRST_PROMPT, "", 1)
    assert "fingerprint" not in shown and INSTRUCTION not in t.text, t.text


@pytest.mark.stop_proof
@pytest.mark.parametrize("offset_ms", [-3, 0, 3], ids=lambda offset: f"enter{offset:+d}ms")
def test_a_miss_and_a_typed_password_racing_gain_no_attempt(w, rig, term, offset_ms):
    """A wrong password's Enter a few milliseconds before, with, or after a
    miss is judged. Whichever comes first, nothing is gained: the password
    is charged (P 1), a miss fprintd judged before the prompt's VerifyStop
    stays counted, and no more fingerprint attempts stay on record than
    verifies fprintd started. sudo's next try is then cancelled (Ctrl-C),
    which gives its wait's attempt back."""
    def scan(must_arrive):
        try:
            rig.send_vdev(MISS, timeout=10 if must_arrive else 2)
        except (OSError, TimeoutError):
            assert not must_arrive
    with BusMonitor(rig) as monitor:
        t = sudo_id(term)
        t.expect(INSTRUCTION)
        monitor.wait_for("VerifyStart")     # a scan sent from here on is judged by this verify
        if offset_ms < 0:
            t.type("not-the-password\n")
            time.sleep(-offset_ms / 1000)   # the race's offset, not a policy timer
            scan(must_arrive=False)
        else:
            scan(must_arrive=True)
            time.sleep(offset_ms / 1000)
            t.type("not-the-password\n")
        t.expect(SUDO_SORRY)
        t.expect(INSTRUCTION)
        t.ctrl_c()
        assert t.finish() == 1
        order = monitor.close()
    rec = w.record()
    stop = next((index for index, (member, _) in enumerate(order) if member == "VerifyStop"), len(order))
    judged_before_stop = [argument for member, argument in order[:stop] if member == "VerifyStatus"]
    verifies = sum(member == "VerifyStart" for member, _ in order)
    assert rec.P == 1, (rec, order)
    assert rec.F <= verifies - 1, (rec, order)     # the second try's wait was given back
    if "verify-no-match" in judged_before_stop:
        assert rec.F == 1, (rec, order)
    assert "not-the-password" not in t.text


@pytest.mark.parametrize("how", ["password", "touch", "ctrl-c", "SIGTERM", "SIGHUP"])
def test_the_terminal_is_put_back_on_every_way_out(w, rig, term, how):
    """After sudo, `stty -a` on the same terminal: echo and line editing
    on, as before sudo ran, whichever way the prompt ended. The shell
    outlives a Ctrl-C with a handler of its own (a handler, not an ignored
    SIGINT, which sudo would inherit)."""
    t = term("sh", "-c", "trap : INT; sudo -k /usr/bin/id; stty -a; echo done")
    t.expect(INSTRUCTION)
    if how == "password":
        t.type(PASSWORD + "\n")
    elif how == "touch":
        rig.send_vdev(MATCH, timeout=10)
    elif how == "ctrl-c":
        t.ctrl_c()
    else:
        os.kill(sudo_pid(t), getattr(signal, how))
    t.expect("done")
    t.finish()
    settings = t.text.split("\n")
    flags = " ".join(line for line in settings if "echo" in line or "icanon" in line).split()
    assert "echo" in flags and "icanon" in flags and "-echo" not in flags and "-icanon" not in flags, t.text


# ================================================================ scripts never wait for a finger
#
# No person at sudo's terminal (its password from a pipe or an askpass
# program, or no terminal at all): the module takes the prompt mode, whose
# first answer is checked at once as the password. fprintd is watched on
# the bus: neither Claim nor VerifyStart may reach it.

def reader_calls(monitor):
    return [member for member, _ in monitor.close() if member in ("Claim", "VerifyStart")]


@pytest.fixture
def askpass(w):
    """An askpass program the test user can run: it notes each prompt it is
    given and answers the password."""
    directory = Path(tempfile.mkdtemp(prefix="askpass-", dir="/tmp"))
    os.chmod(directory, 0o755)
    log = directory / "prompts"
    log.touch()
    os.chown(log, UID, UID)
    program = directory / "askpass"
    program.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {log}\necho {PASSWORD}\n')
    os.chmod(program, 0o755)
    yield program, log
    shutil.rmtree(directory)


def test_sudo_S_fed_by_a_pipe_in_a_terminal_checks_the_password_at_once(w, rig, term):
    """A script in a terminal: sudo's controlling terminal is there, but its
    standard input is a pipe. Before, the reader waited its 30 s first."""
    with BusMonitor(rig) as monitor:
        t = term("sh", "-c", f"echo {PASSWORD} | sudo -S -k /usr/bin/id")
        assert t.finish(timeout=10) == 0
        assert reader_calls(monitor) == []
    # sudo 1.9.14 and later run the command in a terminal of their own by
    # default (use_pty), whose output turns each newline into CR LF.
    assert t.text.replace("\r\n", "\n") == FIRST_PROMPT + ID_ROOT + "\n"
    assert w.counts() == (0, 0) and w.record().last_passcode_wall > 0


def test_sudo_A_asks_the_askpass_program_at_once(w, rig, term, askpass):
    program, log = askpass
    with BusMonitor(rig) as monitor:
        t = term("env", f"SUDO_ASKPASS={program}", "sudo", "-A", "-k", "/usr/bin/id")
        assert t.finish(timeout=10) == 0
        assert reader_calls(monitor) == []
    assert log.read_text() == FIRST_PROMPT + "\n"
    assert t.text == ID_ROOT + "\n"
    assert w.counts() == (0, 0) and w.record().last_passcode_wall > 0


def test_sudo_askpass_set_but_not_asked_for_keeps_the_reader(w, rig, term, askpass):
    """SUDO_ASKPASS in the environment without -A: a person at the terminal."""
    program, log = askpass
    rig.feed([MATCH])
    t = term("env", f"SUDO_ASKPASS={program}", "sudo", "-k", "/usr/bin/id")
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(INSTRUCTION, ID_ROOT)
    assert log.read_text() == ""


def test_sudo_n_never_reaches_the_reader(w, rig, term):
    with BusMonitor(rig) as monitor:
        t = term("sudo", "-n", "-k", "/usr/bin/id")
        assert t.finish(timeout=10) == 1
        assert reader_calls(monitor) == []
    assert t.text == "sudo: a password is required\n"
    assert w.record_untouched(UID)


def test_sudo_S_without_a_terminal_never_reaches_the_reader(w, rig):
    with BusMonitor(rig) as monitor:
        r = run_plain(w, w.argv("sudo", "-S", "-k", "/usr/bin/id"), input=PASSWORD + "\n", timeout=10)
        assert r.returncode == 0, r
        assert reader_calls(monitor) == []
    assert r.stderr == FIRST_PROMPT
    assert w.counts() == (0, 0)


# ================================================================ sudo -i and su -

def test_sudo_i_uses_the_fingerprint(w, rig, term):
    rig.feed([MATCH])
    t = term("sudo", "-i", "-k", "/usr/bin/id")
    assert t.finish() == 0, t.text
    assert fed(rig) == [MATCH]
    assert t.text == transcript(f"sudo -i needs to confirm your identity ({USER}). "
                                "Swipe your finger across the fingerprint reader or type your password:", ID_ROOT)
    assert w.counts() == (0, 0)


def test_su_dash_to_self_uses_the_fingerprint(w, rig, term):
    rig.feed([MATCH])
    t = term("su", "-", USER, "-c", "/usr/bin/id")
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(f"su - needs to confirm your identity ({USER}). "
                                "Swipe your finger across the fingerprint reader or type your password:",
                                "su: warning: cannot change directory to /nonexistent: No such file or directory",
                                f"uid={UID}({USER}) gid={UID}({USER}) groups={UID}({USER})")
    assert w.counts() == (0, 0)


# ================================================================ su

def test_su_other_user_is_out_of_scope_and_unchanged(w, rig, term):
    """su other by latest: R1 out of scope, pam_unix asks for other's
    password, exactly as with the host's own su stack; no record anywhere."""
    seen = {}
    for stack in ("localauth", "host"):
        if stack == "host":
            shutil.copy("/etc/pam.d/su", w.pamd / "su")
        try:
            t = term("su", OTHER, "-c", "/usr/bin/id")
            t.expect("Password: ")
            t.type(OTHER_PASSWORD + "\n")
            seen[stack] = (t.finish(), t.text)
        finally:
            (w.pamd / "su").write_text(stack_with_module("su", w.state, w.base / "localauth.conf"))
    assert seen["localauth"] == seen["host"]
    assert seen["localauth"] == (0, f"Password: \nuid={OTHER_UID}({OTHER}) gid={OTHER_UID}({OTHER}) "
                                    f"groups={OTHER_UID}({OTHER})\n")
    bad = term("su", OTHER, "-c", "/usr/bin/id")
    bad.expect("Password: ")
    bad.type("not-it\n")
    assert bad.finish() == 1
    assert bad.text == "Password: \nsu: Authentication failure\n"
    assert w.state_untouched()


def test_su_to_self_uses_the_fingerprint(w, rig, term):
    rig.feed([MATCH])
    t = term("su", USER, "-c", "/usr/bin/id")
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(f"su needs to confirm your identity ({USER}). "
                                "Swipe your finger across the fingerprint reader or type your password:",
                                f"uid={UID}({USER}) gid={UID}({USER}) groups={UID}({USER})")
    assert w.counts() == (0, 0)


# ================================================================ login (pamtester, as root)

LOGIN_INSTRUCTION = f"login needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader."
LOGIN_TOUCH_OR_TYPE = (f"login needs to confirm your identity ({USER}). "
                       "Swipe your finger across the fingerprint reader or type your password:")
PAMTESTER_OK = "pamtester: successfully authenticated"


def pamtester(term, user=USER, on_tty=False, flags=""):
    """pamtester sets no PAM_TTY unless told (-I tty=): prompt mode even on a
    terminal; with its controlling terminal as PAM_TTY: terminal mode."""
    item = '-I tty="$(tty)" ' if on_tty else ""
    return term("sh", "-c", f"exec pamtester {item}login {user} 'authenticate{flags}'", as_user=False)


def test_login_prompt_mode_enter_then_fingerprint_or_typed_password(w, rig, term):
    rig.feed([MATCH])
    t = pamtester(term)
    t.expect(FIRST_PROMPT)
    t.type("\n")
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(FIRST_PROMPT, "", LOGIN_INSTRUCTION, PAMTESTER_OK)

    typed = pamtester(term)
    typed.expect(FIRST_PROMPT)
    typed.type(PASSWORD + "\n")
    assert typed.finish() == 0
    assert typed.text == transcript(FIRST_PROMPT, "", PAMTESTER_OK)
    assert w.counts() == (0, 0)


def test_login_terminal_mode_and_pam_silent(w, rig, term):
    rig.feed([MATCH])
    t = pamtester(term, on_tty=True)
    assert t.finish() == 0
    assert fed(rig) == [MATCH]
    assert t.text == transcript(LOGIN_TOUCH_OR_TYPE, PAMTESTER_OK)

    # without PAM_SILENT the status line of a sensor error is shown ...
    rig.feed(["ERROR 5"])
    loud = pamtester(term, on_tty=True)
    loud.expect(PASSCODE_PROMPT)
    loud.type(PASSWORD + "\n")
    assert loud.finish() == 0
    assert fed(rig) == ["ERROR 5"]
    assert loud.text == transcript(LOGIN_TOUCH_OR_TYPE, "The fingerprint reader was disconnected.", PASSCODE_PROMPT, "",
                                   PAMTESTER_OK)
    # ... with it only that line goes (R15)
    rig.feed(["ERROR 5"])
    quiet = pamtester(term, on_tty=True, flags="(PAM_SILENT)")
    quiet.expect(PASSCODE_PROMPT)
    quiet.type(PASSWORD + "\n")
    assert quiet.finish() == 0
    assert fed(rig) == ["ERROR 5"]
    assert quiet.text == transcript(LOGIN_TOUCH_OR_TYPE, PASSCODE_PROMPT, "", PAMTESTER_OK)
    assert w.counts() == (0, 0)


def test_login_unknown_user_looks_like_a_user_without_a_fingerprint(w, rig, term):
    """R14 through the real login stack: same prompt, same failure."""
    seen = []
    for user in (OTHER, "nosuchuser"):
        t = pamtester(term, user=user)
        t.expect(PASSCODE_PROMPT)
        t.type("not-the-password\n")
        seen.append((t.finish(), t.text))
    assert seen[0] == seen[1] == (1, transcript(PASSCODE_PROMPT, "", "pamtester: Authentication failure"))
    assert w.counts(OTHER_UID) == (0, 1)
    assert w.record_untouched(UID)  # (an unknown name may get a look-alike record of its own)


# ================================================================ the host

def test_host_files_unchanged(world):
    assert host_snapshot() == world.host_before
