"""Display-manager logins: greetd, LightDM, SDDM and GDM's password
conversation, each with its Debian 12 stack (which includes common-auth or
login) and the profile's common-auth, through real libpam as their session
workers run it: root, PAM_TTY the greeter's VT, the greeter answering the
prompts (tests/support/programs/gdmworker.c with an answer), at the login screen, where the
worker belongs to no session of the user (logind mocked on the rig's bus).

The login of a display manager is the password: there is no session of the
user yet for the reader, and the first login of a boot must unlock the
keyring anyway. A login counts a wrong password and resets the counts.

No real display manager runs here: greetd refuses a pseudo-terminal ("cannot
use current VT when started from a psuedo terminal") and this machine has no
virtual terminals; LightDM and SDDM need an X server they start themselves
on a VT.
"""
import os

import pytest

from lockers import helper_pids, wait_for
from pamenv import PAM_AUTH_ERR, PAM_SUCCESS, reseal_record
from desktop import Worker, gdm_password_stack, stack
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces)")

USER, UID, PASSWORD = "gnomeuser", 4350, "gnome-right-pw-1"   # test_gnome's Worker runs as this user
PASSWORD_PROMPT = "Enter Password: "

# Debian 12's stacks, auth and account lines (optional keyring and wallet
# lines left out: this machine has neither module).
STACKS = {
    "greetd": "#%PAM-1.0\n@include login\n",
    "lightdm": "#%PAM-1.0\nauth    requisite       pam_nologin.so\nauth    sufficient      pam_succeed_if.so user ingroup nopasswdlogin\n"
               "@include common-auth\n@include common-account\n",
    "sddm": "#%PAM-1.0\nauth    required        pam_succeed_if.so user != root quiet_success\n@include common-auth\n"
            "@include common-account\n",
    "gdm-password": gdm_password_stack(),
    # login(1)'s, as greetd includes it (auth lines).
    "login": "#%PAM-1.0\nauth       optional   pam_faildelay.so  delay=3000000\nauth requisite pam_nologin.so\n"
             "@include common-auth\n@include common-account\n",
}


def write_display_manager_stacks(world):
    world.write_profile_common_auth()
    for name, text in STACKS.items():
        (world.pamd / name).write_text(stack(text))


rig = shared_rig(enroll=USER)
world = shared_world("dm", users={USER: (UID, PASSWORD)}, prepare=write_display_manager_stacks, needs_gdm_worker=True)


@pytest.fixture
def login(world, rig, logind):
    world.clear_state()
    world.password_entered()
    started = []

    def start(service, answer):
        started.append(Worker(world, service, USER, answer))
        return started[-1]
    yield start
    for worker in started:
        worker.close()
    wait_for(lambda: not helper_pids(), what="every helper gone")


SERVICES = ["greetd", "lightdm", "sddm", "gdm-password"]


@pytest.mark.parametrize("service", SERVICES)
def test_a_login_is_the_password_and_resets_the_counts(login, world, service):
    record = world.state / f"{UID}.rec"
    record.write_bytes(reseal_record(record.read_bytes(), F=4, P=2))
    assert world.counts(UID) == (4, 2)
    worker = login(service, PASSWORD)
    assert worker.result() == PAM_SUCCESS
    assert [line for line in worker.shown() if line.startswith("prompt: ")] == ["prompt: " + PASSWORD_PROMPT], worker.shown()
    assert world.counts(UID) == (0, 0)


@pytest.mark.parametrize("service", SERVICES)
def test_a_wrong_password_at_login_is_counted(login, world, service):
    worker = login(service, "wrong-password")
    assert worker.result() == PAM_AUTH_ERR
    assert world.counts(UID) == (0, 1)


@pytest.mark.parametrize("service", SERVICES)
def test_the_first_login_of_a_boot_is_the_password(login, world, service):
    world.clear_state()            # no password typed this boot
    worker = login(service, PASSWORD)
    assert worker.result() == PAM_SUCCESS
    assert [line for line in worker.shown() if line.startswith("prompt: ")] == ["prompt: " + PASSWORD_PROMPT]
