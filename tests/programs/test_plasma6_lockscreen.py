"""Plasma 6's real lock screen end to end (Debian 13 and later): the real
kscreenlocker_greet with plasma-desktop's lock screen on an Xvfb display,
as the unprivileged test user, its two conversations as
/usr/share/localauth/kde-fingerprint sets them up (localauth's
kde-fingerprint stack beside the release's own `kde`, which includes
common-auth as pam-auth-update writes it, and `kde` in password_services),
the real setuid helper, pam_unix against a private shadow and the fprintd
rig. How the greeter runs the two is tests/support/plasma6_lockscreen.py.

The same rows as the other lockers (tests/programs/test_lockers.py), as a
person meets them on Plasma 6: the finger needs no key but the one that
shows the lock screen, the password box asks only the password, and a
fingerprint conversation that failed starts again only after the password
conversation fails (an empty Enter).

The fingerprint conversation's timeout is 5 s here (an option of its stack
line): Plasma 6.3 holds its exit after a password until that conversation
ends, which with the default would be up to 30 s per test.
"""
import os
import shutil

import pytest

from lockers import KSCREENLOCKER_GREET, Xvfb, helper_pids, helper_waiting_for_answer, kill_leftovers, wait_for
from pamenv import MODULE, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, ROOT
from plasma6_lockscreen import Plasma6LockScreen
from releases import PLASMA
from sentences import LOCKED
from worlds import shared_rig, shared_world

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)"),
    pytest.mark.skipif(PLASMA != 6, reason="Plasma 6 is in Debian 13 and later (tools/in-release)"),
    pytest.mark.skipif(not KSCREENLOCKER_GREET.exists(), reason="kscreenlocker is not installed"),
]

USER, UID, PASSWORD = "plasmauser", 4370, "plasma-right-pw-1"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
FINGER_TIMEOUT = 5


def write_stacks(world):
    world.write_profile_common_auth()
    shipped = (ROOT / "pam.d/kde-fingerprint").read_text().replace("pam_localauth.so", str(MODULE))
    shipped = shipped.replace("mode=scan", f"mode=scan timeout={FINGER_TIMEOUT}")
    assert f"timeout={FINGER_TIMEOUT}" in shipped
    (world.pamd / "kde-fingerprint").write_text(shipped)
    world.write_config(["password_services = gdm-password, kde"])
    # The release's own kde stack: in /usr/lib/pam.d in Debian 13 (seen
    # through the world's /etc/pam.d), in /etc/pam.d in Debian 14.
    if os.path.exists("/etc/pam.d/kde"):
        shutil.copy("/etc/pam.d/kde", world.pamd / "kde")
    assert (world.pamd / "kde").exists() or os.path.exists("/usr/lib/pam.d/kde"), "the release's kde stack"


rig = shared_rig(enroll=USER)
world = shared_world("plasma6", users={USER: (UID, PASSWORD)}, prepare=write_stacks)


@pytest.fixture(scope="module")
def x():
    server = Xvfb(display=":58")
    yield server
    server.close()


@pytest.fixture
def lock(world, rig, x):
    world.clear_state()
    world.password_entered()  # the first password of this boot: the finger is enough now
    greeter = Plasma6LockScreen(world, UID, USER, x)
    greeter.start()
    yield greeter
    greeter.close()
    rig.drop_feed()
    wait_for(lambda: not helper_pids(), what="every helper gone")
    left = kill_leftovers(UID, grace=5)
    assert not left, f"processes of the test user outlived the test: {left}"


def test_a_finger_unlocks_with_no_key_but_the_one_that_shows_the_screen(lock, world, rig):
    rig.feed([MATCH])
    lock.wake()
    assert lock.unlocked(), lock.report()
    rig.fed()
    assert world.counts(UID) == (0, 0)


def test_the_password_unlocks_and_the_fingerprint_conversation_lets_the_greeter_go(lock, world):
    lock.wake()
    lock.submit(PASSWORD)
    wait_for(lock.said_unlocked, what="the greeter's 'Unlocked'")
    # Plasma 6.3 leaves once the fingerprint conversation has ended (here
    # by its timeout), Plasma 6.7 at once.
    assert lock.unlocked(timeout=FINGER_TIMEOUT + 10), lock.report()
    assert world.counts(UID) == (0, 0)


def test_three_misses_end_the_fingerprint_conversation_then_the_password(lock, world, rig):
    rig.feed([MISS] * 3)
    lock.wake()
    rig.fed()
    wait_for(lambda: lock.fingerprint_results() == [PAM_AUTH_ERR], what="the fingerprint conversation failed")
    assert lock.locked and world.counts(UID) == (3, 0), lock.report()
    assert lock.fingerprint_conversations() == 1, "the greeter started the reader again by itself"
    lock.submit(PASSWORD)
    assert lock.unlocked(), lock.report()
    assert world.counts(UID) == (0, 0)


def test_five_misses_over_two_rounds_lock_the_finger_until_the_password(lock, world, rig):
    rig.feed([MISS] * 3)
    lock.wake()
    rig.fed()
    wait_for(lambda: lock.fingerprint_results() == [PAM_AUTH_ERR], what="the first round's fingerprint failure")
    assert world.counts(UID) == (3, 0)
    # Enter on the empty box: the password conversation is cancelled
    # (nothing charged), and after the grace lock both start again.
    rig.feed([MISS] * 2)
    lock.fail_round("")
    rig.fed()
    wait_for(lambda: lock.fingerprint_results() == [PAM_AUTH_ERR] * 2, what="the second round's fingerprint failure")
    assert lock.locked and world.counts(UID) == (5, 0), lock.report()
    assert f"[PAM worker kde-fingerprint] Message: Error message: {LOCKED}" in lock.greeter_log()
    # Locked: the next round's fingerprint conversation says so and answers
    # "unavailable" at once, uncharged; the greeter stops using the reader.
    lock.fail_round("")
    wait_for(lambda: len(lock.fingerprint_results()) == 3, what="the third round's fingerprint answer")
    assert lock.fingerprint_results()[2] == PAM_AUTHINFO_UNAVAIL
    assert lock.locked and world.counts(UID) == (5, 0)
    lock.submit(PASSWORD)
    assert lock.unlocked(), lock.report()
    assert world.counts(UID) == (0, 0)


def test_wrong_passwords_earn_the_back_off_said_without_a_password_prompt(lock, world):
    """During the wait the password conversation says it and fails without
    asking; the greeter starts it again after each grace lock, so the wait
    is said again (counting down) and nothing is charged or checked."""
    lock.wake()
    for attempt in range(4):
        lock.fail_round(f"wrong-{attempt}")
        assert world.counts(UID)[1] == attempt + 1, f"wrong password {attempt + 1} charged"
    lock.submit("wrong-4")         # the fifth: the wait begins, and no prompt comes back
    wait_for(lambda: world.counts(UID)[1] == 5, what="wrong password 5 charged")
    wait_sentence = "[PAM worker kde] Message: Error message: Too many wrong passwords. Try again in "
    wait_for(lambda: lock.greeter_log().count(wait_sentence) >= 2, what="the wait said in two rounds")
    assert lock.locked and world.counts(UID)[1] == 5, lock.report()
    assert world.record(UID).backoff_ms > 0
    since_the_wait = lock.greeter_log().split(wait_sentence, 1)[1]
    assert "[PAM worker kde] Message: Echo-off prompt" not in since_the_wait, since_the_wait[-2000:]
    assert helper_waiting_for_answer() is None, "a password prompt during the wait"


def test_the_greeter_killed_mid_scan_loses_no_charge(lock, world, rig):
    """One miss, then the greeter dies while the next finger is awaited: the
    miss stays, the helper gives back the attempt no finger reached or
    keeps it (test_lockers.py says when), and the reader is released."""
    rig.feed([MISS])
    lock.wake()
    rig.fed()
    wait_for(lambda: world.counts(UID) == (2, 0), what="the second attempt charged")
    victims = lock.pam_pids()
    assert victims, "no greeter process"
    for pid in victims:
        os.kill(pid, 9)
    wait_for(lambda: not helper_pids(), what="the helpers gone with their client")
    assert world.counts(UID) in ((1, 0), (2, 0)), world.counts(UID)
    rig.wait_until_claimable(USER, timeout=10)
