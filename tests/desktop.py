"""A user's terminal desktop for the end-to-end tests: windows of a private
tmux server, each running a command as the test user inside a private world
(tests/private_world.py), read back as text. The polkit and doas tests drive
their programs through it.

    desk = TmuxDesk(world, uid, user)
    desk.open(0, "sh")            # the user's shell, in window 0
    run = desk.run("doas id -u")  # typed into window 0; its exit status follows it
    desk.exit_status(run)
    desk.close()                  # every process of every window is gone
"""
import os
import shutil
import subprocess
import tempfile

from lockers import descendants, gone, wait_for

STEP = 20


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
        wait_for(lambda: self.count(window, text) >= occurrence, timeout=timeout,
                 what=f"{text!r} #{occurrence} in window {window}")

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
