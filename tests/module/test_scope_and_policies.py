"""Scope (R1), the biometrics policy's hand-over (§4) and the authsucc reset
(R11), through real libpam with the real module and no fprintd running."""
import os
import subprocess

import pytest

from pamenv import (MODULE, PAM_AUTHINFO_UNAVAIL, PAM_AUTH_ERR, PAM_KEEPTOK, PAM_SET_ITEMS, PAM_SUCCESS,
                    PAM_SYSTEM_ERR, PASSWORDS, parse_run)
from pamenv import open_to_others, world_readable_pam

ALICE = PASSWORDS["alice"]


def charge_wrong_passcodes(pam, user, count):
    for attempt in range(count):
        assert pam.run(user=user, answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    assert pam.record(user).P == count


@pytest.mark.parametrize("service", ["cron", "sshd", "passwd"])
def test_service_outside_services_is_ignored_and_touches_nothing(pam, service):
    pam.write_owner_stack(service)
    run = pam.run(service=service, answers=["wrong"])
    assert run.ignored
    assert run.prompts() == []  # the module asked nothing
    assert pam.state_files() == []


def test_services_option_brings_a_service_into_scope(pam):
    pam.write_owner_stack("cron", args="services=cron")
    assert pam.run(service="cron", answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 1


def test_another_requester_is_ignored_and_touches_nothing(pam):
    run = pam.run(user="alice", ruser="bob", answers=["wrong"])
    assert run.ignored
    assert pam.state_files() == []


def test_requester_naming_the_target_is_in_scope(pam):
    assert pam.run(user="alice", ruser="alice", answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 1


@pytest.mark.parametrize("rhost", ["203.0.113.9", "attacker.example", "10.1.2.3", "localhost"])
def test_remote_host_is_ignored_and_touches_nothing(pam, rhost):
    run = pam.run(rhost=rhost, answers=["wrong"])
    assert run.ignored
    assert pam.state_files() == []


@pytest.mark.parametrize("rhost", ["127.0.0.1", "127.0.1.1", "::1", os.uname().nodename])
def test_local_host_names_are_in_scope(pam, rhost):
    # Names other than this host's own (which sudo sets) may come from an
    # attacker's reverse DNS: only loopback literals and sudo's own name count.
    assert pam.run(rhost=rhost, answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 1


def test_a_caller_of_another_uid_cannot_touch_a_users_record():
    """bob (uid 1002) starting a transaction for alice: out of scope."""
    with world_readable_pam("localauth-uid-") as pam:
        open_to_others(pam)
        proc = subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups"] +
                              pam.harness_args("sudo", "alice", ["wrong"]), env=pam.env(), capture_output=True, text=True,
                              timeout=60)
        run = parse_run(proc.stdout, proc.stderr)
        assert run.ignored, proc.stdout + proc.stderr
        assert pam.state_files() == []


def biometrics_stack(pam, name="sudo-bio", between=()):
    """Policy biometrics: our line, a mandatory password module, then
    the authsucc line reached only through the password module's success."""
    pam.write_service(name, [
        pam.module_line("[success=3 conv_err=die default=ignore]", f"policy=biometrics services={name}"),
        *between,
        f"auth [success=1 default=die] {PAM_KEEPTOK} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        pam.module_line("optional", f"authsucc services={name}"),
        "auth required pam_permit.so",
    ])


def test_biometrics_policy_without_a_sensor_is_authinfo_unavail(pam):
    pam.write_service("bio-raw", [pam.module_line("required", "policy=biometrics services=bio-raw")])
    run = pam.run(service="bio-raw", answers=[ALICE])
    assert run.code == PAM_AUTHINFO_UNAVAIL
    assert run.prompts() == []
    assert not pam.record_path().exists() or (pam.record().F, pam.record().P) == (0, 0)


def test_biometrics_policy_hands_over_to_the_password_module(pam):
    biometrics_stack(pam)
    run = pam.run(service="sudo-bio", answers=[ALICE])
    assert run.code == PAM_SUCCESS
    assert run.prompts() == ["Password: "]  # pam_matrix's own prompt
    wrong = pam.run(service="sudo-bio", answers=["wrong"])
    assert wrong.code == PAM_AUTH_ERR


def test_authsucc_resets_after_the_password_module_succeeds(pam):
    charge_wrong_passcodes(pam, "alice", 3)
    biometrics_stack(pam)
    assert pam.run(service="sudo-bio", answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 3  # the password module failed: authsucc not reached
    assert pam.run(service="sudo-bio", answers=[ALICE]).code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_authsucc_without_this_modules_prompt_resets_nothing(pam):
    charge_wrong_passcodes(pam, "alice", 3)
    pam.write_service("no-marker", [
        f"auth [success=1 default=die] {PAM_KEEPTOK} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        pam.module_line("optional", "authsucc services=no-marker"),
        "auth required pam_permit.so",
    ])
    assert pam.run(service="no-marker", answers=[ALICE]).code == PAM_SUCCESS
    assert pam.record().P == 3


def test_authsucc_reached_after_a_wrong_password_resets_nothing(pam):
    """A misplaced authsucc line (here reached whatever the password line
    answered, as a pam_deny line libpam does not read in the caller's locale
    would leave it) must not reset after a wrong password: the token a
    password module stored, right or wrong, must pass the passcode service
    first. The right password still resets."""
    charge_wrong_passcodes(pam, "alice", 3)
    pam.write_service("loose", [
        pam.module_line("[success=3 conv_err=die default=ignore]", "policy=biometrics services=loose"),
        f"auth [success=ok default=bad] {PAM_KEEPTOK} passdb={pam.passdb}",
        pam.module_line("optional", "authsucc services=loose"),
        "auth required pam_permit.so",
    ])
    wrong = pam.run(service="loose", answers=["wrong"])
    assert wrong.code == PAM_AUTH_ERR, wrong
    assert pam.record().P == 3, "a wrong password reset the counts"
    assert pam.run(service="loose", answers=[ALICE]).code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_authsucc_for_another_uid_than_the_marker_resets_nothing(pam):
    charge_wrong_passcodes(pam, "alice", 2)
    charge_wrong_passcodes(pam, "bob", 2)
    # pam_set_items switches PAM_USER to bob after our module marked alice.
    biometrics_stack(pam, between=[f"auth optional {PAM_SET_ITEMS}"])
    run = pam.run(service="sudo-bio", user="alice", answers=[PASSWORDS["bob"]], env={"PAM_USER": "bob"})
    assert run.code == PAM_SUCCESS
    assert pam.record("bob").P == 2
    assert pam.record("alice").P == 2


def test_account_management_and_setcred_never_fail_and_never_reset(pam):
    charge_wrong_passcodes(pam, "alice", 2)
    pam.write_service("acct", [f"auth required {PAM_KEEPTOK} passdb={pam.passdb}",
                               f"auth optional {MODULE} state_dir={pam.state} services=acct authsucc",
                               f"account required {MODULE} state_dir={pam.state} services=acct",
                               "account required pam_permit.so"])
    run = pam.run(service="acct", answers=[ALICE], account=True)
    assert (run.code, run.setcred, run.account) == (PAM_SUCCESS, PAM_SUCCESS, PAM_SUCCESS)
    assert pam.record().P == 2


def test_this_hosts_name_counts_as_local_only_for_sudo(pam):
    pam.write_owner_stack("login", args="services=login")
    run = pam.run(service="login", rhost=os.uname().nodename, answers=["wrong"])
    assert run.ignored
    assert pam.state_files() == []


def test_without_root_the_module_steps_aside():
    """A screen locker runs as the user: without the privileged helper the
    state cannot be kept, so the module ignores rather than lock the user out."""
    with world_readable_pam("localauth-nonroot-") as pam:
        pam.write_owner_stack("swaylock")
        open_to_others(pam)
        proc = subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups"] +
                              pam.harness_args("swaylock", "bob", ["wrong"]), env=pam.env(), capture_output=True,
                              text=True, timeout=60)
        run = parse_run(proc.stdout, proc.stderr)
        assert run.ignored, proc.stdout + proc.stderr
        assert pam.state_files() == []


def test_a_line_with_more_arguments_than_the_module_reads_is_refused(pam):
    """libpam passes any number of arguments; the module reads at most 256.
    A line with more would run as a shorter line than the one written (and
    the lint judges): the module refuses it, asks nothing and touches
    nothing, and says why in the log; with 256 it runs."""
    # With state_dir= and conf=, 255 more make 257; libpam reads a line of at most 1023 bytes.
    pam.write_owner_stack(args=" ".join(["x"] * 254) + " silent")
    run = pam.run(answers=["wrong"])
    assert run.code == PAM_SYSTEM_ERR and run.prompts() == [], run    # default=die: the stack fails, unasked
    assert "more than 256 arguments" in run.stderr, run.stderr
    assert pam.state_files() == []
    pam.write_owner_stack(args=" ".join(["x"] * 253) + " silent")      # 256 in all
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 1
