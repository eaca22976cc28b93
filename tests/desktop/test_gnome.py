"""GNOME's two conversations: gdm-fingerprint (localauth's shipped stack) and
gdm-password (gdm3's, which includes common-auth as pam-auth-update writes
it from the package's profile), run in parallel through real libpam as
GDM 43's gdm-session-worker runs them, against the fprintd rig.

tests/support/programs/gdmworker.c is that worker: root, PAM_TTY /dev/tty1, a second thread,
SIGTERM ending the process at once (GDM's handler calls _exit), messages
relayed without waiting, and prompts of the fingerprint conversation never
answered (gnome-shell answers none there). GNOME stops the conversation that
lost by killing its worker; gnome-shell starts a new fingerprint
conversation after one fails (on the lock screen without limit). The lock
screen's workers run in the user's session, which logind (mocked on the
rig's bus) reports locked.

The real GDM and gnome-shell were not run: gdm3 needs a running systemd and
logind to start a greeter session, and gnome-shell a Wayland or X session
of its own, neither of which this machine's test setup has; the worker
reproduces what gdm-session-worker does with PAM (its sources:
gdm-session-worker.c, gdm-session-worker-job.c; gnome-shell's
js/gdm/util.js), which is all the module sees of it.
"""
import os

import pytest

from desktop import Worker, gdm_password_stack, stack
from lockers import helper_pids, wait_for
from pamenv import MODULE, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, PAM_CRED_INSUFFICIENT, PAM_SUCCESS, ROOT
from sentences import LOCKED, NOT_RECOGNIZED
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, the setuid helper)")

USER, UID, PASSWORD = "gnomeuser", 4350, "gnome-right-pw-1"
MATCH = f"SCAN finger-{USER}"
MISS = "SCAN finger-nobody"
TRY_AGAIN = "Fingerprint not recognized. Try again."
PASSWORD_PROMPT = "Enter Password: "


def write_gdm_stacks(world):
    world.write_profile_common_auth()
    (world.pamd / "gdm-fingerprint").write_text(stack((ROOT / "pam.d/gdm-fingerprint").read_text()))
    (world.pamd / "gdm-password").write_text(stack(gdm_password_stack()))


rig = shared_rig(enroll=USER)
world = shared_world("gnome", users={USER: (UID, PASSWORD)}, prepare=write_gdm_stacks, needs_gdm_worker=True)


@pytest.fixture
def gdm(world, rig, logind):
    """Starts workers in the user's locked session (the lock screen)."""
    world.clear_state()
    world.password_entered()   # the first password of this boot: the finger is enough now
    session = logind.add_session("g1", uid=UID, name=USER)
    logind.set_locked("g1", True)
    started = []

    def start(service, answer=None, in_session=True):
        started.append(Worker(world, service, USER, answer, session if in_session else None))
        return started[-1]
    yield start
    for worker in started:
        worker.close()
    rig.drop_feed()   # a test that failed half-way must not leave its feeder running
    wait_for(lambda: not helper_pids(), what="every helper gone")
    rig.wait_until_claimable(USER, timeout=10)


def scanning(rig, world, charged):
    """The fingerprint conversation waits at the reader with `charged`
    attempts counted (the one in flight included)."""
    wait_for(lambda: world.counts(UID)[0] == charged, what=f"{charged} fingerprint attempt(s) charged")
    wait_for(lambda: rig.ctl.has_owner("net.reactivated.Fprint"), what="fprintd")


def test_a_finger_unlocks_and_the_password_conversation_is_stopped(gdm, world, rig):
    password = gdm("gdm-password")
    password.wait_for_line("prompt: " + PASSWORD_PROMPT)
    rig.feed([MATCH])
    fingerprint = gdm("gdm-fingerprint")
    assert fingerprint.result() == PAM_SUCCESS
    rig.fed()
    password.stop()
    assert world.counts(UID) == (0, 0)
    # The fingerprint conversation showed messages and asked nothing; the
    # password one asked only the password.
    assert not any(line.startswith("prompt: ") for line in fingerprint.shown()), fingerprint.shown()
    assert password.messages() == [], password.shown()


def test_three_misses_are_counted_messages_and_end_the_conversation(gdm, world, rig):
    rig.feed([MISS] * 3)
    fingerprint = gdm("gdm-fingerprint")
    assert fingerprint.result() == PAM_AUTH_ERR
    rig.fed()
    assert fingerprint.errors() == [TRY_AGAIN, TRY_AGAIN, NOT_RECOGNIZED]
    assert not any(line.startswith("prompt: ") for line in fingerprint.shown())
    assert world.counts(UID) == (3, 0)


def test_five_misses_lock_the_finger_until_the_password_conversation_succeeds(gdm, world, rig):
    rig.feed([MISS] * 3)
    assert gdm("gdm-fingerprint").result() == PAM_AUTH_ERR
    rig.fed()
    # gnome-shell starts the fingerprint conversation again.
    rig.feed([MISS] * 2)
    second = gdm("gdm-fingerprint")
    assert second.result() == PAM_AUTH_ERR
    rig.fed()
    assert second.errors() == [TRY_AGAIN, NOT_RECOGNIZED, LOCKED]
    assert world.counts(UID) == (5, 0)
    # Locked: the next one says so at once and answers "unavailable", which
    # makes gnome-shell stop using the reader; the reader is not claimed.
    third = gdm("gdm-fingerprint")
    assert third.result() == PAM_AUTHINFO_UNAVAIL
    assert third.errors() == [LOCKED]
    assert world.counts(UID) == (5, 0)
    password = gdm("gdm-password", PASSWORD)
    assert password.result() == PAM_SUCCESS
    assert world.counts(UID) == (0, 0)
    rig.feed([MATCH])
    assert gdm("gdm-fingerprint").result() == PAM_SUCCESS
    rig.fed()


@pytest.mark.stop_proof
def test_a_conversation_stopped_while_the_reader_waits_is_not_charged(gdm, world, rig):
    """GDM kills the fingerprint worker (the password won, the user
    cancelled, the screen went blank): the helper sees its client go and
    gives back the attempt no finger reached."""
    fingerprint = gdm("gdm-fingerprint")
    scanning(rig, world, 1)
    mark = world.syslog.mark()
    fingerprint.stop()
    wait_for(lambda: not helper_pids(), what="the helper gone with its client")
    if world.counts(UID) != (0, 0):
        assert world.syslog.charged_only_by_the_stops_delay(mark), world.syslog.since(mark)
    assert world.counts(UID) == (0, 0)


def test_the_password_wins_while_the_reader_waits(gdm, world, rig):
    fingerprint = gdm("gdm-fingerprint")
    scanning(rig, world, 1)
    password = gdm("gdm-password", PASSWORD)
    assert password.result() == PAM_SUCCESS
    fingerprint.stop()
    wait_for(lambda: not helper_pids(), what="the helper gone with its client")
    assert world.counts(UID) == (0, 0)
    assert password.shown()[0] == "prompt: " + PASSWORD_PROMPT


def test_the_password_conversation_has_the_back_off(gdm, world, rig):
    for attempt in range(5):
        assert gdm("gdm-password", f"wrong-{attempt}").result() == PAM_AUTH_ERR
        assert world.counts(UID) == (0, attempt + 1)
    refused = gdm("gdm-password", PASSWORD)
    assert refused.result() == PAM_CRED_INSUFFICIENT   # refused unchecked
    assert any(text.startswith("Too many wrong passwords. Try again in ") for text in refused.errors()), refused.shown()
    assert world.counts(UID) == (0, 5)


def test_after_a_restart_the_finger_waits_for_the_password(gdm, world, rig):
    world.clear_state()           # no password typed this boot
    fingerprint = gdm("gdm-fingerprint")
    assert fingerprint.result() == PAM_AUTHINFO_UNAVAIL
    assert fingerprint.errors() == ["Your password is required after a restart."]
    assert gdm("gdm-password", PASSWORD).result() == PAM_SUCCESS
    rig.feed([MATCH])
    assert gdm("gdm-fingerprint").result() == PAM_SUCCESS
    rig.fed()


def test_the_login_screen_has_no_session_of_the_user_so_the_password(gdm, world, rig):
    """At the login screen the worker belongs to GDM, not to a session of
    the user: the reader is not used there (a login unlocks the keyring with
    the password anyway)."""
    fingerprint = gdm("gdm-fingerprint", in_session=False)
    assert fingerprint.result() == PAM_AUTHINFO_UNAVAIL
    # Nothing said: what would be said (the session rule, a lockout, a
    # password rule) exists only for an enrolled name, and the login screen
    # also runs this conversation for typed names (R14).
    assert fingerprint.errors() == [] and fingerprint.messages() == [], fingerprint.shown()
    assert world.counts(UID) == (0, 0)
    assert gdm("gdm-password", PASSWORD, in_session=False).result() == PAM_SUCCESS


def test_an_unknown_name_gets_what_a_name_without_a_finger_gets(gdm, world, rig):
    """R14 at the fingerprint conversation: a typed name without an account
    takes the same way (through the helper) and gets the same answer as an
    account without an enrolled finger."""
    unknown = Worker(world, "gdm-fingerprint", "nosuchuser")
    try:
        assert unknown.result() == PAM_AUTHINFO_UNAVAIL
        assert not any(line.startswith("prompt: ") for line in unknown.shown())
    finally:
        unknown.close()
    assert world.counts(UID) == (0, 0)


def test_a_scan_line_before_a_password_line_resets_through_authsucc(gdm, world, rig):
    """The biometrics shape with a scan line: three misses, then the password
    module, then the authsucc line, which resets the counts. (Service kde:
    a locker service, so the reader may be used in the locked session.)"""
    original = (world.pamd / "kde").read_text() if (world.pamd / "kde").exists() else None
    world.write_service("kde", [
        f"auth [success=3 default=ignore] {MODULE} policy=biometrics mode=scan fallback_title=",
        "auth [success=1 default=die] pam_unix.so", "auth requisite pam_deny.so",
        f"auth optional {MODULE} authsucc", "auth required pam_permit.so"])
    try:
        rig.feed([MISS] * 3)
        worker = gdm("kde", PASSWORD)
        assert worker.result() == PAM_SUCCESS
        rig.fed()
        assert [line for line in worker.shown() if line.startswith("prompt: ")] == ["prompt: Password: "]
        assert world.counts(UID) == (0, 0)
    finally:
        if original is None:
            (world.pamd / "kde").unlink()
        else:
            (world.pamd / "kde").write_text(original)
