"""polkit end to end: the real polkitd 122, the real setuid
polkit-agent-helper-1, `pkexec` and the text agent `pkttyagent`, with the
stack pam-auth-update writes from the package's profile (the module, then
pam_unix), against the fprintd rig.

The world (tests/private_world.py) binds the rig's directory over /run/dbus,
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
"""
import os
import re
import shutil
import subprocess

import pytest

from fprint_rig import FprintRig, RigError
from desktop import TmuxDesk
from lockers import process_description, user_processes, wait_for
from private_world import PrivateWorld

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
LOCKED = "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password."
POLKITD = "/usr/lib/polkit-1/polkitd"


@pytest.fixture(scope="module")
def rig():
    with FprintRig(polkit_stand_in=False, bus_users={USER: UID, OTHER: OTHER_UID}) as rig:
        yield rig


@pytest.fixture(scope="module")
def world(rig, tmp_path_factory):
    base = tmp_path_factory.mktemp("polkit")
    os.chmod(base, 0o755)
    world = PrivateWorld(base, rig, users={USER: (UID, PASSWORD), OTHER: (OTHER_UID, OTHER_PASSWORD)})
    # The user is an administrator (group sudo); the other user is not, so
    # polkit asks the other user for an administrator's password.
    world.group.write_text("".join(line + ("," if not line.endswith(":") else "") + USER + "\n"
                                   if line.startswith("sudo:") else line + "\n"
                                   for line in world.group.read_text().splitlines()))
    world.write_profile_common_auth()
    shutil.copy("/etc/pam.d/sudo", world.pamd / "sudo")
    log = open(base / "polkitd.log", "w")
    polkitd = subprocess.Popen(world.argv(POLKITD, "--no-debug"), env=world.env(), stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: rig.ctl.has_owner("org.freedesktop.PolicyKit1") or polkitd.poll() is not None,
                 what="polkitd on the bus")
        assert polkitd.poll() is None, (base / "polkitd.log").read_text()
        rig.enroll(USER)
        yield world
    finally:
        polkitd.kill()
        polkitd.wait()
        log.close()
        world.close()


class Desktop(TmuxDesk):
    """The user's shell (window 0) and polkit's text agent for it (window
    "agent")."""

    def start(self, remote_session=None):
        mark = self.world.syslog.mark()
        self.open(0, self.command("sh", "-c", "echo SHELL=$$; exec sh", session=remote_session))
        wait_for(lambda: any(line.startswith("SHELL=") for line in self.pane(0)), what="the user's shell")
        pid = next(line for line in self.pane(0) if line.startswith("SHELL=")).split("=")[1]
        self.open("agent", self.command("pkttyagent", "--process", pid, session=remote_session)
                  + "; echo AGENT-EXIT=$?; sleep 600")
        wait_for(lambda: any("Registered Authentication Agent" in line for line in self.world.syslog.since(mark)),
                 what="pkttyagent registered with polkitd")
        return self

    def agent(self):
        return self.pane("agent")

    def pkexec(self):
        """Starts `pkexec id -u` and waits for the agent's request."""
        request = "==== AUTHENTICATING FOR org.freedesktop.policykit.exec"
        before = self.count("agent", request)
        run = self.run("pkexec --disable-internal-agent /usr/bin/id -u")
        self.wait_text("agent", request, before + 1)
        return run

    def wait_prompt(self, prompt, occurrence):
        """Waits until the agent shows `prompt` for the `occurrence`-th time."""
        self.wait_text("agent", prompt, occurrence)

    def answer(self, text):
        self.keys("agent", text)


@pytest.fixture
def desktop(world, rig):
    world.clear_state()
    world.password_entered(USER)   # the first password of this boot: the finger is enough now
    started = []

    def start(uid=UID, user=USER, remote_session=None):
        started.append(Desktop(world, uid, user))
        return started[-1].start(remote_session)
    yield start
    for desk in started:
        desk.close()
    try:
        rig.feed_wait(timeout=1)
    except RigError:
        pass
    for uid in (UID, OTHER_UID):
        left = {pid: process_description(pid) for pid in user_processes(uid)}
        for pid in left:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        assert not left, f"processes of the test user outlived the test: {left}"
    rig.wait_until_claimable(USER, timeout=10)


def fed(rig):
    report = rig.feed_wait(timeout=30)
    assert report.ok, report


def test_finger_authorizes_pkexec(desktop, world, rig):
    desk = desktop()
    run = desk.pkexec()
    desk.wait_prompt(PROMPT, 1)
    rig.feed([MATCH])
    desk.answer("")
    fed(rig)
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
    fed(rig)
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
    fed(rig)
    desk.wait_prompt(PASSWORD_PROMPT, 1)
    desk.answer("")                       # an empty password: a cancel, not a wrong password
    assert desk.exit_status(run) != 0
    assert world.counts(UID) == (3, 0)

    # sudo on the same terminal (terminal mode: the finger first).
    rig.feed([MISS] * 2)
    sudo = desk.run("sudo -k /usr/bin/id -u")
    fed(rig)
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
