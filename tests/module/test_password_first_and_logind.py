"""When the finger is not enough (the first prompt of a boot, 48 h without an
unlock, 156 h without the password and 4 h without a match, a changed
enrollment) and whose touch it is (logind: the caller's session, its screen
lock, the lid), through the real module, real libpam, the rig's fprintd and
python-dbusmock's logind template on the rig's bus. Time moves in a time
namespace (CLOCK_BOOTTIME ahead, same boot id); a reboot is a record whose
password success carries another boot id."""
import json
import os
import subprocess
import threading
import time
from pathlib import Path


from pamenv import (PAM_KEEPTOK, PAM_SUCCESS, PASSWORDS, USERS, current_slot, later_boot_clock, localauth_command,
                    reseal_record)
from fprint_rig import BusMonitor
from sentences import FIRST_PROMPT, PASSCODE_PROMPT, READER_FAILING
from worlds import shared_rig

ALICE = PASSWORDS["alice"]
ALICE_UID = USERS["alice"]
MATCH = "SCAN finger-alice"
AFTER_RESTART = "Your password is required after a restart."
NO_UNLOCK_48 = "Your password is required: you have not unlocked for 48 hours."
UNUSED_156 = "Your password is required: it has not been used for 156 hours."
ENROLLMENT_CHANGED = "Your password is required: the enrolled fingerprints changed."
LID_CLOSED = "The lid is closed: the fingerprint reader is not used."
NOT_ACTIVE = "The fingerprint reader is used only from your active session at this computer."
LOCKED_SCREEN = "The screen is locked: the fingerprint reader is kept for unlocking it; sudo needs your password."
HOUR = 3600
FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
OFFSET_PASSCODE_BOOT_ID = 336   # 16 bytes: the boot of the last correct password


rig = shared_rig(enroll="alice", scope="function")   # without conftest's first password of this boot


def run(pam, rig, answers, feed=(), **kwargs):
    if feed:
        rig.feed(list(feed))
    result = pam.run(answers=answers, env=rig.env(), **kwargs)
    if feed:
        assert rig.feed_wait(timeout=30).ok
    return result


def password_then_finger(pam, rig, message, wrapper=(), match=MATCH):
    """The prompt asks only the password, saying why; after it the finger works."""
    result = run(pam, rig, [ALICE], wrapper=wrapper)
    assert result.code == PAM_SUCCESS, result
    assert result.prompts() == [PASSCODE_PROMPT], result.messages
    assert message in result.texts("error"), result.messages
    result = run(pam, rig, [""], [match], wrapper=wrapper)
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages


# ---- when the finger is not enough -----------------------------------------

def test_the_first_prompt_of_a_boot_asks_the_password_then_the_finger_works(pam, rig):
    password_then_finger(pam, rig, AFTER_RESTART)
    record = current_slot(pam.record_path().read_bytes())
    boot_id = bytes.fromhex(Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", ""))
    assert record[OFFSET_PASSCODE_BOOT_ID:OFFSET_PASSCODE_BOOT_ID + 16] == boot_id
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_a_restart_asks_the_password_again(pam, rig):
    pam.password_entered("alice", rig)
    record = pam.record_path().read_bytes()
    pam.record_path().write_bytes(reseal_record(record, patch={OFFSET_PASSCODE_BOOT_ID: bytes(range(1, 17))}))
    password_then_finger(pam, rig, AFTER_RESTART)


def test_policy_biometrics_hands_over_after_a_boot_and_authsucc_gives_the_finger_back(pam, rig):
    pam.write_service("sudo", [
        pam.module_line("[success=3 conv_err=die default=ignore]", "policy=biometrics"),
        f"auth [success=1 default=ignore] {PAM_KEEPTOK} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        pam.module_line("optional", "authsucc"),
        "auth required pam_permit.so",
    ])
    result = run(pam, rig, [ALICE])
    assert result.code == PAM_SUCCESS and len(result.prompts()) == 1, result.messages
    assert result.prompts() != [FIRST_PROMPT] and AFTER_RESTART in result.texts("error"), result.messages
    assert pam.record().last_passcode_wall > 0, "authsucc recorded the password"
    result = run(pam, rig, [""], [MATCH])
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages


def test_the_boot_rule_off_restores_finger_first(pam, rig):
    pam.conf.write_text("passcode_after_boot = no\n")
    os.chmod(pam.conf, 0o600)
    result = run(pam, rig, [""], [MATCH])
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages


def test_48_hours_without_an_unlock_on_the_boot_clock(pam, rig):
    pam.password_entered("alice", rig)
    result = run(pam, rig, [""], [MATCH], wrapper=later_boot_clock(48 * HOUR - 120))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages
    # The match just now is an unlock: 48 h from it, the password.
    password_then_finger(pam, rig, NO_UNLOCK_48, wrapper=later_boot_clock(96 * HOUR))


def test_156_hours_without_the_password_and_4_without_a_match(pam, rig):
    pam.conf.write_text("unlock_interval = 240h\n")   # so that only the 156 h rule speaks
    os.chmod(pam.conf, 0o600)
    pam.password_entered("alice", rig)
    assert run(pam, rig, [""], [MATCH], wrapper=later_boot_clock(153 * HOUR)).code == PAM_SUCCESS
    # 156 h after the password, but a match 3 h ago: the finger.
    result = run(pam, rig, [""], [MATCH], wrapper=later_boot_clock(156 * HOUR))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages
    # 4 h after that match: the password.
    password_then_finger(pam, rig, UNUSED_156, wrapper=later_boot_clock(160 * HOUR))


def faketime(offset):
    """A wrapper that moves only the wall clock the prompt sees (libfaketime;
    the monotonic and boot clocks stay real)."""
    return ["env", f"FAKETIME={offset}", "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1",
            f"LD_PRELOAD={FAKETIME_LIBRARY} libpam_wrapper.so libnss_wrapper.so"]


def test_the_wall_clock_far_forward_and_back_changes_nothing(pam, rig):
    assert Path(FAKETIME_LIBRARY).exists(), "libfaketime is a test dependency (tools/install-deps.sh)"
    pam.password_entered("alice", rig)
    for offset, seen in (("+3650d", lambda wall: wall > time.time() + 3000 * 86400),
                         ("-3650d", lambda wall: wall < time.time() - 3000 * 86400)):
        result = run(pam, rig, [""], [MATCH], wrapper=faketime(offset))
        assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], (offset, result.messages)
        assert seen(pam.record().last_fingerprint_wall), "the module saw the moved wall clock"
    # And a wall clock set back does not make 48 h without an unlock younger.
    result = run(pam, rig, [ALICE], wrapper=later_boot_clock(48 * HOUR) + faketime("-30d"))
    assert result.prompts() == [PASSCODE_PROMPT] and NO_UNLOCK_48 in result.texts("error"), result.messages


def test_an_enrollment_change_asks_the_password_once(pam, rig):
    pam.password_entered("alice", rig)
    assert run(pam, rig, [""], [MATCH]).code == PAM_SUCCESS
    rig.enroll("alice", finger="left-index-finger")
    password_then_finger(pam, rig, ENROLLMENT_CHANGED)


def test_re_enrolling_the_same_finger_counts_as_a_change(pam, rig):
    """The module reads fprintd's stored prints (here the rig's, bound over
    /var/lib/fprint in a private mount namespace): a print enrolled again
    under the same finger name changes the domain state."""
    wrapper = ["unshare", "--mount", "/bin/sh", "-c",
               f"mount --make-rprivate / && mount -t tmpfs localauth-var-lib /var/lib && mkdir /var/lib/fprint && "
               f"mount --bind '{rig.prints_dir}' /var/lib/fprint && exec \"$@\"", "sh"]
    password_then_finger(pam, rig, AFTER_RESTART, wrapper=wrapper)
    before = pam.record_path().read_bytes()[352:384]
    rig.enroll("alice", print_id="finger-alice-again")   # the same finger name, a new print
    password_then_finger(pam, rig, ENROLLMENT_CHANGED, wrapper=wrapper, match="SCAN finger-alice-again")
    assert pam.record_path().read_bytes()[352:384] != before


def test_while_fprintd_refuses_the_password_keeps_the_enrollment(pam, rig):
    """fprintd asks polkit before it answers, so while polkit refuses (its
    actions denied, or polkitd not on the bus at all) fprintd answers every
    caller PermissionDenied. The prompt says the reader is not available
    (to an unknown name too) and asks the password; the password typed then
    is no enrollment: once fprintd answers again, the next prompt takes the
    finger, with no "the enrolled fingerprints changed"."""
    pam.password_entered("alice", rig)
    digest = pam.record_path().read_bytes()[352:384]
    for stopped in (False, True):
        with rig.polkit_refusing(stopped=stopped):
            result = run(pam, rig, [ALICE])
            assert result.code == PAM_SUCCESS and result.prompts() == [PASSCODE_PROMPT], (stopped, result.messages)
            assert READER_FAILING in result.texts("error"), (stopped, result.messages)
            unknown = run(pam, rig, ["whatever"], user="nosuchuser")
            assert unknown.prompts() == result.prompts() and READER_FAILING in unknown.texts("error"), unknown.messages
        assert pam.record_path().read_bytes()[352:384] == digest, "an error from fprintd was recorded as the enrollment"
        result = run(pam, rig, [""], [MATCH])
        assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], (stopped, result.messages)
        assert ENROLLMENT_CHANGED not in result.texts("error") and READER_FAILING not in result.texts("error"), result.messages
        assert (pam.record().F, pam.record().P) == (0, 0)


# ---- whose touch it is ---------------------------------------------------------

def in_session(session):
    return {"wrapper": session.prefix()}


def test_the_users_active_local_session_uses_the_finger(pam, rig, logind):
    pam.password_entered("alice", rig)
    session = logind.add_session("lt5", ALICE_UID, "alice")
    result = run(pam, rig, [""], [MATCH], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages


def test_no_session_an_inactive_one_or_a_remote_one_gets_the_password(pam, rig, logind):
    pam.password_entered("alice", rig)
    session = logind.add_session("lt6", ALICE_UID, "alice")
    bob = logind.add_session("lt7", USERS["bob"], "bob")
    for case, options in (("in no session", {}), ("in another user's session", in_session(bob))):
        # sudo's process (the person's real uid, root's effective one) is told why.
        result = run(pam, rig, [ALICE], real_uid=ALICE_UID, **options)
        assert result.code == PAM_SUCCESS and result.prompts() == [PASSCODE_PROMPT], (case, result.messages)
        assert NOT_ACTIVE in result.texts("error"), (case, result.messages)
        # A root caller acting for a name (a login screen) hears what an
        # unknown name hears: the password prompt alone (R14).
        result = run(pam, rig, [ALICE], **options)
        assert result.code == PAM_SUCCESS and result.messages == [("prompt-off", PASSCODE_PROMPT)], (case, result.messages)
        unknown = run(pam, rig, ["whatever"], user="nosuchuser", **options)
        assert unknown.messages == result.messages, (case, unknown.messages)
    for case, change, undo in (("not the seat's active session", lambda: logind.set_active("lt6", False),
                                lambda: logind.set_active("lt6", True)),
                               ("a remote session", lambda: logind.set_remote("lt6", True), lambda: logind.set_remote("lt6", False))):
        change()
        result = run(pam, rig, [ALICE], real_uid=ALICE_UID, **in_session(session))
        assert result.prompts() == [PASSCODE_PROMPT] and NOT_ACTIVE in result.texts("error"), (case, result.messages)
        undo()
    result = run(pam, rig, [""], [MATCH], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages
    assert (pam.record().F, pam.record().P) == (0, 0), "a reader kept out charges nothing"


def test_a_process_of_the_users_own_user_manager_stands_in_their_session(pam, rig, logind):
    """GNOME's and Plasma's default sessions run the desktop's terminals,
    apps and polkit agents under systemd's user manager (user@UID.service),
    in no login session. Such a caller stands in the account's only session
    on a seat, with its rules (active, the lock), and only while no session
    of the account is remote: an ssh login can start processes in the same
    user manager."""
    pam.password_entered("alice", rig)
    logind.add_session("lt11", ALICE_UID, "alice")
    manager = logind.add_user_manager(ALICE_UID)
    result = run(pam, rig, [""], [MATCH], real_uid=ALICE_UID, **in_session(manager))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages

    def password_only(case, place=manager):
        result = run(pam, rig, [ALICE], real_uid=ALICE_UID, **in_session(place))
        assert result.code == PAM_SUCCESS and result.prompts() == [PASSCODE_PROMPT], (case, result.messages)
        return result
    # The account's session is not the seat's active one: no stand-in.
    logind.set_active("lt11", False)
    assert NOT_ACTIVE in password_only("not the seat's active session").texts("error")
    logind.set_active("lt11", True)
    # Its session locked: sudo from the user manager waits behind it too.
    logind.set_locked("lt11", True)
    assert LOCKED_SCREEN in password_only("the screen locked").texts("error")
    logind.set_locked("lt11", False)
    # Another account's user manager stands in that account's session only.
    bob = logind.add_user_manager(USERS["bob"])
    logind.add_session("lt13", USERS["bob"], "bob", seat="seat1")
    assert NOT_ACTIVE in password_only("bob's user manager", bob).texts("error")
    # The administrator's choice: no stand-in at all.
    pam.conf.write_text("user_manager_stand_in = no\n")
    assert NOT_ACTIVE in password_only("user_manager_stand_in = no").texts("error")
    pam.conf.write_text("")
    result = run(pam, rig, [""], [MATCH], real_uid=ALICE_UID, **in_session(manager))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], ("the option back on", result.messages)
    # An ssh login of the account.
    logind.add_session("lt12", ALICE_UID, "alice", active=False)
    logind.set_remote("lt12", True)
    assert NOT_ACTIVE in password_only("an ssh login open").texts("error")
    # A second session of the account at the seat (a text console switched
    # away from): which one the process belongs to is not known.
    logind.set_remote("lt12", False)
    assert NOT_ACTIVE in password_only("a second session at the seat").texts("error")
    assert (pam.record().F, pam.record().P) == (0, 0), "a reader kept out charges nothing"


def test_a_locked_screen_keeps_the_reader_for_the_locker(pam, rig, logind):
    pam.password_entered("alice", rig)
    session = logind.add_session("lt8", ALICE_UID, "alice")
    pam.write_owner_stack("i3lock")
    logind.set_locked("lt8", True)
    result = run(pam, rig, [ALICE], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [PASSCODE_PROMPT], result.messages
    assert LOCKED_SCREEN in result.texts("error")
    result = run(pam, rig, [""], [MATCH], service="i3lock", **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages
    logind.set_locked("lt8", False)
    result = run(pam, rig, [""], [MATCH], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages


def test_a_screen_locked_while_the_reader_waits_refuses_the_match_and_frees_the_reader(pam, rig, logind):
    """logind is asked again when a match arrives: the screen locked while
    the reader waited keeps the match from counting (its attempt given
    back, nothing charged), and the reader is stopped and released all the
    same, once each, before the prompt ends: the next prompt finds it free."""
    pam.password_entered("alice", rig)
    session = logind.add_session("lt14", ALICE_UID, "alice")
    pam.write_service("sudo-bio", [pam.module_line("[success=done default=die]", "policy=biometrics services=sudo-bio")])
    results = []
    with BusMonitor(rig) as monitor:
        worker = threading.Thread(target=lambda: results.append(
            pam.run(answers=[""], env=rig.env(), service="sudo-bio", **in_session(session))))
        worker.start()
        try:
            monitor.wait_for("VerifyFingerSelected")    # the reader waits: the lock comes now
            logind.set_locked("lt14", True)
            rig.send_vdev(MATCH)
        finally:
            worker.join(timeout=30)
        calls = [member for member, _ in monitor.close() if member in ("Claim", "VerifyStart", "VerifyStop", "Release")]
    logind.set_locked("lt14", False)
    assert not worker.is_alive() and len(results) == 1, "the prompt did not end"
    result = results[0]
    assert result.code != PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages   # Enter, then the reader
    assert any(text.startswith("The screen is locked") for text in result.texts("error")), result.messages
    assert calls == ["Claim", "VerifyStart", "VerifyStop", "Release"], calls
    assert (pam.record().F, pam.record().P) == (0, 0), "the refused match stays charged"
    rig.wait_until_claimable("alice", timeout=1)


def test_a_closed_lid_skips_the_reader_for_that_prompt(pam, rig, logind):
    pam.password_entered("alice", rig)
    session = logind.add_session("lt9", ALICE_UID, "alice")
    logind.set_lid(True)
    result = run(pam, rig, [ALICE], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [PASSCODE_PROMPT], result.messages
    assert LID_CLOSED in result.texts("error")
    pam.write_service("sudo-bio", [pam.module_line("[success=done default=die]", "policy=biometrics services=sudo-bio")])
    result = run(pam, rig, [], service="sudo-bio", **in_session(session))
    assert result.code != PAM_SUCCESS and result.prompts() == [] and LID_CLOSED in result.texts("error"), result
    logind.set_lid(False)
    result = run(pam, rig, [""], [MATCH], **in_session(session))
    assert result.code == PAM_SUCCESS and result.prompts() == [FIRST_PROMPT], result.messages
    pam.conf.write_text("skip_when_lid_closed = no\n")
    os.chmod(pam.conf, 0o600)
    logind.set_lid(True)
    assert run(pam, rig, [""], [MATCH], **in_session(session)).code == PAM_SUCCESS


def test_status_reports_logind_and_the_rules(pam, rig, logind):
    session = logind.add_session("lt10", ALICE_UID, "alice")
    logind.set_lid(True)
    pam.conf.write_text(f"state_dir = {pam.state}\n")
    os.chmod(pam.conf, 0o600)
    command = [str(localauth_command()), "status", "--user", "alice", "--conf", str(pam.conf), "--json"]
    output = subprocess.run(session.prefix() + command, env=pam.env(rig.env()), capture_output=True, text=True, timeout=30)
    status = json.loads(output.stdout)
    assert status["passcode_required"] == "password required: after restart"
    assert status["logind"]["present"] is True and status["logind"]["lid_closed"] is True
    assert status["logind"]["session"]["id"] == "lt10" and status["logind"]["session"]["active"] is True
    assert status["logind"]["fingerprint_blocked"] == "fingerprint not used: the lid is closed"
