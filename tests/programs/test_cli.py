"""The `localauth` command, launched as a built binary ."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pamenv import PAM_AUTH_ERR, PASSWORDS, ROOT, localauth_command, without_wrapper_lines
from pamenv import USERS, open_to_others, read_only_state, run_in_terminal, runtime_dir, world_readable_pam
from fprint_rig import FprintRig

ALICE = PASSWORDS["alice"]


@pytest.fixture(scope="session")
def cli():
    return localauth_command()


@pytest.fixture
def tool(pam, cli):
    """Runs localauth with the test's users, state dir and PAM services."""
    pam.conf.write_text(f"state_dir = {pam.state}\n")
    os.chmod(pam.conf, 0o600)

    def run(*args, env=None, conf=True, preexec=None, uid=None):
        command = [str(cli), *args]
        if conf and args and args[0] in ("status", "check", "reset", "test"):
            command += ["--conf", str(pam.conf)]
        if uid is not None:
            command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] + command
        result = subprocess.run(command, env=pam.env(env), capture_output=True, text=True, timeout=60)
        result.stderr = without_wrapper_lines(result.stderr)
        return result
    return run


def commands_and_options(cli):
    """{command: its options} as `localauth --help` lists the commands and
    each command's --help its usage (both from the tool's one table)."""
    usage = subprocess.run([str(cli), "--help"], capture_output=True, text=True, check=True).stdout
    listed = re.findall(r"^  ([a-z]+) ", usage.split("commands:\n", 1)[1].split("\n\n", 1)[0], re.M)
    found = {}
    for command in listed:
        result = subprocess.run([str(cli), command, "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and result.stdout.startswith(f"usage: localauth {command}"), result
        synopsis = re.split(r"\n  (?=\S)", result.stdout, maxsplit=1)[0]   # the usage, before the help's text
        found[command] = set(re.findall(r"--[a-z-]+", synopsis))
    return found


def test_help_and_usage_errors(cli):
    assert subprocess.run([str(cli)], capture_output=True).returncode == 2
    assert set(commands_and_options(cli)) == {"status", "check", "reset", "test", "evaluate", "secret", "config"}
    bad = subprocess.run([str(cli), "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown command" in bad.stderr and bad.stdout == ""
    bad = subprocess.run([str(cli), "status", "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown option '--bogus'" in bad.stderr


def test_the_man_page_synopsis_is_the_tools_table(cli):
    """localauth(1)'s SYNOPSIS names every command the tool has, each with
    the options its --help gives, and nothing else."""
    page = (ROOT / "man" / "localauth.1").read_text()
    synopsis = page.split(".SH SYNOPSIS\n", 1)[1].split(".SH ", 1)[0]
    documented = {}
    for block in synopsis.split(".br\n"):
        match = re.match(r"\.B localauth ([a-z]+)", block)
        if match:
            documented[match.group(1)] = set(re.findall(r"--[a-z-]+", block.replace("\\-", "-")))
    assert documented == commands_and_options(cli)


def test_status_shows_counters_failures_and_configuration(pam, tool):
    for attempt in range(2):
        assert pam.run(answers=[f"wrong-{attempt}"], tty="/dev/pts/9", rhost="127.0.0.1").code == PAM_AUTH_ERR
    text = tool("status", "--user", "alice")
    assert text.returncode == 0, text.stderr
    assert "user: alice (uid 1001)" in text.stdout
    assert "password: 2 consecutive wrong, no wait" in text.stdout
    assert "fingerprint: 0 consecutive failures of 5, not locked" in text.stdout
    assert "password  service=sudo  tty=/dev/pts/9  rhost=127.0.0.1" in text.stdout
    assert f"state_dir = {pam.state}  ({pam.conf})" in text.stdout
    assert "max_tries = 3  (default)" in text.stdout
    data = json.loads(tool("status", "--user", "alice", "--json").stdout)
    assert data["user"] == "alice" and data["uid"] == 1001
    assert data["passcode"]["failures"] == 2 and data["passcode"]["backoff_remaining_ms"] == 0
    assert data["fingerprint"] == {"failures": 0, "lockout": 5, "locked": False, "reason": None, "last_success": None}
    assert [f["kind"] for f in data["recent_failures"]] == ["passcode", "passcode"]
    assert data["recent_failures"][0]["tty"] == "/dev/pts/9" and data["recent_failures"][0]["rhost"] == "127.0.0.1"
    assert data["recent_failures"][0]["service"] == "sudo" and data["recent_failures"][0]["time"] > 1_700_000_000
    assert data["sensor"]["availability"] == "unreachable"
    sources = {row["key"]: row["source"] for row in data["config"]}
    assert sources["state_dir"] == str(pam.conf) and sources["lockout"] == "default"
    # The whole list of services (over 200 characters by default), in both.
    services = next(line for line in text.stdout.splitlines() if line.strip().startswith("services = "))
    shown = services.split(" = ", 1)[1].split("  (", 1)[0].split(",")
    assert len(",".join(shown)) > 200 and shown[0] == "sudo" and shown[-1] == "localauth-app", services
    assert {row["key"]: row["value"] for row in data["config"]}["services"] == ",".join(shown)


def test_status_reports_the_wait_and_a_damaged_record(pam, tool):
    pam.write_owner_stack(args="passcode_backoff=1:1h")
    pam.run(answers=["wrong"])
    data = json.loads(tool("status", "--user", "alice", "--json").stdout)
    assert 3_500_000 < data["passcode"]["backoff_remaining_ms"] <= 3_600_000
    pam.record_path().write_bytes(b"garbage")
    data = json.loads(tool("status", "--user", "alice", "--json").stdout)
    assert data["record"]["status"] == "damaged" and data["fingerprint"]["locked"] is True
    assert pam.record_path().read_bytes() == b"garbage"  # status changes nothing


def test_status_says_when_a_read_only_disk_sends_the_counting_to_run(pam, tool, cli):
    """The state directory's filesystem mounted read-only (in a namespace
    root made, as the system's own mounts are): status says the counting
    goes on in /run/localauth, in words and in JSON, with the count a
    prompt would start from there (and makes no record there: it only
    looks); on a writable disk it says nothing."""
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert json.loads(tool("status", "--user", "alice", "--json").stdout)["counting_in_run"] is None
    read_only = ["unshare", "--mount", "--propagation", "private", "sh", "-ec", read_only_state(pam.state) + '; exec "$@"', "sh"]
    for extra in ([], ["--json"]):
        result = subprocess.run(read_only + [str(cli), "status", "--user", "alice", "--conf", str(pam.conf), *extra],
                                env=pam.env(), capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        if extra:
            data = json.loads(result.stdout)
            assert data["counting_in_run"] == "state directory read-only: counting in /run/localauth until it is writable"
            # The count a prompt starts from there: the disk's 1, raised to one short of the first wait.
            assert data["passcode"]["failures"] == 4, data
            assert data["fingerprint"]["failures"] == 4, data
        else:
            assert ("state directory read-only: counting in /run/localauth until it is writable (from one short of each limit; "
                    "the finger, the back-off and the lockout as on a writable disk)") in result.stdout.splitlines(), result.stdout
    assert not (runtime_dir(pam.state) / f"{USERS['alice']}.rec").exists()


def test_non_root_may_ask_only_about_themselves(cli):
    """As bob (uid 1002): the same refusal whether or not the user exists (R14)."""
    with world_readable_pam("localauth-cli-") as world:
        open_to_others(world)
        env = world.env()
        env["LD_PRELOAD"] = "libnss_wrapper.so"

        def as_bob(*args):
            return subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups", str(cli), *args],
                                  env=env, capture_output=True, text=True, timeout=60)
        for user in ("alice", "nosuchuser"):
            denied = as_bob("status", "--user", user)
            assert denied.returncode == 3, denied.stderr
            assert denied.stderr == "localauth: only root may ask about another user\n"
        assert as_bob("reset", "--user", "bob").returncode == 3
        assert as_bob("check", "--user", "alice").returncode == 3
        # About himself, a user's check goes through the setuid helper, which
        # is not installed on this host: a clear error, never an answer.
        own_check = as_bob("check", "--policy", "biometrics")
        assert own_check.returncode == 1, own_check.stderr
        assert "localauth-helper cannot be used" in own_check.stderr and "not installed" in own_check.stderr
        own = as_bob("status", "--user", "bob")
        assert own.returncode == 0, own.stderr
        assert "user: bob (uid 1002)" in own.stdout
        assert "record: not readable (run as root to see the counters)" in own.stdout


def test_check_passcode_not_set_when_the_passcode_stack_cannot_start(pam, tool):
    # No passcode service and no "other" service: libpam cannot start it.
    (pam.services / "localauth-passcode").unlink()
    (pam.services / "other").unlink()
    result = tool("check", "--user", "alice")
    assert result.returncode == 10, result.stderr
    assert result.stderr == "passcodeNotSet\n", result.stderr


def test_check_exit_codes_without_a_sensor(pam, tool):
    owner = tool("check", "--user", "alice")
    assert owner.returncode == 0, owner.stderr
    bio = tool("check", "--user", "alice", "--policy", "biometrics", "--json")
    assert bio.returncode == 11 and bio.stderr == "biometryNotAvailable\n"
    data = json.loads(bio.stdout)
    assert data == {"user": "alice", "policy": "biometrics", "can_evaluate": False, "error": "biometryNotAvailable",
                    "error_code": -6, "domain_state": None, "fingerprint_blocked": None}
    assert not pam.record_path().exists()  # the preflight charges nothing


def test_check_and_status_with_the_virtual_sensor(pam, tool):
    with FprintRig() as rig:
        rig.enroll("alice")
        env = rig.env()
        # The first prompt of a boot asks for the password: the check says so.
        first = tool("check", "--user", "alice", "--policy", "biometrics", "--json", env=env)
        assert first.returncode == 13 and first.stderr == "biometryLockout (password required: after restart)\n", first.stderr
        assert json.loads(first.stdout)["fingerprint_blocked"] == "password required: after restart"
        before = json.loads(tool("status", "--user", "alice", "--json", env=env).stdout)
        assert before["passcode_required"] == "password required: after restart"
        assert before["logind"] == {"present": False, "fingerprint_blocked": None}, before["logind"]
        assert "logind: not on the system bus; the session, screen-lock and lid rules do not apply" in \
            tool("status", "--user", "alice", env=env).stdout
        pam.password_entered("alice", rig)
        assert json.loads(tool("status", "--user", "alice", "--json", env=env).stdout)["passcode_required"] == "no"
        ok = tool("check", "--user", "alice", "--policy", "biometrics", "--json", env=env)
        assert ok.returncode == 0, ok.stderr
        assert len(json.loads(ok.stdout)["domain_state"]) == 64
        assert tool("check", "--user", "bob", "--policy", "biometrics", env=env).returncode == 12
        status = json.loads(tool("status", "--user", "alice", "--json", env=env).stdout)
        assert status["sensor"]["availability"] == "available"
        assert status["sensor"]["fingers"] == ["right-index-finger"]
        assert status["sensor"]["domain_state"] == json.loads(ok.stdout)["domain_state"]
        assert status["sensor"]["device"].startswith("/net/reactivated/Fprint/Device/")
        for count in (3, 2):
            rig.feed(["SCAN nope"] * count)
            pam.run(answers=["", "wrong"], env=env)
            rig.feed_wait(timeout=30)
        locked = tool("check", "--user", "alice", "--policy", "biometrics", env=env)
        assert locked.returncode == 13 and locked.stderr == "biometryLockout\n"
        assert tool("check", "--user", "alice", env=env).returncode == 0  # owner: the password still works
        text = tool("status", "--user", "alice", env=env).stdout
        assert "LOCKED: 5 consecutive failed fingerprint attempts" in text


def test_reset_clears_counters_and_is_root_only(pam, tool):
    for attempt in range(3):
        pam.run(answers=[f"wrong-{attempt}"])
    assert pam.record().P == 3
    result = tool("reset", "--user", "alice")
    assert result.returncode == 0 and "password failures 3 -> 0" in result.stdout
    assert (pam.record().F, pam.record().P, pam.record().backoff_ms) == (0, 0, 0)
    assert tool("reset", "--user", "nosuchuser").returncode == 4


def test_test_verb_runs_a_real_evaluation(pam, tool, cli):
    with FprintRig() as rig:
        rig.enroll("alice")
        pam.password_entered("alice", rig)  # the first password of this boot: the finger is enough now
        command = [str(cli), "test", "--user", "alice", "--conf", str(pam.conf), "--reason", "Trying localauth"]
        rig.feed(["SCAN finger-alice"])
        code, output = run_in_terminal(command, pam.env(rig.env()), [])
        rig.feed_wait(timeout=30)
        assert code == 0, output
        # At a terminal: touch or type, as sudo's prompt.
        assert "Trying localauth. Swipe your finger across the fingerprint reader or type your password:" in output
        assert "authenticated: fingerprint" in output
        rig.feed(["SCAN nope"] * 3)
        code, output = run_in_terminal(command, pam.env(rig.env()), [ALICE])
        rig.feed_wait(timeout=30)
        assert code == 0 and "authenticated: password" in output, output
        assert ALICE not in output  # echo was off
        assert (pam.record().F, pam.record().P) == (0, 0)
        code, output = run_in_terminal(command, pam.env(rig.env()), ["wrong"])
        assert code == 1 and "not authenticated: authenticationFailed (-1)" in output
        # `sudo localauth test` (root, SUDO_USER set, no --user): the prompt of
        # the person who ran sudo, said first.
        own = [str(cli), "test", "--conf", str(pam.conf)]
        rig.feed(["SCAN finger-alice"])
        code, output = run_in_terminal(own, pam.env(dict(rig.env(), SUDO_USER="alice")), [])
        rig.feed_wait(timeout=30)
        assert code == 0, output
        assert output.index("Testing the prompt of alice, who ran sudo") < output.index("authenticated: fingerprint"), output
        # Root itself: whose prompt this is, and how to try one's own.
        env = pam.env(rig.env())
        env.pop("SUDO_USER", None)
        code, output = run_in_terminal(own, env, [""])
        assert code == 1 and "Testing root's own prompt. To try yours: `sudo localauth test`" in output, output


def lint(cli, directory, config=None, passwd="files"):
    """`config --check` of `directory`, with an nsswitch.conf whose passwd
    line lists `passwd` (local accounts only, unless a test says otherwise)."""
    nsswitch = Path(directory).parent / "nsswitch.conf"
    nsswitch.write_text(f"passwd: {passwd}\ngroup: files\n")
    args = [str(cli), "config", "--check"] + ([str(config)] if config else ["/nonexistent.conf"]) + ["--pam-dir", str(directory),
                                                                                                   "--nsswitch", str(nsswitch)]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def test_config_check_warns_when_directory_accounts_cannot_be_checked(cli, tmp_path):
    """An sssd machine with the shipped passcode service (pam_unix alone):
    every right password of a directory account would fail and count as
    wrong. The lint warns, names the module to add, and is content once the
    directory's module follows pam_unix."""
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d" / "localauth-passcode").read_text())
    result = lint(cli, pam_dir, passwd="files [NOTFOUND=return] sss")
    assert result.returncode == 0, result.stdout
    assert ("warning: localauth-passcode: accounts from 'sss' (nsswitch.conf, passwd) cannot be checked here, so their right "
            "password always fails and counts as wrong: add pam_krb5.so or pam_sss.so after pam_unix.so") in result.stdout, result.stdout
    assert "accounts from" not in lint(cli, pam_dir, passwd="files systemd").stdout
    (pam_dir / "localauth-passcode").write_text("auth [success=done default=ignore] pam_unix.so\n"
                                               "auth required pam_sss.so use_first_pass\n")
    fixed = lint(cli, pam_dir, passwd="files sss")
    assert fixed.returncode == 0 and "0 error(s), 0 warning(s)" in fixed.stdout, fixed.stdout


def test_config_check_judges_other_where_the_passcode_service_is_missing(cli, tmp_path):
    """libpam runs `other` for a service that has no file: with
    localauth-passcode missing, the password check is whatever `other`
    says. That is an error, and `other` is judged as the passcode service
    (here it would take any password)."""
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "sudo").write_text((ROOT / "pam.d/sudo").read_text())
    (pam_dir / "other").write_text("auth optional pam_unix.so\nauth required pam_permit.so\n")
    result = lint(cli, pam_dir)
    assert result.returncode == 1, result.stdout
    assert "localauth-passcode is missing: libpam would check the password with 'other' instead" in result.stdout
    assert "as the passcode service: other:2: pam_permit.so must not be in the passcode service" in result.stdout, result.stdout
    # A directory of that name: libpam opens it, reads no line and runs `other`.
    (pam_dir / "localauth-passcode").mkdir()
    result = lint(cli, pam_dir)
    assert result.returncode == 1 and "localauth-passcode" in result.stdout, result.stdout
    (pam_dir / "localauth-passcode").rmdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d/localauth-passcode").read_text())
    assert "is missing" not in lint(cli, pam_dir).stdout


def test_config_check_accepts_the_shipped_stacks(cli, tmp_path):
    """Every shipped stack under the name it is installed as: sudo-biometrics
    is an example for /etc/pam.d/sudo (under its own name it is no service
    in `services`, which the lint would say); kde-fingerprint is for Plasma 6
    with kde among the password services, which enabling it tells the
    administrator to set."""
    shipped_dir = tmp_path / "pam.d"
    shutil.copytree(ROOT / "pam.d", shipped_dir)
    plasma6 = tmp_path / "plasma6"
    plasma6.mkdir()
    (shipped_dir / "kde-fingerprint").rename(plasma6 / "kde-fingerprint")
    shutil.copy(shipped_dir / "localauth-passcode", plasma6 / "localauth-passcode")
    config = tmp_path / "plasma6.conf"
    config.write_text("password_services = gdm-password, kde\n")
    unset = lint(cli, plasma6)
    assert "kde runs beside kde-fingerprint but is not in password_services" in unset.stdout, unset.stdout
    result = lint(cli, plasma6, config)
    assert result.returncode == 0 and "0 error(s), 0 warning(s)" in result.stdout, result.stdout
    biometrics = tmp_path / "biometrics"
    biometrics.mkdir()
    (shipped_dir / "sudo-biometrics").rename(biometrics / "sudo")
    shutil.copy(shipped_dir / "localauth-passcode", biometrics / "localauth-passcode")
    for directory in (shipped_dir, biometrics):
        result = lint(cli, directory)
        assert result.returncode == 0, result.stdout
        assert "0 error(s), 0 warning(s)" in result.stdout, result.stdout
    # The shipped, commented configuration file, named relative to the current directory.
    shipped = subprocess.run([str(cli), "config", "--check", "config/localauth.conf", "--pam-dir", str(shipped_dir)], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    assert shipped.returncode == 0 and "0 error(s), 0 warning(s)" in shipped.stdout, shipped.stdout


def test_config_check_says_a_finding_of_an_included_file_once(cli, tmp_path):
    """Before localauth is enabled, on a laptop where pam_fprintd's profile
    is on: the pam_fprintd line of common-auth is one warning, naming the
    services that reach it, not one per service that includes common-auth."""
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d" / "localauth-passcode").read_text())
    (pam_dir / "common-auth").write_text("auth [success=2 default=ignore] pam_fprintd.so max-tries=1 timeout=10\n"
                                         "auth [success=1 default=ignore] pam_unix.so nullok try_first_pass\n"
                                         "auth requisite pam_deny.so\nauth required pam_permit.so\n")
    services = ["cron", "login", "su", "sudo", "sudo-i", "xscreensaver"]
    for name in services:
        (pam_dir / name).write_text("@include common-auth\n")
    result = lint(cli, pam_dir)
    warnings = [line for line in result.stdout.splitlines() if "pam_fprintd.so checks fingerprints outside" in line]
    assert len(warnings) == 1, result.stdout
    assert warnings[0].startswith("warning: common-auth:1: pam_fprintd.so"), warnings
    # The services a person knows (the module's `services`, in its order) first.
    assert warnings[0].endswith(f" (reached from sudo, sudo-i, su and {len(services) - 3} more)"), warnings
    assert "0 error(s), 1 warning(s)" in result.stdout, result.stdout
    # Enabled (the profile's line in common-auth): common-auth itself is no
    # service that could be missing from `services`.
    (pam_dir / "common-auth").write_text("auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so\n"
                                         "auth [success=1 default=ignore] pam_unix.so nullok try_first_pass\n"
                                         "auth requisite pam_deny.so\nauth required pam_permit.so\n")
    enabled = lint(cli, pam_dir)
    assert "common-auth: reaches pam_localauth.so" not in enabled.stdout, enabled.stdout
    assert "cron: reaches pam_localauth.so" in enabled.stdout, enabled.stdout


def test_config_check_names_each_problem(cli, tmp_path):
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "sudo").write_text("auth sufficient pam_localauth.so\nauth required pam_unix.so\n")
    (pam_dir / "su").write_text("auth [success=1 default=ignore] pam_localauth.so\nauth optional pam_permit.so\n")
    (pam_dir / "login").write_text("auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
                                   "auth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\n"
                                   "auth required pam_permit.so\n")
    (pam_dir / "localauth-passcode").write_text("@include common-auth\nauth sufficient pam_fprintd.so\n"
                                                "auth required pam_permit.so\n")
    (pam_dir / "common-auth").write_text("auth required pam_unix.so\n")
    config = tmp_path / "localauth.conf"
    config.write_text("max_tries = banana\n# fine\nlockout = 5\nwhatever = 1\n")
    os.chmod(config, 0o600)
    result = lint(cli, pam_dir, config)
    assert result.returncode == 1
    out = result.stdout
    assert "sudo:1: 'done' on the pam_localauth.so line" in out
    assert "su:1: when the module steps aside" in out and "can reach its end with no password asked" in out
    assert "login:1: a policy=biometrics line needs a later 'pam_localauth.so authsucc' line" in out
    assert "localauth-passcode:1: the passcode service must be an explicit list" in out
    assert "localauth-passcode:2: pam_fprintd.so must not be in the passcode service" in out
    assert "localauth-passcode:3: pam_permit.so must not be in the passcode service" in out
    assert "(line 1): expected a number" in out and "(line 4): unknown option" in out
    os.chmod(config, 0o666)
    assert "not owned by root or writable by group/others" in lint(cli, pam_dir, config).stdout


BAD_STACKS = {
    # gdm-fingerprint with pam_fprintd's line given to the module as optional:
    # the lines before it succeed for anyone, and nothing after it asks.
    "gdm-fingerprint-optional": ({"gdm-fingerprint": "auth requisite pam_nologin.so\n"
                                                     "auth required pam_succeed_if.so user != root quiet_success\n"
                                                     "auth optional pam_localauth.so policy=biometrics\n"},
                                 "gdm-fingerprint:3: when the module steps aside (out of scope, the biometrics fallback, no reader, "
                                 "a locked fingerprint) it answers authinfo_unavail, which this line turns into 'ignore', and "
                                 "from there the stack can reach its end with no password asked and no failure recorded (only "
                                 "optional modules, or a jump past the password line): it would succeed on the lines before it "
                                 "with no match and no password"),
    # The same line written as libpam reads it but a quick reading would
    # not: a setting given twice (the later wins), a continued line, a
    # jump that counts a substack as one line and so passes the password line.
    "setting-given-twice": ({"gdm-fingerprint": "auth required pam_succeed_if.so user != root quiet_success\n"
                                                "auth [success=ok authinfo_unavail=bad default=die authinfo_unavail=ignore] "
                                                "pam_localauth.so\n"},
                            "gdm-fingerprint:2: when the module steps aside"),
    "continued-line": ({"gdm-fingerprint": "auth required pam_succeed_if.so user != root quiet_success\n"
                                           "auth [success = ok default = ignore] \\\n    pam_localauth.so\n"},
                       "gdm-fingerprint:2: when the module steps aside"),
    "jump-over-a-substack": ({"sudo": "auth [success=3 authinfo_unavail=2 default=die] pam_localauth.so\nauth substack extras\n"
                                      "auth required pam_unix.so\nauth optional pam_permit.so\n",
                              "extras": "auth optional pam_env.so\nauth optional pam_env.so\nauth optional pam_env.so\n"},
                             "sudo:1: when the module steps aside"),
    # The authsucc line answers authinfo_unavail: 'required' fails every login.
    "authsucc-required": ({"sudo": "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
                                   "auth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\n"
                                   "auth required pam_localauth.so authsucc\nauth required pam_permit.so\n"},
                          "sudo:4: the authsucc line only records and always answers authinfo_unavail, which this line turns "
                          "into 'bad': every login that reaches it would fail; make it optional"),
    # Policy owner going on to the password line after a wrong passcode.
    "owner-default-ignore": ({"sudo": "auth [success=2 default=ignore] pam_localauth.so\n"
                                      "auth [success=1 default=ignore] pam_unix.so\nauth requisite pam_deny.so\n"
                                      "auth required pam_permit.so\n"},
                             "sudo:1: policy owner: auth_err must end the stack"),
    # Debian's sudo file with our line put before "@include common-auth": success=1 lands on pam_deny.
    "success-onto-deny": ({"sudo": "auth [success=1 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so\n"
                                   "@include common-auth\n",
                           "common-auth": "auth [success=1 default=ignore] pam_unix.so\nauth requisite pam_deny.so\n"
                                          "auth required pam_permit.so\n"},
                          "sudo:1: success jumps onto pam_deny.so"),
    "authsucc-after-required-unix": ({"sudo": "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
                                              "auth required pam_unix.so\nauth optional pam_localauth.so authsucc\n"
                                              "auth required pam_permit.so\n"},
                                     "sudo:3: the authsucc line must follow 'auth requisite pam_deny.so'"),
    "authsucc-reached-on-failure": ({"sudo": "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
                                             "auth [success=1 auth_err=1 default=die] pam_unix.so\nauth requisite pam_deny.so\n"
                                             "auth optional pam_localauth.so authsucc\nauth required pam_permit.so\n"},
                                    "sudo:2 reaches the authsucc line on auth_err"),
    "passcode-sufficient": ({"localauth-passcode": "auth sufficient pam_unix.so\nauth required pam_nologin.so successok\n"},
                            "localauth-passcode:2: a password module's failure is ignored in this service, so pam_nologin.so "
                            "must not be able to pass the check"),
    "passcode-optional-unix": ({"localauth-passcode": "auth optional pam_unix.so\nauth required pam_env.so\n"},
                               "localauth-passcode:2: a password module's failure is ignored in this service, so pam_env.so "
                               "must not be able to pass the check"),
    "named-passcode-service": ({"sudo": "auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] "
                                        "pam_localauth.so passcode_service=mypass\nauth [success=1 default=ignore] pam_unix.so\n"
                                        "auth requisite pam_deny.so\nauth required pam_permit.so\n",
                                "mypass": "auth required pam_permit.so\n"},
                               "mypass:1: pam_permit.so must not be in the passcode service"),
    "uppercase-control": ({"sudo": "AUTH SUFFICIENT pam_localauth.so\nauth required pam_unix.so\n"},
                          "sudo:1: 'done' on the pam_localauth.so line"),
}


@pytest.mark.parametrize("case", sorted(BAD_STACKS))
def test_config_check_rejects_stacks_that_weaken_the_policy(cli, tmp_path, case):
    files, expected = BAD_STACKS[case]
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d" / "localauth-passcode").read_text())
    for name, text in files.items():
        (pam_dir / name).write_text(text)
    result = lint(cli, pam_dir)
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout, result.stdout


def test_config_check_says_what_the_module_does_on_a_required_line(cli, tmp_path):
    """pam_fprintd's line in gdm-fingerprint given to the module unchanged:
    safe (the step-aside fails the stack), and the lint says what that costs."""
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d" / "localauth-passcode").read_text())
    (pam_dir / "gdm-fingerprint").write_text("auth requisite pam_nologin.so\n"
                                             "auth required pam_succeed_if.so user != root quiet_success\n"
                                             "auth required pam_localauth.so policy=biometrics\n")
    result = lint(cli, pam_dir)
    assert ("warning: gdm-fingerprint:3: when the module steps aside (out of scope: another service, a remote login, "
            "another user; the fallback, no reader, a locked fingerprint) it answers authinfo_unavail, which this line "
            "turns into 'bad': nobody gets in here that way, not even with the right password") in result.stdout, result.stdout
    assert "can reach its end" not in result.stdout, result.stdout


def test_config_check_reads_a_stack_through_a_symbolic_link(cli, tmp_path):
    """libpam opens service files and includes through symbolic links (a
    distribution's pam.d often links one file to another): the lint judges
    what the link points at."""
    pam_dir = tmp_path / "pam.d"
    pam_dir.mkdir()
    (pam_dir / "localauth-passcode").write_text((ROOT / "pam.d" / "localauth-passcode").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "fingerprint-auth").write_text("auth required pam_succeed_if.so user != root quiet_success\n"
                                                "auth optional pam_localauth.so policy=biometrics\n")
    (pam_dir / "gdm-fingerprint").symlink_to(elsewhere / "fingerprint-auth")
    (pam_dir / "polkit-1").write_text("@include fingerprint-link\n")
    (pam_dir / "fingerprint-link").symlink_to(elsewhere / "fingerprint-auth")
    result = lint(cli, pam_dir)
    assert result.returncode == 1, result.stdout
    assert "error: gdm-fingerprint:2: when the module steps aside" in result.stdout, result.stdout
    assert "error: fingerprint-link:2: when the module steps aside" in result.stdout, result.stdout
