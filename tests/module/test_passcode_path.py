"""The real module through real libpam (pam_wrapper), no fprintd running:
the "no usable biometrics -> passcode" path end to end (R3, R8, R9,
R12, R14, R15, §6). Counts are read from the record files on disk."""
import os
import signal
import stat
import time

import pytest

from pamenv import (PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, PAM_CRED_INSUFFICIENT, PAM_CONV_ERR, PAM_KEEPTOK, PAM_MATRIX,
                    PAM_SUCCESS, PAM_SYSTEM_ERR, PASSWORDS, MODULE, later_boot_clock, lookalike_records)

ALICE = PASSWORDS["alice"]


def counting_passcode_stack(pam, extra_before=()):
    """The passcode service with a pam_exec line that counts verifications."""
    counter = pam.base / "verifications"
    script = pam.base / "count.sh"
    script.write_text(f"#!/bin/sh\necho x >> {counter}\n")
    script.chmod(0o755)
    pam.write_service("localauth-passcode", list(extra_before) + [
        f"auth optional pam_exec.so quiet {script}",
        f"auth required {PAM_MATRIX} passdb={pam.passdb}",
    ])
    return lambda: len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.mark.parametrize("local_user_line", [[], ["auth [success=die default=ignore] pam_localuser.so"]],
                         ids=["unix-then-directory", "unix-localuser-directory"])
def test_a_passcode_service_for_directory_accounts_checks_them_after_pam_unix(pam, local_user_line):
    """The passcode service the documentation gives for sssd: pam_unix for
    local accounts, (pam_localuser refusing a local account whose password
    pam_unix did not take,) then the directory's module with the same one
    answer (pam_get_authtok, as pam_sss's use_first_pass). A test module
    that checks pam_matrix's password file that way stands in for pam_sss
    (there is no directory here); alice has no local password and is no
    local account (no shadow or passwd entry on this machine), so pam_unix
    fails, is ignored, and the directory decides: the right password gets
    in, a wrong one is charged, and nothing asks twice."""
    pam.write_service("localauth-passcode", ["auth [success=done default=ignore] pam_unix.so"] + local_user_line
                      + [f"auth required {PAM_KEEPTOK} passdb={pam.passdb}"])
    wrong = pam.run(answers=["wrong-1"])
    assert wrong.code == PAM_AUTH_ERR, wrong
    assert pam.record().P == 1
    right = pam.run(answers=[ALICE])
    assert right.code == PAM_SUCCESS, right
    assert [text for kind, text in right.messages if kind.startswith("prompt")] == ["Enter Password: "]
    assert pam.record().P == 0


def test_a_passcode_service_that_records_nothing_fails(pam):
    """libpam's own rule, which the lint relies on where a password
    module's failure may be ignored: a stack in which nothing recorded a
    result fails. The one password module's failure is ignored (optional),
    and the right password of an account it cannot check is no success."""
    pam.write_service("localauth-passcode", ["auth optional pam_unix.so"])
    run = pam.run(answers=[ALICE])
    assert run.code == PAM_AUTH_ERR, run
    assert pam.record().P == 1


def test_correct_passcode_succeeds_resets_counters_and_sets_authtok(pam):
    assert pam.run(answers=["wrong-1"]).code == PAM_AUTH_ERR
    assert pam.run(answers=["wrong-2"]).code == PAM_AUTH_ERR
    assert pam.record().P == 2
    run = pam.run(answers=[ALICE], authtok=True)
    assert run.code == PAM_SUCCESS
    assert run.messages[0] == ("prompt-off", "Enter Password: ")
    assert run.authtok == "first-answer"
    assert run.fail_delay in (None, 0)
    record = pam.record()
    assert (record.F, record.P, record.backoff_ms) == (0, 0, 0)
    assert record.last_passcode_wall > 0
    assert not run.ignored


def test_wrong_passcode_is_auth_err_charged_on_disk_with_fail_delay(pam):
    run = pam.run(answers=["nope"], authtok=True)
    assert run.code == PAM_AUTH_ERR
    assert run.fail_delay and run.fail_delay > 0
    assert run.authtok == "unset"
    record = pam.record()
    assert (record.name, record.F, record.P) == ("alice", 0, 1)
    assert record.failures == 1


def test_fallback_title_is_the_prompt(pam):
    pam.write_owner_stack(args="[fallback_title=Use Passcode]")
    assert pam.run(answers=[ALICE]).messages[0] == ("prompt-off", "Use Passcode: ")
    pam.write_owner_stack(args="fallback_title=")
    assert pam.run(answers=[ALICE]).messages[0] == ("prompt-off", "Password: ")


@pytest.mark.parametrize("answers", [(), ("",)], ids=["eof", "empty"])
def test_eof_or_empty_entry_cancels_and_charges_nothing(pam, answers):
    run = pam.run(answers=answers)
    assert run.code == PAM_CONV_ERR
    assert run.fail_delay in (None, 0)
    assert not pam.record_path().exists() or pam.record().P == 0


def test_backoff_refuses_without_asking_until_the_wait_ends(pam):
    pam.write_owner_stack(args="passcode_backoff=5:2s")
    for attempt in range(5):
        assert pam.run(answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    assert pam.record().P == 5
    refused = pam.run(answers=[ALICE])
    assert refused.code == PAM_CRED_INSUFFICIENT
    assert refused.prompts() == []
    assert any("Try again in 2 seconds" in t for t in refused.texts("error"))
    assert pam.record().P == 5
    # The wait runs on CLOCK_BOOTTIME: one second short it still refuses,
    # and once the boot clock has passed it the password is asked for again.
    assert pam.run(answers=[ALICE], wrapper=later_boot_clock(1)).prompts() == []
    run = pam.run(answers=[ALICE], wrapper=later_boot_clock(3))
    assert run.prompts() == ["Enter Password: "]
    assert run.code == PAM_SUCCESS
    assert (pam.record().P, pam.record().backoff_ms) == (0, 0)


def test_backoff_message_survives_pam_silent(pam):
    pam.write_owner_stack(args="passcode_backoff=1:1h")
    assert pam.run(answers=["wrong"], silent=True).code == PAM_AUTH_ERR
    refused = pam.run(answers=[ALICE], silent=True)
    assert refused.code == PAM_CRED_INSUFFICIENT
    assert any("Try again in 1 hour" in t for t in refused.texts("error"))


def test_32_parallel_wrong_prompts_run_exactly_5_verifications(pam):
    verifications = counting_passcode_stack(pam)
    runs = pam.run_parallel(32)
    assert sorted(r.code for r in runs) == [PAM_AUTH_ERR] * 5 + [PAM_CRED_INSUFFICIENT] * 27
    assert verifications() == 5
    assert pam.record().P == 5
    refused = [r for r in runs if any("Too many wrong passwords" in t for t in r.texts("error"))]
    assert len(refused) == 27 and all(r.code == PAM_CRED_INSUFFICIENT for r in refused)
    assert all(r.fail_delay in (None, 0) for r in refused)


def test_root_is_exempt_from_backoff_unless_even_deny_root(pam):
    verifications = counting_passcode_stack(pam)
    runs = pam.run_parallel(32, user="root")
    assert [r.code for r in runs] == [PAM_AUTH_ERR] * 32
    assert verifications() == 32
    assert pam.record("root").P == 32


def test_even_deny_root_applies_backoff_to_root(pam):
    pam.write_owner_stack(args="even_deny_root passcode_backoff=5:1h")
    for attempt in range(5):
        assert pam.run(user="root", answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    refused = pam.run(user="root", answers=[PASSWORDS["root"]])
    assert refused.code == PAM_CRED_INSUFFICIENT and refused.prompts() == []


def test_a_second_prompt_inside_the_passcode_stack_makes_it_wrong(pam):
    pam.write_service("localauth-passcode", [
        f"auth required {PAM_MATRIX} passdb={pam.passdb}",
        f"auth required {PAM_MATRIX} passdb={pam.passdb} echo",
    ])
    run = pam.run(answers=[ALICE, ALICE])
    assert run.code == PAM_AUTH_ERR
    assert pam.record().P == 1


def test_an_echo_on_prompt_inside_the_passcode_stack_makes_it_wrong(pam):
    pam.write_service("localauth-passcode", [f"auth required {PAM_MATRIX} passdb={pam.passdb} echo"])
    assert pam.run(answers=[ALICE]).code == PAM_AUTH_ERR
    assert pam.record().P == 1


def test_a_passcode_stack_that_never_asks_cannot_stand_in(pam):
    # pam_permit never asks: no verdict, so nothing is granted and nothing stays charged.
    pam.write_service("sudo-strict", [pam.module_line("required", "services=sudo-strict")])
    pam.write_service("localauth-passcode", ["auth required pam_permit.so"])
    assert pam.run(service="sudo-strict", answers=["anything"]).code == PAM_AUTHINFO_UNAVAIL
    assert pam.record().P == 0


def test_module_inside_its_own_passcode_stack_is_ignored(pam):
    verifications = counting_passcode_stack(pam, extra_before=[
        f"auth [success=done default=ignore] {MODULE} state_dir={pam.state} services=localauth-passcode,sudo"])
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS
    assert verifications() == 2
    assert pam.record().P == 0


def test_missing_passcode_service_is_passcode_not_set(pam):
    pam.write_owner_stack(args="passcode_service=no-such-service")
    pam.write_service("sudo-strict", [pam.module_line("required", "passcode_service=no-such-service services=sudo-strict")])
    # libpam runs the "other" stack (pam_deny) for a missing service: it never
    # asks, so the entry is refunded rather than counted against the owner.
    run = pam.run(service="sudo-strict", answers=[ALICE])
    assert run.code == PAM_AUTHINFO_UNAVAIL
    assert pam.record().P == 0
    # In the owner stack, the next module takes over.
    assert pam.run(answers=[ALICE]).ignored


def test_unknown_user_looks_like_a_known_user_without_biometrics(pam):
    known = pam.run(user="alice", answers=["wrong"])
    unknown = pam.run(user="mallory", answers=["wrong"])
    assert unknown.code == known.code == PAM_AUTH_ERR
    assert unknown.messages == known.messages
    assert unknown.fail_delay and unknown.fail_delay > 0
    # The unknown name is counted in a look-alike record under a name hash,
    # never under a uid.
    assert [n for n in pam.state_files() if n.endswith(".rec")] == ["1001.rec", "lookalike.rec"]
    assert lookalike_records((pam.state / "lookalike.rec").read_bytes())["mallory"].P == 1


def test_five_tries_cannot_tell_a_known_name_from_an_unknown_one(pam):
    pam.write_owner_stack(args="passcode_backoff=5:1h")
    for attempt in range(5):
        assert pam.run(user="alice", answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
        assert pam.run(user="mallory", answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    known = pam.run(user="alice", answers=["again"])
    unknown = pam.run(user="mallory", answers=["again"])
    assert known.code == unknown.code == PAM_CRED_INSUFFICIENT
    assert known.messages == unknown.messages == [("error", "Too many wrong passwords. Try again in 1 hour.")]


def test_unknown_user_correct_matrix_password_still_fails(pam):
    (pam.passdb).write_text(pam.passdb.read_text() + "ghost:ghost-pw:localauth-passcode\n")
    run = pam.run(user="ghost", answers=["ghost-pw"])
    assert run.code == PAM_AUTH_ERR


def test_damaged_record_locks_biometrics_and_starts_the_first_backoff(pam):
    pam.write_owner_stack(args="passcode_backoff=5:2s")
    pam.state.joinpath("1001.rec").write_bytes(b"\x00garbage" * 10)
    os.chmod(pam.state / "1001.rec", 0o600)
    refused = pam.run(answers=[ALICE])
    assert refused.code == PAM_CRED_INSUFFICIENT and refused.prompts() == []
    record = pam.record()
    assert (record.F, record.P) == (5, 5) and record.backoff_ms > 0
    run = pam.run(answers=[ALICE], wrapper=later_boot_clock(3))   # past the 2 s wait
    assert run.prompts() == ["Enter Password: "]
    assert run.code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o750])
def test_unsafe_state_directory_never_grants(pam, mode):
    os.chmod(pam.state, mode)  # 0700 only: others may not even list the uids
    run = pam.run(answers=[ALICE])
    assert run.code == PAM_SYSTEM_ERR
    assert pam.state_files() == []


def test_malformed_options_are_ignored_without_weakening(pam):
    pam.write_owner_stack(args="max_tries=banana lockout=999 bogus=1 passcode_backoff=garbage timeout=-4")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS
    # passcode_backoff=garbage is ignored, so the default schedule (5:1m,...)
    # still applies: five wrong entries, then the sixth is refused unasked.
    for attempt in range(5):
        run = pam.run(answers=[f"wrong-{attempt}"])
        assert run.code == PAM_AUTH_ERR and run.prompts() == ["Enter Password: "]
    assert pam.record().P == 5
    refused = pam.run(answers=[ALICE])
    assert refused.code == PAM_CRED_INSUFFICIENT
    assert refused.prompts() == []
    assert refused.messages == [("error", "Too many wrong passwords. Try again in 1 minute.")]
    record = pam.record()
    assert record.P == 5 and 0 < record.backoff_ms <= 60_000


def test_config_file_must_be_root_owned_and_not_writable_by_others(pam):
    pam.conf.write_text("passcode_backoff = 1:1h\n")
    os.chmod(pam.conf, 0o644)
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).prompts() == []  # the file's back-off applies
    pam.record_path().unlink()
    os.chmod(pam.conf, 0o666)  # world-writable: ignored, defaults apply
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS


def test_arguments_win_over_the_config_file(pam):
    pam.conf.write_text("passcode_backoff = 1:1h\n")
    os.chmod(pam.conf, 0o600)
    pam.write_owner_stack(args="passcode_backoff=5:1h")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS


def test_inner_fail_delay_is_a_no_op_and_the_outer_delay_is_requested(pam):
    # pam_faildelay in the passcode stack asks for 10 s after the wrong entry.
    # The inner handle's PAM_FAIL_DELAY callback ignores it; the delay is the
    # application's, requested on the outer handle (the harness records it).
    pam.write_service("localauth-passcode", [
        "auth optional pam_faildelay.so delay=10000000",
        f"auth required {PAM_MATRIX} passdb={pam.passdb}",
    ])
    started = time.monotonic()
    run = pam.run(answers=["wrong"], timeout=9)
    assert time.monotonic() - started < 9
    assert run.code == PAM_AUTH_ERR
    assert run.fail_delay and run.fail_delay > 0
    assert pam.record().P == 1


@pytest.mark.parametrize("layout", ["open-directory", "symlinked-directory"])
def test_config_file_in_an_unsafe_directory_is_ignored(pam, layout):
    real = pam.base / "confdir"
    real.mkdir()
    (real / "localauth.conf").write_text("passcode_backoff = 1:1h\n")
    os.chmod(real / "localauth.conf", 0o600)
    if layout == "open-directory":
        os.chmod(real, 0o777)  # anyone could swap the file
        path = real / "localauth.conf"
    else:
        (pam.base / "link").symlink_to(real)
        path = pam.base / "link" / "localauth.conf"
    pam.write_owner_stack(args=f"conf={path}")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS  # the file's 1 h back-off did not apply


# ---- R3: a kill at the verdict never yields an uncounted guess ----

from fprint_rig import proc_gone  # noqa: E402
from pamenv import read_until  # noqa: E402


def assert_sound_record(pam, user="alice"):
    """A regular, root-owned 0600 file holding a valid, checksummed record."""
    from test_store import decode_record
    path = pam.record_path(user)
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600
    decoded = decode_record(path.read_bytes(), uid=int(path.stem), name=user)
    assert not [name for name in pam.record_files() if not name.endswith((".rec", ".lock"))], pam.state_files()
    return decoded


def verification_in_progress_stack(pam):
    """The passcode service with a pam_exec line before pam_matrix that writes
    its pid to a flag file and then sleeps (at most 30 s): once the flag is
    there, the inner transaction is verifying the entry and no verdict exists
    yet. Returns the flag's path."""
    flag = pam.base / "verifying"
    script = pam.base / "verifying.sh"
    script.write_text(f"#!/bin/sh\necho $$ > {flag}\nexec /usr/bin/sleep 30\n")
    script.chmod(0o755)
    pam.write_service("localauth-passcode", [
        f"auth required pam_exec.so quiet {script}",
        f"auth required {PAM_MATRIX} passdb={pam.passdb}",
    ])
    return flag


@pytest.mark.parametrize("entry", ["wrong-guess", ALICE], ids=["wrong-entry", "correct-entry"])
def test_sigkill_during_the_verification_leaves_the_entry_counted(pam, entry):
    flag = verification_in_progress_stack(pam)
    proc = pam.spawn(answers=[entry])
    verifier_pid = None
    try:
        shown = read_until(proc, "prompt-off: Enter Password: ")
        deadline = time.monotonic() + 30  # a bound on the cue, not a policy timer
        while not (flag.exists() and flag.read_text().endswith("\n")):
            assert proc.poll() is None, "the prompt ended before the verification ran"
            assert time.monotonic() < deadline, "the passcode stack never started verifying"
            time.sleep(0.005)
        verifier_pid = int(flag.read_text())
        assert proc.poll() is None and not proc_gone(verifier_pid)
        proc.kill()   # the harness first, so the inner stack can never reach a verdict
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        rest, _ = proc.communicate(timeout=30)
        if verifier_pid is not None and not proc_gone(verifier_pid):
            os.kill(verifier_pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not proc_gone(verifier_pid):
        assert time.monotonic() < deadline, "the pam_exec child outlived its SIGKILL"
        time.sleep(0.005)
    output = shown + rest
    assert "result:" not in output and "faildelay:" not in output, output  # no verdict was ever reached

    # Charged before the verdict, and the kill refunded nothing.
    on_disk = assert_sound_record(pam)
    assert (on_disk["F"], on_disk["P"]) == (0, 1)
    assert pam.record().failures == 1

    # The owner's next correct entry is asked for (the record is sound, so no
    # fail-closed back-off) and resets the count.
    pam.write_service("localauth-passcode", [f"auth required {PAM_MATRIX} passdb={pam.passdb}"])
    after = pam.run(answers=[ALICE])
    assert after.code == PAM_SUCCESS
    assert after.messages == [("prompt-off", "Enter Password: ")]
    on_disk = assert_sound_record(pam)
    assert (on_disk["F"], on_disk["P"], on_disk["backoff_ms"]) == (0, 0, 0)
