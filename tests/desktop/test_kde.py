"""KDE Plasma 5.27's lock screen: kscreenlocker_greet runs PAM as the user
with service kde, which Debian ships no file for (libpam then reads
`other`, which includes common-auth: here as pam-auth-update writes it from
the package's profile). The module goes through the setuid helper, in
prompt mode, with the same counts as sudo; kde is a default service and a
locker service (it may use the reader while the session is locked).

Plasma 6 runs a `kde-fingerprint` conversation beside `kde`, as GNOME
does: the shipped kde-fingerprint stack (scan mode, the finger only) and
`kde` in password_services (the password only) are run the same way below;
Plasma 6 itself is not in Debian 12.

The conversation is driven through real libpam as kscreenlocker_greet
drives it (tests/support/programs/gdmworker.c run as the user in the user's locked session:
each prompt answered with what the user typed; messages shown), so that the
lines the greeter is given can be asserted. The real greeter (Plasma 5.27's
kscreenlocker_greet --testing with the Breeze lock screen) is driven end to
end by tests/programs/test_lockers.py, where its screen cannot be read.
"""
import os

import pytest

from lockers import helper_pids, wait_for
from pamenv import PAM_AUTH_ERR, PAM_SUCCESS
from desktop import Worker, stack
from pamenv import PAM_AUTHINFO_UNAVAIL, ROOT
from sentences import FIRST_PROMPT, LOCKED
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, the setuid helper)")

USER, UID, PASSWORD = "kdeuser", 4360, "kde-right-pw-1"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"


def write_common_auth(world):
    world.write_profile_common_auth()
    assert not (world.pamd / "kde").exists() and "common-auth" in (world.pamd / "other").read_text()


rig = shared_rig(enroll=USER)
world = shared_world("kde", users={USER: (UID, PASSWORD)}, prepare=write_common_auth, needs_gdm_worker=True)


@pytest.fixture
def greeter(world, rig, logind):
    world.clear_state()
    world.password_entered()
    session = logind.add_session("k1", uid=UID, name=USER)
    logind.set_locked("k1", True)
    started = []

    def start(answer, service="kde"):
        started.append(Worker(world, service, USER, answer, session=session, uid=UID))
        return started[-1]
    yield start
    for worker in started:
        worker.close()
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running
    wait_for(lambda: not helper_pids(), what="every helper gone")
    rig.wait_until_claimable(USER, timeout=10)


def test_enter_then_a_finger_unlocks(greeter, world, rig):
    rig.feed([MATCH])
    worker = greeter("")
    assert worker.result() == PAM_SUCCESS
    rig.fed()
    assert worker.shown()[0] == "prompt: " + FIRST_PROMPT
    assert any("kde needs to confirm your identity (kdeuser)" in text for text in worker.messages()), worker.shown()
    assert world.counts(UID) == (0, 0)


def test_a_typed_password_unlocks(greeter, world):
    worker = greeter(PASSWORD)
    assert worker.result() == PAM_SUCCESS
    assert world.counts(UID) == (0, 0)


def test_a_wrong_password_is_counted(greeter, world):
    assert greeter("wrong-password").result() == PAM_AUTH_ERR
    assert world.counts(UID) == (0, 1)


def test_three_misses_then_the_password_prompt(greeter, world, rig):
    rig.feed([MISS] * 3)
    worker = greeter("")
    worker.wait_for_line("prompt: Enter Password: ")
    rig.fed()
    assert world.counts(UID) == (3, 0)
    assert worker.errors() == ["Fingerprint not recognized. Try again.", "Fingerprint not recognized. Try again.",
                               "Fingerprint not recognized."]
    worker.stop()      # the greeter closed with the password prompt open: nothing more is charged
    wait_for(lambda: not helper_pids(), what="the helper gone with its client")
    assert world.counts(UID) == (3, 0)


@pytest.fixture
def plasma6(world, greeter):
    """Plasma 6's two conversations: the shipped kde-fingerprint stack, and
    kde in password_services, as /usr/share/localauth/kde-fingerprint tells
    the administrator to set."""
    (world.pamd / "kde-fingerprint").write_text(stack((ROOT / "pam.d/kde-fingerprint").read_text()))
    world.write_config(["password_services = gdm-password, kde"])
    yield greeter
    world.write_config([])
    (world.pamd / "kde-fingerprint").unlink()


def test_plasma6_a_finger_unlocks_and_the_password_conversation_asks_only_the_password(plasma6, world, rig):
    password = plasma6(None)
    password.wait_for_line("prompt: Enter Password: ")
    rig.feed([MATCH])
    fingerprint = plasma6(None, service="kde-fingerprint")
    assert fingerprint.result() == PAM_SUCCESS
    rig.fed()
    assert not any(line.startswith("prompt: ") for line in fingerprint.shown()), fingerprint.shown()
    password.stop()
    assert world.counts(UID) == (0, 0)


def test_plasma6_three_misses_end_the_fingerprint_conversation_counted(plasma6, world, rig):
    rig.feed([MISS] * 3)
    fingerprint = plasma6(None, service="kde-fingerprint")
    assert fingerprint.result() == PAM_AUTH_ERR
    rig.fed()
    assert fingerprint.errors() == ["Fingerprint not recognized. Try again.", "Fingerprint not recognized. Try again.",
                                    "Fingerprint not recognized."]
    assert not any(line.startswith("prompt: ") for line in fingerprint.shown())
    assert world.counts(UID) == (3, 0)


def test_plasma6_a_locked_finger_ends_the_fingerprint_conversation_and_the_password_lifts_it(plasma6, world, rig):
    rig.feed([MISS] * 5)
    for _ in range(2):
        assert plasma6(None, service="kde-fingerprint").result() == PAM_AUTH_ERR
    rig.fed()
    assert world.counts(UID) == (5, 0)
    locked = plasma6(None, service="kde-fingerprint")
    assert locked.result() == PAM_AUTHINFO_UNAVAIL
    assert LOCKED in locked.errors()
    assert plasma6(PASSWORD).result() == PAM_SUCCESS
    assert world.counts(UID) == (0, 0)
