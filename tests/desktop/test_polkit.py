"""polkit end to end: the real polkitd (122 on Debian 12, 126 on 13: the
setuid polkit-agent-helper-1; 128 on 14: the helper started per
connection to its socket, in its sandbox, tests/support/polkit_socket.py),
`pkexec` and the text agent `pkttyagent`, with the stack pam-auth-update
writes from the package's profile (the module, then pam_unix), against the
fprintd rig.

The world (tests/support/private_world.py) binds the rig's directory over /run/dbus,
so every program in it, polkitd included, finds the rig's bus at the system
bus's address. No polkit stand-in runs: the real polkitd owns the name,
started inside the world as root (it drops to its user, polkitd), reading
the host's actions and rules (Debian's: members of group sudo are the
administrators). fprintd asks the same polkitd whether the module, running
as root inside polkit-agent-helper-1, may verify.

Two tmux windows play the desktop: a shell of the user, from which `pkexec`
and `sudo` run, and `pkttyagent --process <that shell>`, polkit's text
agent, which shows what the helper sends and types the answers. Whatever a
GUI agent shows comes from the same helper through the same lines
(PAM_PROMPT_ECHO_OFF, PAM_TEXT_INFO, PAM_ERROR_MSG), so the transcript here
is what a dialog shows, line by line.

polkit-agent-helper-1 runs PAM with effective uid 0 and no PAM_TTY: the
module runs in-process in prompt mode. pkttyagent reads the answer to a
prompt synchronously from the terminal, so a touch cannot end its prompt:
the user presses Enter to use the reader (docs/DESIGN.md, "polkit").

An agent that takes the helper's verdict while its prompt is up gets touch
or type: the password prompt stays open while the reader waits. GNOME
Shell's dialog is such an agent, and it cannot run in the suite: its part
is played by tests/support/programs/dialogagent.c, an agent on libpolkit-agent-1 that
behaves as GNOME Shell 43's dialog does (OK needs text, so an empty answer
is never sent; a message clears the entry; a failed session starts a new
one), built under GNOME Shell's program name, which is all the module sees
of its agent. It registers for the user's shell as pkttyagent does. The
real lxpolkit, a graphical agent of Debian 12, is driven under Xvfb with
xdotool, in a logind session (it registers for its session), with
POLKIT_DEBUG showing what its session read from the helper.

logind is mocked: python-dbusmock's logind template on the rig's bus for
the module's seat rules, and sd-login's files (sessions, a user's display
session) in the world for polkitd; the processes are put in the cgroups
sd-login reads (tests/support/logind_mock.py).
"""
import os
import re
import shutil
import signal
import subprocess

import pytest

from fprint_rig import BusMonitor
from desktop import TmuxDesk
from pamenv import BUILD
from polkit_socket import AgentHelperSocket, socket_activated
from lockers import Xvfb, kill_leftovers, processes_named, wait_for
from sentences import LOCKED
from worlds import shared_rig, shared_world

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, setuid programs)"),
              pytest.mark.skipif(not (shutil.which("pkexec") and shutil.which("pkttyagent")
                                      and os.path.exists("/usr/lib/polkit-1/polkitd") and shutil.which("tmux")),
                                 reason="polkit (polkitd, pkexec) or tmux is not installed: run make deps")]

USER, UID, PASSWORD = "pkuser", 4320, "pk-right-pw-1"
OTHER, OTHER_UID, OTHER_PASSWORD = "pkother", 4321, "pk-other-pw-2"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
PROMPT = "Password, or press Enter to use your fingerprint:"
PASSWORD_PROMPT = "Enter Password:"
POLKITD = "/usr/lib/polkit-1/polkitd"
# tests/support/programs/dialogagent.c: GNOME Shell's dialog, as the module sees it.
GNOME_LIKE_AGENT = BUILD / "dialogagent" / "gnome-shell"
DIALOG_PROMPT = "REQUEST Password or swipe finger:"   # the virtual reader is a swipe sensor


def run_polkitd(world):
    """The world's polkitd on the rig's bus, for the file's tests (the rig's
    fprintd asks it too: the finger is enrolled once it runs)."""
    # The user is an administrator (group sudo); the other user is not, so
    # polkit asks the other user for an administrator's password.
    world.group.write_text("".join(line + ("," if not line.endswith(":") else "") + USER + "\n"
                                   if line.startswith("sudo:") else line + "\n"
                                   for line in world.group.read_text().splitlines()))
    world.write_profile_common_auth()
    shutil.copy("/etc/pam.d/sudo", world.pamd / "sudo")
    log = open(world.base / "polkitd.log", "w")
    # polkitd 127 and later log the agents' registrations only from level
    # info up (the tests wait for them); 122 logs them always.
    options = subprocess.run([POLKITD, "--help"], capture_output=True, text=True).stdout
    levels = ["--log-level=info"] if "--log-level" in options else []
    polkitd = subprocess.Popen(world.argv(POLKITD, "--no-debug", *levels), env=world.env(), stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    # polkit 127 and later: the agent helper is started per connection to
    # its socket, in its sandbox (tests/support/polkit_socket.py).
    listener = None
    try:
        wait_for(lambda: world.rig.ctl.has_owner("org.freedesktop.PolicyKit1") or polkitd.poll() is not None,
                 what="polkitd on the bus")
        assert polkitd.poll() is None, (world.base / "polkitd.log").read_text()
        if socket_activated():
            listener = AgentHelperSocket(world)
        yield
    finally:
        if listener:
            listener.close()
        polkitd.kill()
        polkitd.wait()
        log.close()


rig = shared_rig(polkit_stand_in=False, bus_users={USER: UID, OTHER: OTHER_UID})
world = shared_world("polkit", users={USER: (UID, PASSWORD), OTHER: (OTHER_UID, OTHER_PASSWORD)}, sessions=True,
                     prepare=run_polkitd, enroll=USER)


class Desktop(TmuxDesk):
    """The user's shell (window 0) and polkit's text agent for it (window
    "agent")."""

    def start(self, remote_session=None, agent="pkttyagent"):
        self.agent_program = str(agent) if isinstance(agent, (str, os.PathLike)) else agent[-1]
        mark = self.world.syslog.mark()
        self.open(0, self.command("sh", "-c", "echo SHELL=$$; exec sh", session=remote_session))
        wait_for(lambda: any(line.startswith("SHELL=") for line in self.pane(0)), what="the user's shell")
        pid = next(line for line in self.pane(0) if line.startswith("SHELL=")).split("=")[1]
        # A program registers for the shell (--process); an argv as given,
        # for its session.
        argv = [str(agent), "--process", pid] if isinstance(agent, (str, os.PathLike)) else list(agent)
        self.open("agent", self.command(*argv, session=remote_session)
                  + "; echo AGENT-EXIT=$?; sleep 600")
        try:
            wait_for(lambda: any("Registered Authentication Agent" in line for line in self.world.syslog.since(mark)),
                     what="the agent registered with polkitd")
        except AssertionError as error:
            raise AssertionError(f"{error}; the agent shows: {self.agent()[-10:]}; syslog: {self.world.syslog.since(mark)[-8:]}; polkitd: {(self.world.base / 'polkitd.log').read_text()[-1500:]}") from None
        return self

    def agent(self):
        return self.pane("agent")

    def pkexec(self):
        """Starts `pkexec id -u` and waits for the agent's request."""
        request = {"pkttyagent": "==== AUTHENTICATING FOR org.freedesktop.policykit.exec",
                   str(GNOME_LIKE_AGENT): "DIALOG org.freedesktop.policykit.exec"}.get(self.agent_program, "emitting ::request")
        before = self.count("agent", request)
        run = self.run("pkexec --disable-internal-agent /usr/bin/id -u")
        self.wait_text("agent", request, before + 1)
        return run

    def wait_prompt(self, prompt, occurrence):
        """Waits until the agent shows `prompt` for the `occurrence`-th time."""
        self.wait_text("agent", prompt, occurrence)

    def answer(self, text):
        self.keys("agent", text)

    def type(self, text, ok=True):
        """The GNOME-like agent: `text` typed into the entry, then OK."""
        if text:
            self.keys("agent", f"type {text}")
        if ok:
            self.keys("agent", "ok")


@pytest.fixture
def desktop(world, rig):
    world.clear_state()
    world.password_entered(USER)   # the first password of this boot: the finger is enough now
    started = []

    def start(uid=UID, user=USER, remote_session=None, agent="pkttyagent"):
        started.append(Desktop(world, uid, user))
        return started[-1].start(remote_session, agent)
    yield start
    for desk in started:
        desk.close()
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running
    left = kill_leftovers(UID, OTHER_UID)
    assert not left, f"processes of the test users outlived the test: {left}"
    rig.wait_until_claimable(USER, timeout=10)


def test_finger_authorizes_pkexec(desktop, world, rig):
    desk = desktop()
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 1)
    rig.feed([MATCH])
    desk.answer("")
    rig.fed()
    assert desk.exit_status(run) == 0
    assert any("==== AUTHENTICATION COMPLETE ====" in line for line in desk.agent())
    assert any(re.search(r"polkit-1 needs to confirm your identity \(pkuser\)\. .*finger", line) for line in desk.agent())
    assert world.counts(UID) == (0, 0)


def test_typed_password_authorizes_without_the_reader(desktop, world, rig):
    desk = desktop()
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 1)
    desk.answer(PASSWORD)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)
    assert not any("finger" in line.lower() for line in desk.agent()[desk.agent().index(PROMPT) + 1:])


def test_three_misses_then_the_password(desktop, world, rig):
    desk = desktop()
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 1)
    rig.feed([MISS] * 3)
    desk.answer("")
    rig.fed()
    desk.wait_prompt(PASSWORD_PROMPT, 1)
    assert world.counts(UID) == (3, 0)
    desk.answer(PASSWORD)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)
    shown = desk.agent()
    misses = [line for line in shown if "Fingerprint not recognized" in line]
    assert misses == ["Error: Fingerprint not recognized. Try again."] * 2 + ["Error: Fingerprint not recognized."], shown


def test_five_misses_across_polkit_and_sudo_lock_until_a_polkit_password(desktop, world, rig):
    """Three misses at a polkit prompt and two at sudo's count in one
    record: the fingerprint is locked for both, the reader is not used
    again, and the password typed in the polkit dialog lifts the lock."""
    desk = desktop()
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 1)
    rig.feed([MISS] * 3)
    desk.answer("")
    rig.fed()
    desk.wait_prompt(PASSWORD_PROMPT, 1)
    desk.answer("")                       # an empty password: a cancel, not a wrong password
    assert desk.exit_status(run) != 0
    assert world.counts(UID) == (3, 0)

    # sudo on the same terminal (terminal mode: the finger first).
    rig.feed([MISS] * 2)
    sudo = desk.run("sudo -k /usr/bin/id -u")
    rig.fed()
    wait_for(lambda: any(PASSWORD_PROMPT in line for line in desk.pane(0)), what="sudo's password prompt")
    assert world.counts(UID) == (5, 0)
    assert any(LOCKED in line for line in desk.pane(0)), desk.pane(0)
    desk.ctrl_c("0")
    assert desk.exit_status(sudo) != 0
    assert world.counts(UID) == (5, 0)

    # Locked: polkit's prompt says so and Enter does not reach the reader.
    run = desk.pkexec()
    desk.wait_prompt(LOCKED, 1)
    assert world.counts(UID) == (5, 0)
    desk.wait_prompt(PASSWORD_PROMPT, 2)
    desk.answer(PASSWORD)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)


def test_password_backoff(desktop, world):
    desk = desktop()
    for attempt in range(5):
        run = desk.pkexec()
        desk.wait_prompt(PROMPT, attempt + 1)
        desk.answer(f"wrong-{attempt}")
        assert desk.exit_status(run) != 0
        assert world.counts(UID) == (0, attempt + 1)
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 6)
    desk.answer(PASSWORD)                      # refused unchecked: the wait is on
    desk.wait_prompt("Too many wrong passwords. Try again in ", 1)
    assert desk.exit_status(run) != 0
    assert world.counts(UID) == (0, 5)
    assert world.record(UID).backoff_ms > 0


def test_another_users_admin_password_is_out_of_scope(desktop, world, rig):
    """A user who is not an administrator is asked for the administrator's
    password: the module steps aside (the caller is not the target), the
    password line asks, and the administrator's counts stay untouched."""
    desk = desktop(uid=OTHER_UID, user=OTHER)
    run = desk.pkexec()
    desk.wait_prompt("Password:", 1)
    assert not any("finger" in line.lower() for line in desk.agent())
    assert any(f"Authenticating as: {USER}" in line for line in desk.agent())
    desk.answer(PASSWORD)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0) and world.state_untouched()


def test_remote_session_gets_the_password_only(desktop, world, rig, logind):
    """An agent in a remote session (an ssh login) never reaches the
    reader: the password is asked at once. Here logind is on the bus only
    (sd-login's files under /run/systemd are the host's), so it is the
    reader's own check (only the active local session) that sends the
    dialog to the password, with the reason shown; on a machine where
    sd-login also calls the session remote the module steps aside before
    that and the password line asks."""
    session = logind.add_session("pk1", uid=UID, name=USER)
    logind.set_remote("pk1", True)
    desk = desktop(remote_session=session)
    run = desk.pkexec()
    desk.wait_prompt(PASSWORD_PROMPT, 1)
    shown = desk.agent()
    assert "Error: The fingerprint reader is used only from your active session at this computer." in shown, shown
    assert not any("Swipe your finger" in line or "Enter to use" in line for line in shown), shown
    desk.answer(PASSWORD)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)


# ---- touch or type: an agent that takes the verdict while its prompt is up --

@pytest.fixture
def dialog(desktop):
    """The user's shell and the GNOME-like agent (tests/support/programs/dialogagent.c)."""
    if not GNOME_LIKE_AGENT.exists():
        pytest.skip("the stand-in agent is not built: run make test-artifacts")
    return desktop(agent=GNOME_LIKE_AGENT)


def dialog_lines(desk, since=0):
    """What the GNOME-like agent showed, from its `since`-th line."""
    return [line for line in desk.agent() if line.split(" ")[0].isupper()][since:]


def helpers_gone():
    """No polkit-agent-helper-1 left: the setuid one (polkit 126 and
    earlier) runs with the user's real uid, the socket-activated one as
    root."""
    owners = (UID, 0) if socket_activated() else (UID,)
    # By its comm, not its command line: the socket's listener carries the
    # helper's path as an argument.
    return not any(processes_named("polkit-agent-he", owner) for owner in owners)


def test_dialog_a_touch_completes_it_with_nothing_typed(dialog, world, rig):
    """GNOME Shell's OK needs text, so a prompt that waits for an empty
    answer never reaches the reader there. The prompt stays open while the
    reader waits, a touch completes the dialog, and nothing but the prompt
    is shown (a message would clear what the person is typing)."""
    rig.feed([MATCH])
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        bus.wait_for("VerifyStart")            # the reader waits while the prompt is up
        rig.fed()
    dialog.wait_text("agent", "COMPLETED TRUE")
    assert dialog.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)
    shown = dialog_lines(dialog)
    assert [line.split(" ")[0] for line in shown] == ["REGISTERED", "DIALOG", "MESSAGE", "REQUEST", "COMPLETED", "DIALOG-CLOSED"], shown
    wait_for(helpers_gone, what="the agent helper gone")


def test_dialog_a_password_typed_while_the_reader_waits(dialog, world, rig):
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        bus.wait_for("VerifyStart")
        dialog.type(PASSWORD)
        dialog.wait_text("agent", "COMPLETED TRUE")
        assert dialog.exit_status(run) == 0
        calls = [member for member, _ in bus.close() if member in ("Claim", "VerifyStart", "VerifyStop", "Release")]
    assert calls == ["Claim", "VerifyStart", "VerifyStop", "Release"]
    # The password is the attempt; the reader's, which judged no finger, is given back.
    assert world.counts(UID) == (0, 0)
    rig.wait_until_claimable(USER, timeout=10)


def test_dialog_an_empty_ok_is_ignored_and_the_reader_still_waits(dialog, world, rig):
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        bus.wait_for("VerifyStart")
        dialog.type("")
        dialog.wait_text("agent", "OK-IGNORED the entry is empty")
        rig.feed([MATCH], on_cue=False)
        rig.fed()
    assert dialog.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)


def test_dialog_a_miss_says_nothing_and_keeps_what_is_typed(dialog, world, rig):
    """A miss while the person types: no message reaches the dialog (GNOME
    Shell would clear the entry), the miss counts, and the password typed
    around it completes the dialog."""
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        bus.wait_for("VerifyStart")
        dialog.type(PASSWORD[:4], ok=False)
        rig.feed([MISS], on_cue=False)
        rig.fed()
    # The miss counted, and the next attempt charged before it is judged.
    wait_for(lambda: world.counts(UID) == (2, 0), what="the miss counted")
    dialog.type(PASSWORD[4:])
    dialog.wait_text("agent", "COMPLETED TRUE")
    assert dialog.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)
    shown = dialog_lines(dialog)
    assert not any(line.startswith(("INFO", "ERROR", "ENTRY-CLEARED")) for line in shown), shown


def test_dialog_a_wrong_password_fails_that_session_and_the_next_takes_a_touch(dialog, world, rig):
    """A wrong password is charged and fails the helper's session; the
    agent starts another (as GNOME Shell does), whose prompt again stays
    open while the reader waits."""
    mark = world.syslog.mark()
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        bus.wait_for("VerifyStart")
    rig.feed([MATCH])                            # for the next session's reader
    dialog.type("wrong-password")
    dialog.wait_text("agent", "COMPLETED FALSE")
    dialog.wait_text("agent", DIALOG_PROMPT, 2)
    rig.fed()
    assert any("wrong passcode for pkuser" in line for line in world.syslog.since(mark))
    dialog.wait_text("agent", "COMPLETED TRUE")
    assert dialog.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)


def test_dialog_the_readers_tries_used_up_the_open_prompt_takes_the_password(dialog, world, rig):
    rig.feed([MISS] * 3)
    run = dialog.pkexec()
    dialog.wait_text("agent", DIALOG_PROMPT)
    rig.fed()
    wait_for(lambda: world.counts(UID) == (3, 0), what="three misses counted")
    rig.wait_until_claimable(USER, timeout=10)     # the reader was let go; the prompt is still up
    assert dialog.count("agent", "REQUEST") == 1
    dialog.type(PASSWORD)
    dialog.wait_text("agent", "COMPLETED TRUE")
    assert dialog.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)
    assert not any(line.startswith(("INFO", "ERROR")) for line in dialog_lines(dialog))


def test_dialog_cancel_while_the_reader_waits(dialog, world, rig):
    """Cancel dismisses the dialog: pkexec is refused, nothing is charged,
    the reader is let go and the helper is gone at once."""
    run = dialog.pkexec()
    dialog.wait_text("agent", DIALOG_PROMPT)
    dialog.keys("agent", "cancel")
    dialog.wait_text("agent", "DIALOG-CLOSED")
    assert dialog.exit_status(run) != 0
    wait_for(helpers_gone, what="the agent helper gone")
    rig.wait_until_claimable(USER, timeout=10)
    assert world.counts(UID) == (0, 0)


def test_dialog_cancel_with_fprintd_hung_ends_the_helper_at_its_deadline(dialog, world, rig):
    """The agent waits for the helper to end after Cancel (GNOME Shell's
    whole shell meanwhile): with fprintd hung, the helper does not wait for
    it to prove no finger was judged, but ends within its short deadline,
    with the attempt still counted (it cannot be proved unjudged).

    polkit 127 and later: the agent cannot signal a helper that runs as
    root; it closes the connection and waits for nothing. The helper reads
    the end of its input as the cancel and ends once fprintd's answers to
    the stop are overdue (5 s) and its release call has timed out (5 s
    more), the attempt counted all the same. The dialog is long closed by
    then; only the hung reader waits."""
    with BusMonitor(rig) as bus:
        run = dialog.pkexec()
        dialog.wait_text("agent", DIALOG_PROMPT)
        # fprintd sends this signal as it answers VerifyStart: stopped any
        # earlier, it would leave the helper inside that call (a CI run
        # once stopped it between the call and its answer), where no
        # deadline of the wait applies yet.
        bus.wait_for("VerifyFingerSelected")
    os.kill(rig.fprintd_pid, signal.SIGSTOP)
    try:
        dialog.keys("agent", "cancel")
        # fprintd's calls time out after 5 s each; the helper's deadline is
        # 0.5 s (socket-activated: the stop's and the release's 5 s each).
        wait_for(helpers_gone, timeout=13 if socket_activated() else 4, what="the agent helper gone while fprintd is hung")
        dialog.wait_text("agent", "DIALOG-CLOSED", timeout=4)
    finally:
        os.kill(rig.fprintd_pid, signal.SIGCONT)
    assert dialog.exit_status(run) != 0
    assert world.counts(UID) == (1, 0)
    rig.wait_until_claimable(USER, timeout=15)


def test_pkttyagent_keeps_the_prompt_mode(desktop, world, rig):
    """pkttyagent reads its prompt's answer until Enter and reads the
    verdict only after it: its prompt asks the password or Enter, and the
    reader does not wait until Enter."""
    desk = desktop()
    with BusMonitor(rig) as bus:
        run = desk.pkexec()
        desk.wait_prompt(PROMPT, 1)
        desk.answer(PASSWORD)
        assert desk.exit_status(run) == 0
        calls = [member for member, _ in bus.close() if member in ("Claim", "VerifyStart")]
    assert calls == []


# ---- lxpolkit, a real graphical agent of Debian 12 ---------------------------

@pytest.fixture
def lxpolkit_in(desktop):
    """Starts lxpolkit on Xvfb, with the user's shell, in `place` (a logind
    session or the user's manager: polkitd finds the agent by where it
    runs). -> the desktop."""
    if not shutil.which("lxpolkit"):
        pytest.skip("lxpolkit is not installed: run make deps")
    x = Xvfb(":58")

    def start(place):
        desk = desktop(remote_session=place,
                       # No session bus: GIO would start one (dbus-launch), whose socket outlives the test.
                       agent=("env", f"DISPLAY={x.display}", "NO_AT_BRIDGE=1", "POLKIT_DEBUG=1",
                              "DBUS_SESSION_BUS_ADDRESS=disabled:", "lxpolkit"))
        desk.x = x
        return desk
    try:
        yield start
    finally:
        x.close()


@pytest.fixture
def lxpolkit(lxpolkit_in, logind, world):
    """lxpolkit in the user's logind session, with the user's shell."""
    session = logind.add_session("pk2", uid=UID, name=USER)
    world.add_session("pk2", UID, USER)      # polkitd asks sd-login whose session an agent's is
    return lxpolkit_in(session)


def lxpolkit_dialog_up(desk):
    """lxpolkit's dialog is mapped (its other windows never are)."""
    return desk.x.xdotool("search", "--onlyvisible", "--class", "lxpolkit").returncode == 0


def lxpolkit_asks(desk, bus):
    """pkexec, until lxpolkit's dialog shows the prompt and the reader
    waits. -> the run."""
    run = desk.pkexec()
    desk.wait_text("agent", "Password or swipe finger:")
    wait_for(lambda: lxpolkit_dialog_up(desk), what="lxpolkit's dialog")
    bus.wait_for("VerifyStart")
    return run


def lxpolkit_type(desk, text):
    """Types `text` and Enter into lxpolkit's dialog."""
    window = desk.x.xdotool("search", "--onlyvisible", "--class", "lxpolkit").stdout.split()[-1]
    desk.x.xdotool("windowfocus", "--sync", window)
    desk.x.type(text)


def lxpolkit_touch_closes_the_dialog(desk, world, rig):
    """pkexec, a touch while the reader waits: authorized, the dialog
    closed, nothing counted."""
    with BusMonitor(rig) as bus:
        run = lxpolkit_asks(desk, bus)
        rig.feed([MATCH], on_cue=False)
        rig.fed()
    desk.wait_text("agent", "emitting ::completed(TRUE)")
    assert desk.exit_status(run) == 0
    wait_for(lambda: not lxpolkit_dialog_up(desk), what="the dialog closed")
    assert world.counts(UID) == (0, 0)


def test_lxpolkit_a_touch_closes_the_dialog(lxpolkit, world, rig):
    lxpolkit_touch_closes_the_dialog(lxpolkit, world, rig)
    assert not any("show-info" in line or "show-error" in line for line in lxpolkit.agent())


def test_lxpolkit_a_password_typed_while_the_reader_waits(lxpolkit, world, rig):
    with BusMonitor(rig) as bus:
        run = lxpolkit_asks(lxpolkit, bus)
        lxpolkit_type(lxpolkit, PASSWORD)
        lxpolkit.wait_text("agent", "emitting ::completed(TRUE)")
        assert lxpolkit.exit_status(run) == 0
    wait_for(lambda: not lxpolkit_dialog_up(lxpolkit), what="the dialog closed")
    assert world.counts(UID) == (0, 0)
    rig.wait_until_claimable(USER, timeout=10)


def test_an_agent_of_the_users_own_manager_gets_the_finger_unless_an_ssh_login_is_open(lxpolkit_in, logind, world, rig):
    """GNOME Shell and Plasma's polkit agent run under systemd's user
    manager (user@UID.service) in the default sessions, in no login session,
    and so do the terminals pkexec is typed in. Reproduced: lxpolkit and the
    user's shell in that place, polkitd taking them for the user's display
    session (sd-login's user file) as it does; the helper stands in that
    session. With an ssh login of the user open, the dialog asks the
    password alone."""
    logind.add_session("pk3", uid=UID, name=USER)
    world.add_session("pk3", UID, USER)
    world.add_display(UID, "pk3")
    desk = lxpolkit_in(logind.add_user_manager(UID))
    lxpolkit_touch_closes_the_dialog(desk, world, rig)
    rig.wait_until_claimable(USER, timeout=10)
    # An ssh login of the user: the same dialog, the password alone.
    logind.add_session("pk4", uid=UID, name=USER, active=False)
    logind.set_remote("pk4", True)
    run = desk.run("pkexec --disable-internal-agent /usr/bin/id -u")
    # The reason first: lxpolkit shows an error in a message box of its
    # own, which Enter closes; then the prompt asks the password alone.
    desk.wait_text("agent", "::show-error('The fingerprint reader is used only from your active session at this computer.')")
    wait_for(lambda: lxpolkit_dialog_up(desk), what="lxpolkit's message box")
    desk.x.xdotool("key", "Return")
    desk.wait_text("agent", f"emitting ::request('{PASSWORD_PROMPT}")
    wait_for(lambda: lxpolkit_dialog_up(desk), what="lxpolkit's dialog")
    lxpolkit_type(desk, PASSWORD)
    desk.wait_text("agent", "emitting ::completed(TRUE)", 2)
    assert desk.exit_status(run) == 0
    assert world.counts(UID) == (0, 0)


# ---- polkit 127 and later: the helper started per connection, as root ------

@pytest.mark.skipif(not socket_activated(), reason="polkit 127 and later (Debian 14: make test-releases)")
def test_a_peer_gone_before_the_stack_runs_stands_for_nobody(world, rig):
    """A client of the socket that names the user and exits at once: the
    helper, started for its connection, runs the stack after the peer is
    gone, so nothing tells who asked (a pid alone may name another process
    by then). The module steps aside, the password line meets a closed
    connection, and nothing is charged. (Here the gone peer's /proc entry
    is missing too; a pid taken over by another process, which only the
    pidfd from the kernel catches, cannot be arranged on demand.)"""
    world.clear_state()
    world.password_entered(USER)
    world.write_config(["debug"])
    mark = world.syslog.mark()
    try:
        client = ("import socket; s = socket.socket(socket.AF_UNIX); s.connect('/run/polkit/agent-helper.socket'); "
                  f"s.sendall(b'{USER}\\n1-not-a-cookie\\n')")
        subprocess.run(world.argv("/usr/bin/python3", "-c", client, uid=UID), env=world.env(USER), check=True, timeout=30)
        wait_for(lambda: any("pam_localauth(polkit-1:auth): out of scope" in line for line in world.syslog.since(mark)),
                 what="the module stepping aside for the gone peer")
        wait_for(helpers_gone, what="the helper gone")
    finally:
        world.write_config([])
    assert world.counts(UID) == (0, 0)
    assert not any("fingerprint" in line for line in world.syslog.since(mark)), world.syslog.since(mark)
