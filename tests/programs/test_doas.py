"""doas end to end: the real opendoas 6.8 (setuid root, service doas, which
includes common-auth) in a terminal, with the stack pam-auth-update writes
from the package's profile, against the fprintd rig.

doas sets PAM_TTY to its terminal and runs PAM as root with the user as
real uid: the module runs in-process in terminal mode, as for sudo. The
world (tests/support/private_world.py) adds /etc/doas.conf through an overlay:
`permit USER as root`, so every run asks (no `persist`).
"""
import os
import shutil

import pytest

from desktop import TmuxDesk
from lockers import kill_leftovers, wait_for
from sentences import LOCKED, NO_MATCH_TOUCH_OR_TYPE as MISS_OFFER
from worlds import shared_rig, shared_world

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, setuid programs)"),
              pytest.mark.skipif(not (shutil.which("doas") and shutil.which("tmux")),
                                 reason="opendoas or tmux is not installed: run make deps")]

USER, UID, PASSWORD = "doasuser", 4330, "doas-right-pw-1"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
# Touch or type: the module reads doas's terminal while the reader waits.
INSTRUCTION = f"doas needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader or type your password:"
PASSWORD_PROMPT = "Enter Password:"


def write_doas_stack(world):
    world.write_profile_common_auth()
    shutil.copy("/etc/pam.d/doas", world.pamd / "doas")


rig = shared_rig(enroll=USER)
world = shared_world("doas", users={USER: (UID, PASSWORD)}, etc_files={"doas.conf": f"permit {USER} as root\n"},
                     prepare=write_doas_stack)


@pytest.fixture
def desk(world, rig):
    world.clear_state()
    world.password_entered()   # the first password of this boot: the finger is enough now
    desk = TmuxDesk(world, UID, USER)
    desk.open(0, desk.command("sh"))
    wait_for(lambda: desk.pane(0), what="the user's shell")
    yield desk
    desk.close()
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running
    left = kill_leftovers(UID)
    assert not left, f"processes of the test user outlived the test: {left}"
    rig.wait_until_claimable(USER, timeout=10)


def doas(desk):
    return desk.run("doas /usr/bin/id -u")


def shown_after(desk, run):
    """The lines of the terminal from run `run`'s command line to its end."""
    lines = desk.pane("0")
    start = max(index for index, line in enumerate(lines) if line.endswith(f"echo RUN-{run}-EXIT=$?"))
    return [line for line in lines[start + 1:] if line != "$"]    # the shell's next prompt


def test_match_runs_the_command_without_a_password(desk, world, rig):
    rig.feed([MATCH])
    run = doas(desk)
    rig.fed()
    assert desk.exit_status(run) == 0
    assert shown_after(desk, run) == [INSTRUCTION, "0", f"RUN-{run}-EXIT=0"]
    assert world.counts(UID) == (0, 0)


def test_three_misses_then_the_password(desk, world, rig):
    rig.feed([MISS] * 3)
    run = doas(desk)
    rig.fed()
    desk.wait_text("0", PASSWORD_PROMPT)
    assert world.counts(UID) == (3, 0)
    desk.keys("0", PASSWORD)
    assert desk.exit_status(run) == 0
    assert shown_after(desk, run) == [INSTRUCTION, MISS_OFFER, MISS_OFFER, "Fingerprint not recognized.", PASSWORD_PROMPT,
                                      "0", f"RUN-{run}-EXIT=0"]
    assert world.counts(UID) == (0, 0)


def test_a_miss_then_the_password_typed_while_the_reader_waits(desk, world, rig):
    rig.feed([MISS])
    run = doas(desk)
    rig.fed()
    desk.wait_text("0", MISS_OFFER)
    desk.keys("0", PASSWORD)
    assert desk.exit_status(run) == 0
    assert shown_after(desk, run) == [INSTRUCTION, MISS_OFFER, "0", f"RUN-{run}-EXIT=0"]
    assert world.counts(UID) == (0, 0)


def test_ctrl_c_after_a_miss_cancels_and_the_miss_counts(desk, world, rig):
    """Ctrl-C cancels; the SIGINT, left pending, then reaches doas as it
    would at doas's own prompt (it dies of it). The shell around it keeps a
    handler of its own so that the run's end is still printed."""
    rig.feed([MISS])
    run = desk.run("sh -c 'trap : INT; doas /usr/bin/id -u; echo doas-status=$?'")
    rig.fed()
    desk.wait_text("0", MISS_OFFER)
    desk.ctrl_c("0")
    assert desk.exit_status(run) == 0
    assert "doas-status=130" in shown_after(desk, run), shown_after(desk, run)
    assert world.counts(UID) == (1, 0)


def test_wrong_password_fails_and_counts(desk, world, rig):
    rig.feed([MISS] * 3)
    run = doas(desk)
    rig.fed()
    desk.wait_text("0", PASSWORD_PROMPT)
    desk.keys("0", "wrong-password")
    assert desk.exit_status(run) == 1
    assert "doas: Authentication failed" in shown_after(desk, run), shown_after(desk, run)
    assert world.counts(UID) == (3, 1)


def test_five_misses_across_two_runs_lock_until_the_password(desk, world, rig):
    rig.feed([MISS] * 3)
    first = doas(desk)
    rig.fed()
    desk.wait_text("0", PASSWORD_PROMPT)
    desk.keys("0", "")                       # an empty password: a cancel, not a wrong password
    assert desk.exit_status(first) != 0
    assert world.counts(UID) == (3, 0)
    rig.feed([MISS] * 2)
    second = doas(desk)
    rig.fed()
    desk.wait_text("0", PASSWORD_PROMPT, 2)
    assert world.counts(UID) == (5, 0)
    assert LOCKED in shown_after(desk, second) or any(LOCKED in line for line in desk.pane("0")), desk.pane("0")
    desk.keys("0", "")
    assert desk.exit_status(second) != 0
    # Locked: the next run says so at once and asks for the password; the
    # reader is not used.
    third = doas(desk)
    desk.wait_text("0", PASSWORD_PROMPT, 3)
    assert shown_after(desk, third)[:2] == [LOCKED, PASSWORD_PROMPT], shown_after(desk, third)
    assert world.counts(UID) == (5, 0)
    desk.keys("0", PASSWORD)
    assert desk.exit_status(third) == 0
    assert world.counts(UID) == (0, 0)
