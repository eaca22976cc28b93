"""The shipped pam.d files, run through real libpam with the real module
(pam_unix swapped for a test module that checks pam_matrix's password file and keeps the token as pam_unix does, non-auth lines dropped) to show they keep
The stack-line principles' promises: success skips the password line, a wrong passcode ends
the stack, and every path that skips the module meets a password check."""
import pytest

from pamenv import MATRIX_PROMPT, PAM_AUTH_ERR, PAM_CONV_ERR, PAM_SUCCESS, PASSWORDS, ROOT, install_shipped_stack as install

ALICE = PASSWORDS["alice"]
OWNER_PROMPT = "Enter Password: "


def test_passcode_service_is_an_explicit_list_and_denies_other_uses():
    text = (ROOT / "pam.d" / "localauth-passcode").read_text()
    rules = [l.split() for l in text.splitlines() if l.strip() and not l.startswith("#")]
    assert [r[:3] for r in rules if r[0] == "auth"] == [["auth", "required", "pam_unix.so"]]
    assert all(r[2] == "pam_deny.so" for r in rules if r[0] != "auth")
    assert "@include" not in text.replace("never \"@include", "")
    for forbidden in ("pam_fprintd", "pam_rootok", "pam_permit", "pam_u2f", "pam_oath"):
        assert forbidden not in "\n".join(" ".join(r) for r in rules)


@pytest.mark.parametrize("name", ["sudo", "su", "login", "sudo-biometrics"])
def test_no_done_on_our_lines(name):
    for line in (ROOT / "pam.d" / name).read_text().splitlines():
        if "pam_localauth.so" in line and not line.startswith("#"):
            assert "done" not in line and "sufficient" not in line


@pytest.mark.parametrize("name", ["sudo", "su", "login"])
def test_owner_stack_correct_passcode_skips_the_password_line(pam, name):
    install(pam, name)
    run = pam.run(service=name, answers=[ALICE])
    assert run.code == PAM_SUCCESS
    assert run.prompts() == [OWNER_PROMPT]


@pytest.mark.parametrize("name", ["sudo", "su", "login"])
def test_owner_stack_wrong_passcode_ends_the_stack(pam, name):
    install(pam, name)
    run = pam.run(service=name, answers=["wrong", ALICE])
    assert run.code == PAM_AUTH_ERR
    assert run.prompts() == [OWNER_PROMPT]
    assert pam.record().P == 1


@pytest.mark.parametrize("name", ["sudo", "su", "login"])
def test_owner_stack_cancel_ends_the_stack(pam, name):
    install(pam, name)
    assert pam.run(service=name, answers=[""]).code == PAM_CONV_ERR


@pytest.mark.parametrize("name", ["sudo", "su"])
def test_owner_stack_out_of_scope_meets_the_password_line(pam, name):
    install(pam, name)
    good = pam.run(service=name, user="alice", ruser="bob", answers=[ALICE])
    assert good.code == PAM_SUCCESS and good.prompts() == [MATRIX_PROMPT]
    bad = pam.run(service=name, user="alice", ruser="bob", answers=["wrong"])
    assert bad.code == PAM_AUTH_ERR
    assert pam.state_files() == []


def test_owner_stack_without_passcode_service_meets_the_password_line(pam):
    install(pam, "sudo", "passcode_service=missing-service")
    run = pam.run(service="sudo", answers=[ALICE, ALICE])
    assert run.code == PAM_SUCCESS
    assert run.prompts() == [OWNER_PROMPT, MATRIX_PROMPT]
    bad = pam.run(service="sudo", answers=["x", "wrong"])
    assert bad.code == PAM_AUTH_ERR


def test_login_unknown_user_fails_like_a_wrong_passcode(pam):
    install(pam, "login")
    known = pam.run(service="login", user="alice", answers=["wrong"])
    unknown = pam.run(service="login", user="nosuchuser", answers=["wrong"])
    assert known.code == unknown.code == PAM_AUTH_ERR
    assert known.messages == unknown.messages


def test_biometrics_stack_hands_over_and_authsucc_resets(pam):
    pam.write_owner_stack("sudo")
    for attempt in range(2):
        assert pam.run(service="sudo", answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    install(pam, "sudo-biometrics")
    bad = pam.run(service="sudo-biometrics", answers=["wrong"])
    assert bad.code == PAM_AUTH_ERR and bad.prompts() == [MATRIX_PROMPT]
    assert pam.record().P == 2
    good = pam.run(service="sudo-biometrics", answers=[ALICE])
    assert good.code == PAM_SUCCESS
    assert pam.record().P == 0
