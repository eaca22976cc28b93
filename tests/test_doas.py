"""doas end to end: the real opendoas 6.8 (setuid root, service doas, which
includes common-auth) in a terminal, with the stack pam-auth-update writes
from the package's profile, against the fprintd rig.

doas sets PAM_TTY to its terminal and runs PAM as root with the user as
real uid: the module runs in-process in terminal mode, as for sudo. The
world (tests/private_world.py) adds /etc/doas.conf through an overlay:
`permit USER as root`, so every run asks (no `persist`).
"""
import os
import shutil

import pytest

from desktop import TmuxDesk
from fprint_rig import FprintRig, RigError
from lockers import process_description, user_processes, wait_for
from pamenv import MODULE
from private_world import PrivateWorld

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, setuid programs)"),
              pytest.mark.skipif(not (shutil.which("doas") and shutil.which("tmux")),
                                 reason="opendoas or tmux is not installed: run make deps")]

USER, UID, PASSWORD = "doasuser", 4330, "doas-right-pw-1"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
INSTRUCTION = f"doas needs to confirm your identity ({USER}). Swipe your finger across the fingerprint reader."
MISS_OFFER = "Fingerprint not recognized. Try again. Press Ctrl-C to Enter Password."
PASSWORD_PROMPT = "Enter Password:"
LOCKED = "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password."


@pytest.fixture(scope="module")
def rig():
    with FprintRig() as rig:
        rig.enroll(USER)
        yield rig


@pytest.fixture(scope="module")
def world(rig, tmp_path_factory):
    base = tmp_path_factory.mktemp("doas")
    os.chmod(base, 0o755)
    world = PrivateWorld(base, rig, users={USER: (UID, PASSWORD)}, etc_files={"doas.conf": f"permit {USER} as root\n"})
    # common-auth as pam-auth-update writes it from the package's profile.
    world.write_service("common-auth", [
        f"auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] {MODULE}",
        "auth [success=1 default=ignore] pam_unix.so nullok",
        "auth requisite pam_deny.so",
        "auth required pam_permit.so"])
    shutil.copy("/etc/pam.d/doas", world.pamd / "doas")
    yield world
    world.close()


@pytest.fixture
def desk(world, rig):
    world.clear_state()
    world.password_entered()   # the first password of this boot: the finger is enough now
    desk = TmuxDesk(world, UID, USER)
    desk.open(0, desk.command("sh"))
    wait_for(lambda: desk.pane(0), what="the user's shell")
    yield desk
    desk.close()
    try:
        rig.feed_wait(timeout=1)
    except RigError:
        pass
    left = {pid: process_description(pid) for pid in user_processes(UID)}
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"processes of the test user outlived the test: {left}"
    rig.wait_until_claimable(USER, timeout=10)


def fed(rig):
    report = rig.feed_wait(timeout=30)
    assert report.ok, report


def test_explore(desk, world, rig):
    rig.feed([MISS, MISS, MISS])
    run = desk.run("doas /usr/bin/id -u")
    fed(rig)
    desk.wait_text("0", PASSWORD_PROMPT)
    desk.keys("0", PASSWORD)
    print(desk.exit_status(run))
    print("\n".join(desk.pane(0)))
    print(world.counts(UID))
    assert False
