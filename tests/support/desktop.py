"""The desktop's clients for the end-to-end tests.

TmuxDesk: a user's terminal desktop, windows of a private tmux server, each
running a command as the test user inside a private world
(tests/support/private_world.py), read back as text. The polkit and doas tests drive
their programs through it.

Worker: one PAM conversation as GDM's session worker (or a greeter, or
kscreenlocker_greet) runs it, through tests/support/programs/gdmworker.c.

    desk = TmuxDesk(world, uid, user)
    desk.open(0, "sh")            # the user's shell, in window 0
    run = desk.run("doas id -u")  # typed into window 0; its exit status follows it
    desk.exit_status(run)
    desk.close()                  # every process of every window is gone
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from lockers import descendants, gone, wait_for
from pamenv import BUILD, MODULE

STEP = 20
# tests/support/programs/gdmworker.c: one PAM conversation as GDM's session worker runs it.
WORKER = BUILD / "gdmworker"


class TmuxDesk:
    def __init__(self, world, uid, user):
        self.world, self.uid, self.user = world, uid, user
        # A private server socket, so the test leaves no /tmp/tmux-UID behind.
        self.socket = tempfile.mkdtemp(prefix="localauth-tmux-")
        self.runs = 0
        self.started = False

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", os.path.join(self.socket, "server"), *args],
                              capture_output=True, text=True, timeout=STEP)

    def command(self, *argv, session=None):
        """A shell command line that runs `argv` as the user in the world
        (first entering logind `session`'s cgroup, as a login into it would)."""
        env = dict(self.world.env(self.user), TERM="screen")
        inner = self.world.argv("env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv, uid=self.uid)
        line = " ".join(f"'{a}'" for a in inner)
        if session is not None:
            line = f"echo $$ > {session.path}/cgroup.procs && exec {line}"
        return line

    def open(self, window, line):
        """Starts the shell command `line` in a new window named `window`."""
        if not self.started:
            self.tmux("new-session", "-d", "-s", "desk", "-n", str(window), "-x", "150", "-y", "50", line)
            self.started = True
        else:
            self.tmux("new-window", "-d", "-t", "desk", "-n", str(window), line)

    def pane(self, window):
        """The window's non-empty lines, its history included."""
        history = self.tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", f"desk:{window}").stdout
        return [line.rstrip() for line in history.splitlines() if line.strip()]

    def count(self, window, text):
        return sum(text in line for line in self.pane(window))

    def wait_text(self, window, text, occurrence=1, timeout=STEP):
        try:
            wait_for(lambda: self.count(window, text) >= occurrence, timeout=timeout,
                     what=f"{text!r} #{occurrence} in window {window}")
        except AssertionError as error:
            raise AssertionError(f"{error}; the window shows: {self.pane(window)[-15:]}") from None

    def keys(self, window, text, enter=True):
        if text:
            self.tmux("send-keys", "-t", f"desk:{window}", "-l", text)
        if enter:
            self.tmux("send-keys", "-t", f"desk:{window}", "Enter")

    def ctrl_c(self, window):
        self.tmux("send-keys", "-t", f"desk:{window}", "C-c")

    def run(self, command, window="0"):
        """Types `command` in the shell of `window`; its exit status follows it."""
        self.runs += 1
        self.keys(window, f"{command}; echo RUN-{self.runs}-EXIT=$?")
        return self.runs

    def exit_status(self, run, window="0", timeout=STEP):
        marker = f"RUN-{run}-EXIT="
        wait_for(lambda: any(line.startswith(marker) for line in self.pane(window)), timeout=timeout,
                 what=f"the end of run {run}")
        return int(next(line for line in self.pane(window) if line.startswith(marker))[len(marker):])

    def close(self):
        """Kills the server and waits until every process of every window is
        gone (tmux returns before its panes' processes have died)."""
        panes = self.tmux("list-panes", "-s", "-t", "desk", "-F", "#{pane_pid}").stdout.split()
        tree = [int(pid) for pid in panes if pid.isdigit()]
        tree += [child for pid in list(tree) for child in descendants(pid)]
        self.tmux("kill-server")
        for pid in tree:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        wait_for(lambda: all(gone(pid) for pid in tree), what="the desktop's processes gone")
        shutil.rmtree(self.socket, ignore_errors=True)


def stack(name):
    """A stack file with the built module's path and without the modules
    this machine lacks (pam_gnome_keyring, pam_selinux: optional ones)."""
    text = re.sub(r"\bpam_localauth\.so\b", str(MODULE), name)
    return "\n".join(line for line in text.splitlines()
                     if "pam_gnome_keyring" not in line and "pam_selinux" not in line) + "\n"


# gdm3 43's /etc/pam.d/gdm-password (Debian 12), auth and account lines.
GDM43_PASSWORD = """#%PAM-1.0
auth    requisite       pam_nologin.so
auth\trequired\tpam_succeed_if.so user != root quiet_success
@include common-auth
auth    optional        pam_gnome_keyring.so
@include common-account
"""


def gdm_password_stack():
    """gdm3's gdm-password, its auth and account lines: this system's own
    where gdm3 is installed (a release root holds its release's: gdm3 48 on
    Debian 13, 51 on 14), else gdm3 43's, Debian 12's."""
    installed = Path("/etc/pam.d/gdm-password")
    text = installed.read_text() if installed.exists() else GDM43_PASSWORD
    kept = [line for line in text.splitlines()
            if line.startswith("#%PAM") or re.match(r"(auth|account)\s|@include common-(auth|account)$", line)]
    assert any("common-auth" in line for line in kept), f"{installed}: no common-auth line\n{text}"
    return "\n".join(kept) + "\n"


class Worker:
    """One gdm-session-worker: its conversation's lines as they come."""

    def __init__(self, world, service, user, answer=None, session=None, uid=None):
        argv = [str(WORKER), service, user] + ([answer] if answer is not None else [])
        prefix = session.prefix() if session is not None else []
        command = world.argv(*prefix, *argv) if uid is None else world.argv(*argv, uid=uid)
        if uid is not None and session is not None:
            # The session's cgroup is entered as root, then the user's
            # program runs in it (as a locker started in the session does).
            command = world.argv(*prefix, "setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups", "--", *argv)
        self.proc = subprocess.Popen(command, env=world.env(user if uid is not None else None), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.lines = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def shown(self):
        with self.lock:
            return list(self.lines)

    def messages(self):
        return [line.split(": ", 1)[1] for line in self.shown() if line.startswith(("info: ", "error: "))]

    def errors(self):
        return [line[len("error: "):] for line in self.shown() if line.startswith("error: ")]

    def wait_for_line(self, text):
        wait_for(lambda: any(text in line for line in self.shown()), what=f"{text!r} from the worker")

    def result(self, timeout=30):
        wait_for(lambda: any(line.startswith("result: ") for line in self.shown()), timeout=timeout,
                 what="the worker's result")
        self.proc.wait(timeout=10)
        return int(next(line for line in self.shown() if line.startswith("result: "))[len("result: "):])

    def stop(self):
        """GDM's way of ending a conversation: SIGTERM to the worker."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.reader.join(5)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
