"""Drivers for real screen lockers run headless as the test user inside a
PrivateWorld: i3lock, xscreensaver, xsecurelock, mate-screensaver,
cinnamon-screensaver and Plasma's kscreenlocker_greet on an Xvfb display
(xdotool types), swaylock inside a headless sway (wtype types), vlock in a
tmux pane. Each driver starts the locker locked, submits text (an empty
submission is a bare Enter), and says whether it is unlocked (the locker
exited 0). The PAM conversation of each is what the real program does."""
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from private_world import HELPER_PATH

STEP = 15.0


def wait_for(predicate, timeout=STEP, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


def helper_pids():
    """Running localauth-helper processes (any namespace)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv0 == HELPER_PATH.encode() and state != "Z":
            pids.append(int(entry))
    return pids


# Where libpam waits out the failure delay: nanosleep, clock_nanosleep,
# select, pselect6 (seen: pselect6).
SLEEP_SYSCALLS = {"x86_64": {35, 230, 23, 270}, "aarch64": {101, 115, 72}}.get(platform.machine(), set())


def in_syscall(pid, numbers):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            number = f.read().split()[0]
    except (OSError, IndexError):
        return False
    return number.isdigit() and int(number) in numbers


def in_sleep(pid):
    return in_syscall(pid, SLEEP_SYSCALLS)


READ = {"x86_64": {0}, "aarch64": {63}}.get(platform.machine(), set())


POLL = {"x86_64": 7}.get(platform.machine())


def helper_waiting_for_answer():
    """A helper blocked on its client's answer to a prompt (its pid): in
    poll(2) on its channel (fd 0) alone. While it scans it polls the channel
    and the bus together, and its bus calls poll the bus alone."""
    for pid in helper_pids():
        try:
            with open(f"/proc/{pid}/syscall") as f:
                fields = f.read().split()
            if POLL is None or int(fields[0]) != POLL or int(fields[2], 16) != 1:
                continue
            with open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(int(fields[1], 16))
                if int.from_bytes(mem.read(4), "little", signed=True) == 0:
                    return pid
        except (OSError, IndexError, ValueError):
            continue
    return None


def bytes_read(pid):
    """What a process has read so far (/proc/PID/io rchar); None once gone."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return int(dict(line.split(":", 1) for line in f)["rchar"])
    except (OSError, KeyError, ValueError):
        return None


def session_bus(directory):
    """A dbus-run-session prefix whose bus listens in `directory` (nothing
    left in /tmp) and writes its address to directory/bus."""
    config = directory / "session.conf"
    config.write_text("<busconfig><type>session</type>"
                      f"<listen>unix:dir={directory}</listen><auth>EXTERNAL</auth>"
                      "<policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>"
                      "<allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>\n")
    return ["dbus-run-session", f"--config-file={config}", "--", "sh", "-c",
            f"echo \"$DBUS_SESSION_BUS_ADDRESS\" > '{directory}/bus' && exec \"$0\" \"$@\""]


def descendants(pid):
    """pid's children, their children, and so on (read before any of them
    is killed: an orphan is handed to init and leaves the tree)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def kill_tree(proc):
    """Kills a started process and everything it started, and waits until
    all of them are gone (a dying locker still holds its keyboard grab)."""
    if proc is None:
        return
    tree = [proc.pid] + descendants(proc.pid)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    wait_for(lambda: all(gone(pid) for pid in tree), what="the locker's processes gone")


def process_description(pid):
    """A process's command line and parent, for a message."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return f"{command or stat[stat.index('(') + 1:stat.rindex(')')]} (parent {stat[stat.rindex(')') + 2:].split()[1]})"
    except OSError:
        return "(gone)"


def user_processes(uid):
    """Every live process whose real uid is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
                if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] != "Z":
                    found.append(int(entry))
            except (OSError, KeyError, ValueError, IndexError):
                continue
    return found


def kill_leftovers(*uids, grace=0):
    """Kills what a test left running as `uids` (users private to the
    tests) and says what it was ({pid: description}; empty: nothing was
    left, which the caller asserts). A process already on its way out (one
    a locker started, reparented when the locker exited) gets `grace`
    seconds first."""
    def running():
        return [pid for uid in uids for pid in user_processes(uid)]
    if grace:
        try:
            wait_for(lambda: not running(), timeout=grace, what="the test users' processes ending")
        except AssertionError:
            pass
    left = {pid: process_description(pid) for pid in running()}
    for pid in left:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    wait_for(lambda: not running(), what="the test users' processes gone")
    return left


def processes_named(name, uid=None):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{entry}/status") as f:   # the real uid (setuid programs too)
                owner = int(next(line for line in f if line.startswith("Uid:")).split()[1])
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if comm == name and state != "Z" and (uid is None or owner == uid):
            found.append(int(entry))
    return found


class Xvfb:
    """An X server for the X lockers, without access control (the lockers
    run as another uid). It never resets: by default an X server resets
    when its last client leaves (after xdpyinfo's check, after each test's
    locker), and a locker connecting during the reset is refused
    ("Could not connect to X11")."""

    def __init__(self, display=":57"):
        self.display = display
        self.env = {"DISPLAY": display, "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(["Xvfb", display, "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-ac", "-noreset"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: subprocess.run(["xdpyinfo"], env=self.env, capture_output=True).returncode == 0,
                 what="Xvfb up")

    def xdotool(self, *args):
        return subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True, timeout=STEP)

    def type(self, text):
        if text:
            self.xdotool("type", "--delay", "15", text)
        self.xdotool("key", "Return")

    def has_window(self, klass):
        return self.xdotool("search", "--class", klass).returncode == 0

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Locker:
    """A locker process chain started through the world as the user."""
    name = "?"
    pam_process = None   # the comm of the process that runs PAM
    # Answers every prompt of an attempt with the one submitted text (so an
    # attempt that started the reader ends with an empty password: a cancel).
    precollects = True
    # The module runs inside the locker (setuid root) rather than in the helper.
    in_process = False

    def __init__(self, world, uid, user):
        self.world, self.uid, self.user = world, uid, user
        self.proc = None

    def launch(self, argv, env, **kwargs):
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        self.proc = subprocess.Popen(self.world.argv(*argv, uid=self.uid), env=env, **kwargs)

    def report(self):
        """What a failed assertion shows of this locker: the state counts and,
        where the locker writes one, its own log's end."""
        return f"{self.name}: counts {self.world.counts(self.uid)}, locked {self.locked}"

    def unlocked(self, timeout=STEP):
        try:
            return self.proc.wait(timeout=timeout) == 0
        except subprocess.TimeoutExpired:
            return False

    @property
    def locked(self):
        return self.proc.poll() is None

    def pam_pids(self):
        return processes_named(self.pam_process, self.uid)

    def settle(self):
        """Wait until no PAM attempt is running: no helper alive and no PAM
        process sleeping out libpam's failure delay (which runs after the
        helper has answered). Then the locker takes input again."""
        wait_for(lambda: not helper_pids(), what="the helper gone")
        wait_for(lambda: not any(in_sleep(pid) for pid in self.pam_pids()), what="the failure delay over")
        time.sleep(0.4)  # the locker redraws and re-arms its input

    def close(self):
        kill_tree(self.proc)


class I3lock(Locker):
    name = pam_process = "i3lock"

    def __init__(self, world, uid, user, x):
        super().__init__(world, uid, user)
        self.x = x

    def start(self):
        env = dict(self.world.env(self.user), DISPLAY=self.x.display)
        self.errors = tempfile.TemporaryFile()   # what i3lock says if it gives up
        self.launch(["i3lock", "-n", "-c", "336699"], env, stderr=self.errors)
        wait_for(lambda: self.x.has_window("i3lock") or self.proc.poll() is not None, what="i3lock's window")
        if self.proc.poll() is not None:
            self.errors.seek(0)
            raise AssertionError(f"i3lock exited {self.proc.returncode} before its window: {self.errors.read()!r}")
        time.sleep(0.3)  # i3lock grabs the keyboard after mapping its window
        return self

    def submit(self, text):
        self.x.type(text)

    def close(self):
        super().close()
        self.errors.close()


class Swaylock(Locker):
    """swaylock inside a headless sway (wlroots headless backend, pixman
    renderer), both as the user; wtype types through the virtual-keyboard
    protocol. swaylock runs PAM in a forked child of the same name."""
    name = pam_process = "swaylock"
    def __init__(self, world, uid, user):
        super().__init__(world, uid, user)
        # The user's runtime directory; outside the test's own (root-only) tree.
        self.runtime = Path(tempfile.mkdtemp(prefix="localauth-xdg-"))
        self.sway = None

    def wayland_env(self):
        env = dict(self.world.env(self.user), XDG_RUNTIME_DIR=str(self.runtime), WLR_BACKENDS="headless",
                   WLR_LIBINPUT_NO_DEVICES="1", WLR_RENDERER="pixman", WLR_HEADLESS_OUTPUTS="1")
        sockets = sorted(self.runtime.glob("wayland-?"))
        if sockets:
            env["WAYLAND_DISPLAY"] = sockets[0].name
        return env

    def start_sway(self):
        """The headless sway the locker runs in (hyprlock's too)."""
        os.chmod(self.runtime, 0o700)
        os.chown(self.runtime, self.uid, self.uid)
        config = self.runtime / "sway.conf"
        # No Xwayland (where it is installed, sway would start one on a
        # display of the shared /tmp, left behind with its lock file).
        config.write_text("output HEADLESS-1 resolution 1024x768\nxwayland disable\n")
        self.sway = subprocess.Popen(self.world.argv("sway", "-c", config, uid=self.uid), env=self.wayland_env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: list(self.runtime.glob("wayland-?")), what="sway's socket")

    def start(self):
        self.start_sway()
        self.launch(["swaylock", "-c", "336699"], self.wayland_env())
        wait_for(lambda: self.pam_pids(), what="swaylock running")
        time.sleep(1.0)  # swaylock takes the session lock and its keyboard
        return self

    def settle(self):
        """swaylock's PAM runs in a child of its own, which reads the next
        password from a pipe between attempts: the attempt is over when that
        child waits in read(2) again, its failure delay slept out."""
        super().settle()
        wait_for(lambda: any(in_syscall(pid, READ) for pid in self.pam_pids()), what="swaylock's checker waiting again")
        time.sleep(0.4)

    def submit(self, text):
        args = ["wtype", "-s", "100"] + ([text] if text else []) + ["-k", "Return"]
        subprocess.run(self.world.argv(*args, uid=self.uid), env=self.wayland_env(), capture_output=True, timeout=STEP)

    def close(self):
        super().close()
        kill_tree(self.sway)
        shutil.rmtree(self.runtime, ignore_errors=True)


class Vlock(Locker):
    """vlock (this terminal only) in a tmux pane. vlock-main is setuid root
    and runs PAM with the user as real uid: the module runs in-process, at
    vlock's terminal, so touch or type: after vlock's "press [ENTER]" the
    reader waits and the module reads the keys (a password and Enter, Enter
    alone for "Enter Password:", Ctrl-C to cancel). vlock prefixes the
    user's name to what it shows first, and after a failed attempt asks for
    root's password (answered empty here)."""
    name = "vlock"
    pam_process = "vlock-main"
    precollects = False
    in_process = True
    counter = 0

    def __init__(self, world, uid, user):
        super().__init__(world, uid, user)
        Vlock.counter += 1
        self.session = f"localauth-vlock-{os.getpid()}-{Vlock.counter}"
        # A private server socket, so the test leaves no /tmp/tmux-UID behind.
        self.socket = tempfile.mkdtemp(prefix="localauth-tmux-")

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", os.path.join(self.socket, "server"), *args],
                              capture_output=True, text=True, timeout=STEP)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", self.session).stdout

    def transcript(self):
        """The pane's non-empty lines (PAM's messages and vlock's own)."""
        history = self.tmux("capture-pane", "-p", "-S", "-200", "-t", self.session).stdout
        return [line.rstrip() for line in history.splitlines() if line.strip()]

    def last_line(self):
        lines = [line for line in self.screen().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def start(self):
        env = dict(self.world.env(self.user), TERM="screen")
        command = " ".join(f"'{a}'" for a in self.world.argv("env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                                             "vlock", uid=self.uid))
        self.tmux("new-session", "-d", "-s", self.session, "-x", "120", "-y", "40",
                  f"{command}; echo VLOCK-EXIT=$?; sleep 600")
        wait_for(lambda: "press [ENTER]" in self.screen(), what="vlock's first screen")
        return self

    def reader_waits(self):
        """The module's touch-or-type instruction, or a miss's message that
        says the same, is the last thing shown: the reader waits and keys go
        to the module (the screen's lines joined as tmux wrapped them)."""
        shown = "".join(line for line in self.screen().splitlines() if line.strip()).rstrip()
        # The instruction, or a miss's message; during the password back-off
        # they do not offer typing, but the keys are read all the same.
        return shown.endswith(("or type your password:", "or type your password.", "the fingerprint reader.",
                               "Fingerprint not recognized. Try again."))

    def at_user_prompt(self):
        """Moves vlock on until it asks the user (the reader waits, or a
        password prompt), or has exited (a finger fed beforehand); True then."""
        if not self.locked or self.reader_waits():
            return True
        line = self.last_line().rstrip()
        if line.endswith(":") and not line.startswith("root's "):
            return True
        if "press [ENTER]" in line or line.startswith("root's "):
            before = self.screen()
            self.tmux("send-keys", "-t", self.session, "Enter")
            wait_for(lambda: self.screen() != before, what="vlock to move on")
        return False

    def keys(self, *keys):
        before = self.screen()
        self.tmux("send-keys", "-t", self.session, *keys)
        wait_for(lambda: self.screen() != before, what="vlock to take the keys")

    def submit(self, text):
        """A password: typed where vlock asks the user (while the reader
        waits, or at a password prompt). An empty one is the fewest keys
        toward the finger: vlock's own Enter (which starts the reader), or
        the empty answer at a prompt of the module's (a cancel)."""
        if text:
            wait_for(self.at_user_prompt, what="vlock's prompt for the user")
            if self.locked:
                self.tmux("send-keys", "-t", self.session, "-l", text)   # echo is off: nothing shows
                self.keys("Enter")
            return
        while self.locked:
            state = wait_for(self.empty_answer_state, what="vlock's next question")
            if state == "waiting":
                return
            self.keys("Enter")
            if state in ("start", "prompt"):
                return

    def empty_answer_state(self):
        """Where an empty answer stands: the reader waits ("waiting"), vlock
        asks to start ("start"), root's prompt ("root"), a prompt of the
        module's ("prompt"); None while a miss's verdict may still be
        followed by the next question."""
        shown = "".join(line for line in self.screen().splitlines() if line.strip()).rstrip()
        line = self.last_line().rstrip()
        if not self.locked:
            return "waiting"
        if shown.endswith(("or type your password:", "the fingerprint reader.")):
            return "waiting"
        if "press [ENTER]" in line:
            return "start"
        if line.startswith("root's "):
            return "root"
        if line.endswith(":"):
            return "prompt"
        return None

    def unlocked(self, timeout=STEP):
        try:
            wait_for(lambda: "VLOCK-EXIT=" in self.screen(), timeout=timeout, what="vlock's exit")
        except AssertionError:
            return False
        return "VLOCK-EXIT=0" in self.screen()

    @property
    def locked(self):
        return "VLOCK-EXIT=" not in self.screen()

    def settle(self):
        """vlock waits for input in select(), so the attempt is over when it
        shows its next question (or has exited)."""
        def ready():
            line = self.last_line().rstrip()
            return not self.locked or line.endswith(":") or "press [ENTER]" in line
        wait_for(ready, what="vlock's next question")

    def close(self):
        """Kills the session and waits until everything in its pane is gone
        (tmux returns before its pane's processes have died)."""
        panes = self.tmux("list-panes", "-t", self.session, "-F", "#{pane_pid}").stdout.split()
        tree = [int(pid) for pid in panes if pid.isdigit()]
        tree += [child for pid in list(tree) for child in descendants(pid)]
        self.tmux("kill-session", "-t", self.session)
        self.tmux("kill-server")
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for(lambda: all(gone(pid) for pid in tree), what="vlock's processes gone")
        shutil.rmtree(self.socket, ignore_errors=True)


class Xsecurelock(Locker):
    """xsecurelock on the Xvfb display with XSECURELOCK_PAM_SERVICE set to
    its own service (by default it uses common-auth). A key press opens the
    prompt; each attempt runs PAM in a new authproto_pam, which shows every
    prompt and message and reads each answer from auth_x11."""
    name = "xsecurelock"
    pam_process = "authproto_pam"
    precollects = False

    def __init__(self, world, uid, user, x):
        super().__init__(world, uid, user)
        self.x = x

    def start(self):
        env = dict(self.world.env(self.user), DISPLAY=self.x.display, XSECURELOCK_PAM_SERVICE="xsecurelock",
                   XSECURELOCK_AUTH_TIMEOUT="60")
        self.launch(["xsecurelock"], env)
        wait_for(lambda: processes_named("xsecurelock", self.uid), what="xsecurelock running")
        time.sleep(1.0)  # it grabs the keyboard and maps its windows
        return self

    def waiting_for_answer(self):
        """authproto_pam blocked reading the answer to a prompt."""
        for pid in self.pam_pids():
            try:
                with open(f"/proc/{pid}/syscall") as f:
                    if f.read().split()[0] == "0":
                        return True
            except (OSError, IndexError):
                pass
        return False

    def submit(self, text):
        if not self.pam_pids():
            self.x.xdotool("key", "shift")
            wait_for(self.pam_pids, what="xsecurelock's prompt")
        wait_for(self.waiting_for_answer, what="xsecurelock waiting for an answer")
        time.sleep(0.2)  # auth_x11 draws the prompt and takes keys
        self.x.type(text)

    def settle(self):
        wait_for(lambda: not helper_pids() or self.waiting_for_answer(), what="the attempt over")
        wait_for(lambda: not self.pam_pids() or self.waiting_for_answer(), what="authproto_pam done")


class Xscreensaver(Locker):
    """xscreensaver on the Xvfb display, driven from its -verbose log as a
    person would from the screen: a key press wakes the unlock dialog, every
    PAM prompt gets the text typed, every PAM message dialog gets a key press
    (xscreensaver holds each message until one). PAM runs in the setuid
    xscreensaver-auth, which becomes the user before pam_start."""
    name = "xscreensaver"
    pam_process = "xscreensaver-au"   # xscreensaver-auth, as the kernel shortens it
    precollects = False
    conversation = re.compile(r"pam_conversation \((ECHO_OFF|ECHO_ON|TEXT_INFO|ERROR_MSG)=\"(.*)\"\) \.\.\.$")

    def __init__(self, world, uid, user, x):
        super().__init__(world, uid, user)
        self.x = x
        self.home = Path(tempfile.mkdtemp(prefix="localauth-xss-"))
        self.log = self.home / "xscreensaver.log"
        self.handled = 0          # conversation lines acted on
        self.messages = []        # (kind, text) of every PAM message shown

    def env(self):
        return dict(self.world.env(self.user), DISPLAY=self.x.display, HOME=str(self.home))

    def command(self, *args):
        return subprocess.run(self.world.argv("xscreensaver-command", *args, uid=self.uid), env=self.env(),
                              capture_output=True, text=True, timeout=STEP).stdout

    def start(self):
        settings = self.home / ".xscreensaver"
        settings.write_text("mode: blank\nlock: True\nsplash: False\npasswdTimeout: 0:01:00\nfade: False\n")
        for path in (self.home, settings):
            os.chown(path, self.uid, self.uid)
        with open(self.log, "w") as log:
            self.launch(["xscreensaver", "-no-splash", "-verbose"], self.env(), stdout=log, stderr=subprocess.STDOUT)

        def answering():
            if self.proc.poll() is not None:
                return "exited"
            return "screen" in self.command("-time")
        # Starting takes a few seconds (it waits for the X server's
        # extensions); on a busy machine more than one step.
        if wait_for(answering, timeout=2 * STEP, what="xscreensaver answering") == "exited":
            windows = subprocess.run(["xwininfo", "-root", "-tree"], env=self.x.env, capture_output=True, text=True).stdout
            raise AssertionError(f"xscreensaver exited ({self.proc.returncode}) at start:\n"
                                 f"{self.log.read_text(errors='replace')[-2000:]}\nwindows:\n{windows[-1500:]}")
        self.command("-lock")
        wait_for(lambda: "locked" in self.command("-time"), what="the screen locked")
        return self

    def lines(self):
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            match = self.conversation.search(line)
            if match:
                found.append((match.group(1), match.group(2)))
        return found

    def dismiss_messages(self):
        """Presses a key for each message dialog; -> the pending prompt, if any."""
        lines = self.lines()
        while self.handled < len(lines):
            kind, text = lines[self.handled]
            if kind in ("ECHO_OFF", "ECHO_ON"):
                return text
            self.messages.append((kind, text))
            time.sleep(0.5)       # the dialog maps and takes keys
            self.x.xdotool("key", "Return")
            self.handled += 1
        return None

    def submit(self, text):
        woken = [0.0]

        def prompt_shown():
            prompt = self.dismiss_messages()
            if prompt is None and not self.pam_pids() and time.monotonic() - woken[0] > 1.5:
                self.x.xdotool("key", "shift")   # no dialog up: wake it (it ignores keys right after locking)
                woken[0] = time.monotonic()
            return prompt
        wait_for(prompt_shown, what="xscreensaver's prompt")
        time.sleep(0.5)           # the prompt dialog maps and takes keys
        self.handled += 1
        self.x.type(text)

    def settle(self):
        def over():
            prompt = self.dismiss_messages()
            return prompt is not None or (not helper_pids() and not self.pam_pids())
        wait_for(over, what="the attempt over")

    def unlocked(self, timeout=STEP):
        try:
            wait_for(lambda: (self.dismiss_messages(), "non-blanked" in self.command("-time"))[1], timeout=timeout,
                     what="unlocked")
        except AssertionError:
            return False
        return True

    @property
    def locked(self):
        return "non-blanked" not in self.command("-time")

    def close(self):
        kill_tree(self.proc)
        shutil.rmtree(self.home, ignore_errors=True)


class DialogScreensaver(Locker):
    """A screensaver of gnome-screensaver's family (mate-screensaver,
    cinnamon-screensaver) on the Xvfb display, with a session bus of its own
    (listening in the locker's own directory, so that nothing is left in
    /tmp) and GSettings in memory (its defaults: lock on), driven as a person
    would: a key press shows the unlock dialog, whose separate process runs
    PAM as the user; typed text and Enter answer its prompt. Its --debug
    output carries every PAM message that process was given ("Got message
    style N: '...'", N in the family's own numbering: 0, 1 a prompt echoed or
    not; 2 an error, 3 an information); `given` finds them. `<name>-command`
    queries and locks it."""
    precollects = False
    given = None              # the --debug line of a PAM message (style, text)
    daemon_arguments = ()
    extra_env = {}
    PROMPTS, MESSAGES = (0, 1), (2, 3)

    def __init__(self, world, uid, user, x):
        super().__init__(world, uid, user)
        self.x = x
        self.home = Path(tempfile.mkdtemp(prefix=f"localauth-{self.name}-"))
        os.chown(self.home, uid, uid)
        self.log = self.home / f"{self.name}.log"
        self.answered = 0         # prompts answered

    def env(self):
        return dict(self.world.env(self.user), DISPLAY=self.x.display, HOME=str(self.home), XDG_RUNTIME_DIR=str(self.home),
                    GSETTINGS_BACKEND="memory", **self.extra_env)

    def bus(self):
        return (self.home / "bus").read_text().strip()

    def command(self, *args):
        return subprocess.run(self.world.argv(f"{self.name}-command", *args, uid=self.uid),
                              env=dict(self.env(), DBUS_SESSION_BUS_ADDRESS=self.bus()), capture_output=True, text=True,
                              timeout=STEP).stdout

    def answering(self):
        """Whether it answers on its bus yet."""
        return "The screensaver is" in self.command("--query")

    def start(self):
        with open(self.log, "w") as log:
            self.launch(session_bus(self.home) + [self.name, *self.daemon_arguments], self.env(), stdout=log,
                        stderr=subprocess.STDOUT)

        def answering():
            if self.proc.poll() is not None:
                return "exited"
            return (self.home / "bus").exists() and self.answering()
        if wait_for(answering, timeout=2 * STEP, what=f"{self.name} answering") == "exited":
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}) at start:\n"
                                 f"{self.log.read_text(errors='replace')[-2000:]}")
        self.command("--lock")
        wait_for(lambda: "is active" in self.command("--query"), what="the screen locked")
        return self

    def lines(self):
        """(style, text) of every PAM message the dialog was given."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            match = self.given.search(line)
            if match:
                found.append((int(match.group(1)), match.group(2)))
        return found

    @property
    def messages(self):
        return [text for style, text in self.lines() if style in self.MESSAGES]

    def prompts(self):
        return sum(style in self.PROMPTS for style, _ in self.lines())

    def submit(self, text):
        woken = [0.0]

        def prompt_pending():
            if self.prompts() > self.answered:
                return True
            if not self.pam_pids() and time.monotonic() - woken[0] > 1.5:
                self.x.xdotool("key", "shift")   # no dialog up: a key shows it
                woken[0] = time.monotonic()
            return False
        wait_for(prompt_pending, what=f"{self.name}'s prompt")
        time.sleep(0.3)           # the dialog takes keys once its entry is shown
        self.answered += 1
        self.x.type(text)

    def settle(self):
        wait_for(lambda: self.prompts() > self.answered or (not helper_pids() and not self.pam_pids())
                 or not self.locked, what="the attempt over")

    def unlocked(self, timeout=STEP):
        try:
            wait_for(lambda: "is inactive" in self.command("--query"), timeout=timeout, what="unlocked")
        except AssertionError:
            return False
        return True

    @property
    def locked(self):
        return "is active" in self.command("--query")

    def close(self):
        kill_tree(self.proc)
        shutil.rmtree(self.home, ignore_errors=True)


class MateScreensaver(DialogScreensaver):
    """mate-screensaver: the dialog is mate-screensaver-dialog."""
    name = "mate-screensaver"
    pam_process = "mate-screensaver-dialog"
    given = re.compile(r"Got message style (\d): '(.*)'$")
    daemon_arguments = ("--no-daemon", "--debug")

    def pam_pids(self):
        return [pid for pid in user_processes(self.uid) if self.pam_process in process_description(pid).split(" (parent")[0]]

    def windows(self):
        found = self.x.xdotool("search", "--classname", "mate-screensaver").stdout.split()
        return [window for window in found if window.isdigit()]

    def close(self):
        kill_tree(self.proc)
        # Its windows go when the X server has seen its connection close,
        # which may be after the process is gone: until then the next locker
        # on this display refuses to start ("mate-screensaver is already
        # running"). So wait for them, and have the X server drop a client
        # whose windows stay.
        try:
            wait_for(lambda: not self.windows(), timeout=5, what="mate-screensaver's windows gone")
        except AssertionError:
            for window in self.windows():
                subprocess.run(["xkill", "-id", window], env=self.x.env, capture_output=True, timeout=STEP)
            wait_for(lambda: not self.windows(), what="mate-screensaver's windows gone after xkill")
        shutil.rmtree(self.home, ignore_errors=True)


KSCREENLOCKER_GREET = Path("/usr/lib/x86_64-linux-gnu/libexec/kscreenlocker_greet")


class KScreenLocker(Locker):
    """Plasma 5.27's real greeter, `kscreenlocker_greet --testing`, with the
    Breeze look-and-feel of plasma-workspace on the Xvfb display and a
    session bus of its own. Its PAM (service kde) runs in a thread of the
    greeter as the user, so the module goes through the helper. A key press
    shows the lock screen and starts PAM; what is typed in the password box
    and Enter answers the prompt (an empty box answers empty: the finger).
    After a failure it waits out a 3-second grace lock and starts PAM again;
    in testing mode it exits 0 once unlocked. Its screen cannot be read
    here, so a prompt is known to be up when the helper waits for the
    greeter's answer."""
    name = "kscreenlocker"
    pam_process = "kscreenlocker_g"   # the comm, 15 characters
    precollects = False

    def __init__(self, world, uid, user, x):
        super().__init__(world, uid, user)
        self.x = x
        self.home = Path(tempfile.mkdtemp(prefix="localauth-kde-"))
        os.chown(self.home, uid, uid)
        os.chmod(self.home, 0o700)

    def start(self):
        env = dict(self.world.env(self.user), DISPLAY=self.x.display, HOME=str(self.home), XDG_RUNTIME_DIR=str(self.home),
                   QT_QPA_PLATFORM="xcb", QT_LOGGING_RULES="kscreenlocker_greet.debug=true")
        self.log = open(self.home / "greeter.log", "w")
        self.launch(session_bus(self.home) + [KSCREENLOCKER_GREET, "--testing"], env, stdout=self.log,
                    stderr=subprocess.STDOUT)
        wait_for(lambda: self.x.has_window("kscreenlocker_greet") or self.proc.poll() is not None,
                 what="the greeter's window")
        if self.proc.poll() is not None:
            raise AssertionError(f"kscreenlocker_greet exited {self.proc.returncode} at start:\n"
                                 f"{(self.home / 'greeter.log').read_text(errors='replace')[-2000:]}")
        return self

    def wait_for_prompt(self):
        """Until a prompt is up (the helper waits for the greeter's answer)."""
        def prompt_up():
            if helper_waiting_for_answer():
                return True
            if not helper_pids():
                self.x.xdotool("key", "shift")    # the lock screen shows itself and starts PAM
            return False
        try:
            wait_for(prompt_up, timeout=2 * STEP, what="the greeter's prompt")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.report()}") from None

    def submit(self, text):
        """Types `text` in the password box and Enter (an empty box: Enter
        alone) once a prompt is up; returns when the helper has read it."""
        self.wait_for_prompt()
        helper = helper_waiting_for_answer()
        before = bytes_read(helper)
        # The answer is in when the helper has read it (until then the
        # attempt would look as if it still waited for this answer).
        def answer_read():
            now = bytes_read(helper)
            return before is None or now is None or now > before
        # Keys typed while the greeter is still in its grace period after a
        # failed attempt (about 3 s) are dropped. The helper is still blocked
        # on this same prompt then, so typing the answer again, into a
        # cleared field, is the same answer to the same prompt, never a
        # second attempt: the helper has read nothing.
        for tries_left in (2, 1, 0):
            self.x.xdotool("key", "shift")        # the lock screen hides itself after 10 s untouched
            time.sleep(0.3)
            self.x.xdotool("key", "ctrl+a", "BackSpace")
            self.x.type(text)
            try:
                wait_for(answer_read, timeout=5.0 if tries_left else STEP,
                         what="the helper reading the greeter's answer")
                return
            except AssertionError as error:
                if not tries_left or helper_waiting_for_answer() != helper:
                    raise AssertionError(f"{error}\n{self.report()}") from None

    def settle(self):
        def over():
            if helper_waiting_for_answer() or self.proc.poll() is not None:
                return True
            return not helper_pids() and not any(in_sleep(f"{pid}/task/{task}") for pid in self.pam_pids()
                                                 for task in tasks(pid))
        wait_for(over, what="the attempt over")
        time.sleep(0.4)

    def report(self):
        self.log.flush()
        return super().report() + "\n" + (self.home / "greeter.log").read_text(errors="replace")[-3000:]

    def close(self):
        super().close()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def tasks(pid):
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


class CinnamonScreensaver(DialogScreensaver):
    """cinnamon-screensaver: the dialog's PAM runs in
    cinnamon-screensaver-pam-helper (service cinnamon-screensaver). Of what
    that helper is given it passes prompts and information on to the screen
    ("CS_PAM_AUTH_SET_PROMPT_<text>_", "CS_PAM_AUTH_SET_INFO_<text>_" in the
    log), never an error message."""
    name = "cinnamon-screensaver"
    given = re.compile(r"cinnamon-screensaver-pam-helper: Got message style (\d): '(.*)'$")
    daemon_arguments = ("--debug", "--hold")
    # No accessibility bus: its lookup stalls each command for seconds.
    extra_env = {"NO_AT_BRIDGE": "1"}

    def answering(self):
        """Its command-line client hangs when the service is not on the bus
        yet, so the bus is asked first."""
        answer = subprocess.run(self.world.argv("dbus-send", f"--bus={self.bus()}", "--print-reply", "--dest=org.freedesktop.DBus",
                                                "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                                "string:org.cinnamon.ScreenSaver", uid=self.uid),
                                env=self.env(), capture_output=True, text=True, timeout=STEP).stdout
        return "boolean true" in answer

    def pam_pids(self):
        return [pid for pid in user_processes(self.uid)
                if process_description(pid).split(" ")[0].endswith("/cinnamon-screensaver-pam-helper")]
