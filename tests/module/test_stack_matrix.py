"""No control flag turns "not mine" into a login.

Every cell of control flag x situation x stack shape runs through real libpam
(pam_wrapper) with the real pam_localauth.so and the rig's real fprintd with
libfprint's virtual device; pam_matrix stands in for pam_unix. For every cell
the stack is run with no credential (a wrong password, a miss, a cancel, the
fallback, nothing) and must not succeed; then a matching finger and the right
password are given where the line is meant to let them in, and must succeed.

libpam maps every failure of a `sufficient` or `optional` line (and of a
bracket line's `default=ignore`) to "ignore": when lines before it succeeded
for anyone and nothing after it asks for a credential, such a stack succeeds
whatever any module on that line returns. Such a cell is accepted only when
the same stack with pam_deny.so in the module's place succeeds too (the
grant is the stack's, not the module's) and `localauth config --check`
reports that line as an error."""
import subprocess

import pytest

from pamenv import (MODULE, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL, PAM_CRED_INSUFFICIENT, PAM_CONV_ERR, PAM_IGNORE,
                    PAM_MATRIX, PAM_SUCCESS, PAM_SYSTEM_ERR, PASSWORDS, localauth_command, reseal_record)

ALICE = PASSWORDS["alice"]
MATCH = "SCAN finger-alice"
MISS = "SCAN finger-nobody"
SERVICE = "sudo"  # pam_matrix's passdb names it

FLAGS = {
    "required": "required",
    "requisite": "requisite",
    "sufficient": "sufficient",
    "optional": "optional",
    # `required` spelled out: an ignore passes through.
    "ignore-passes": "[success=ok ignore=ignore default=bad]",
    # The shipped owner line's mapping, without its jump.
    "step-aside-ignored": "[success=ok ignore=ignore authinfo_unavail=ignore default=die]",
    "done-or-die": "[success=done default=die]",
}

# The lines before and after the module's line, and whether the module's
# line sits in a file of its own that the service includes.
BEFORE_SUCCEEDING = ["auth requisite pam_nologin.so", "auth required pam_succeed_if.so user != root quiet_success"]
SHAPES = {
    "alone": ([], [], None),
    "after-succeeding-lines": (BEFORE_SUCCEEDING, [], None),   # gdm-fingerprint
    "before-password-module": ([], ["PASSWORD"], None),         # pam_fprintd's usual place
    "included-after-succeeding-lines": (BEFORE_SUCCEEDING, [], "include"),
    "substack-before-password-module": ([], ["PASSWORD"], "substack"),
}


class Situation:
    def __init__(self, name, answers, policy="owner", feed=(), user="alice", ruser=None, rhost=None, args="",
                 reader=True, locked=False, internal_error=False, cancel=False):
        # A wrong password for a later password module follows the
        # answers, except where the conversation is to fail (a cancel).
        self.name, self.answers, self.policy, self.feed = name, answers + ([] if cancel else ["wrong"]), policy, list(feed)
        self.user, self.ruser, self.rhost, self.args = user, ruser, rhost, args
        self.reader, self.locked, self.internal_error = reader, locked, internal_error


# No credential in any of them. pam_matrix, where the shape has it, is
# answered with a wrong password.
NO_CREDENTIAL = [
    Situation("owner-wrong-password", ["wrong"]),
    Situation("owner-misses-then-wrong-password", ["", "wrong"], feed=[MISS, MISS, MISS]),
    Situation("owner-cancel", [], cancel=True),
    Situation("out-of-scope-service", ["wrong"], args=f"services=another-{SERVICE}"),
    Situation("out-of-scope-remote", ["wrong"], rhost="192.0.2.7"),
    Situation("out-of-scope-another-user", ["wrong"], ruser="bob"),
    Situation("root", ["wrong"], user="root"),
    Situation("unknown-user", ["wrong"], user="nosuchuser"),
    Situation("biometrics-fallback-before-any-finger", ["typed text"], policy="biometrics"),
    Situation("biometrics-timeout", [""], policy="biometrics", args="timeout=1"),
    Situation("biometrics-misses-used-up", ["", "", ""], policy="biometrics", feed=[MISS, MISS, MISS]),
    Situation("biometrics-cancel", [], policy="biometrics", cancel=True),
    Situation("biometrics-out-of-scope", [""], policy="biometrics", rhost="192.0.2.7"),
    Situation("biometrics-no-reader", [""], policy="biometrics", reader=False),
    Situation("biometrics-locked", [""], policy="biometrics", locked=True),
    Situation("owner-no-reader", ["wrong"], reader=False),
    Situation("internal-error", ["wrong"], internal_error=True),
]


class World:
    """One flag's stacks in one private PAM world, with one rig."""

    def __init__(self, pam, rig, flag):
        self.pam, self.rig, self.flag = pam, rig, flag
        self.bad_state = pam.base / "state-is-a-file"
        self.bad_state.write_text("not a directory\n")

    def write(self, shape, situation, module=None):
        before, after, include = SHAPES[shape]
        if module is None:
            state = self.bad_state if situation.internal_error else self.pam.state
            module = (f"{MODULE} state_dir={state} conf={self.pam.conf} services={SERVICE} mode=prompt "
                      f"policy={situation.policy} {situation.args}").rstrip()
        line = f"auth {self.flag} {module}"
        after = [f"auth required {PAM_MATRIX} passdb={self.pam.passdb}" if a == "PASSWORD" else a for a in after]
        if include:
            # Named by its absolute path (pam_wrapper redirects only the
            # service's own file), outside the service directory.
            inner = self.pam.base / f"{SERVICE}-inner"
            inner.write_text(line + "\n")
            self.pam.write_service(SERVICE, before + [f"auth {include} {inner}"] + after)
        else:
            self.pam.write_service(SERVICE, before + [line] + after)

    def run(self, situation, answers, feed=()):
        if situation.locked:
            path = self.pam.record_path()
            path.write_bytes(reseal_record(path.read_bytes(), F=5))
        env = self.rig.env() if situation.reader else None
        if feed:
            self.rig.feed(list(feed))
        try:
            return self.pam.run(service=SERVICE, user=situation.user, ruser=situation.ruser, rhost=situation.rhost,
                                answers=answers, env=env)
        finally:
            if feed:
                self.rig.feed_wait(timeout=30)
            self.reset()

    def reset(self):
        """Every cell starts from alice's state after the first password of this boot."""
        self.pam.password_entered("alice", self.rig)

    def probe(self, situation):
        """The module's own answer in this situation: alone on a line that
        fails on anything but success and ignore, before pam_permit (an
        ignore shows as PAM_IGNORE, anything else as itself)."""
        state = self.bad_state if situation.internal_error else self.pam.state
        self.pam.write_service(SERVICE, [
            f"auth [success=ok ignore=ignore default=bad] {MODULE} state_dir={state} conf={self.pam.conf} services={SERVICE} "
            f"mode=prompt policy={situation.policy} {situation.args}".rstrip(),
            "auth [success=ok default=bad] pam_permit.so"])
        run = self.run(situation, situation.answers, situation.feed)
        return PAM_IGNORE if run.code == PAM_SUCCESS else run.code

    def lint_errors(self):
        result = subprocess.run([str(localauth_command()), "config", "--check", "/nonexistent.conf", "--pam-dir",
                                 str(self.pam.services)], capture_output=True, text=True, timeout=30)
        return [line for line in result.stdout.splitlines()
                if line.startswith("error: ") and (f" {SERVICE}:" in line or f"{SERVICE}-inner:" in line)]


def action(control, code):
    """libpam's action for a module's answer on a line (pam_handlers.c)."""
    name = {PAM_SUCCESS: "success", PAM_AUTH_ERR: "auth_err", PAM_CRED_INSUFFICIENT: "cred_insufficient",
            PAM_AUTHINFO_UNAVAIL: "authinfo_unavail",
            PAM_CONV_ERR: "conv_err", PAM_SYSTEM_ERR: "system_err", PAM_IGNORE: "ignore"}[code]
    succeeded = name == "success"
    simple = {"required": "ok" if succeeded else "ignore" if name == "ignore" else "bad",
              "requisite": "ok" if succeeded else "ignore" if name == "ignore" else "die",
              "sufficient": "done" if succeeded else "ignore",
              "optional": "ok" if succeeded else "ignore"}
    if control in simple:
        return simple[control]
    pairs = dict(pair.split("=", 1) for pair in reversed(control.strip("[]").split()))
    return pairs.get(name, pairs.get("default", "bad"))


def handed_to_the_password_module(flag, shape):
    """Where the line hands a step-aside on to a later password module
    (True), where it fails closed (False), and where no password module
    follows (None: the no-credential test covers those)."""
    if not SHAPES[shape][1]:
        return None
    return action(FLAGS[flag], PAM_AUTHINFO_UNAVAIL) == "ignore"


@pytest.mark.parametrize("flag", list(FLAGS), ids=list(FLAGS))
def test_no_credential_never_logs_in(pam, rig, flag):
    world = World(pam, rig, FLAGS[flag])
    granted, stacks_own = [], []
    for shape in SHAPES:
        for situation in NO_CREDENTIAL:
            world.write(shape, situation)
            run = world.run(situation, situation.answers, situation.feed)
            if run.code != PAM_SUCCESS:
                continue
            # What the module answered there, seen through a probe line.
            answer = world.probe(situation)
            if answer in (PAM_SUCCESS, PAM_IGNORE) or action(FLAGS[flag], answer) != "ignore" or SHAPES[shape][1]:
                granted.append(f"{flag} x {situation.name} x {shape}: the module answered {answer}: {run}")
                continue
            world.write(shape, situation)
            if not world.lint_errors():
                granted.append(f"{flag} x {situation.name} x {shape}: the stack grants and the lint says nothing")
            stacks_own.append(f"{situation.name} x {shape}")
    assert granted == [], "\n".join(granted)
    # Only lines that discard every failure can meet a stack's own grant.
    if flag in ("required", "requisite", "ignore-passes", "done-or-die"):
        assert stacks_own == [], stacks_own
    else:
        assert stacks_own, "the stack's own grant was expected in the after-succeeding-lines shapes"
        assert all("after-succeeding-lines" in cell for cell in stacks_own), stacks_own


@pytest.mark.parametrize("flag", list(FLAGS), ids=list(FLAGS))
def test_a_finger_and_the_right_password_still_log_in(pam, rig, flag):
    world = World(pam, rig, FLAGS[flag])
    wrong = []
    for shape in SHAPES:
        cases = [
            ("owner finger", Situation("owner", []), ["", ALICE], [MATCH], True),
            ("owner password", Situation("owner", []), [ALICE, ALICE], (), True),
            ("biometrics finger", Situation("biometrics", [], policy="biometrics"), ["", ALICE], [MATCH], True),
            # Out of scope: the password module decides where the line lets it.
            ("another user's password module", Situation("other", [], ruser="bob"), [ALICE], (),
             handed_to_the_password_module(flag, shape)),
            ("biometrics fallback to the password module", Situation("fallback", [], policy="biometrics"),
             ["typed text", ALICE], (), handed_to_the_password_module(flag, shape)),
        ]
        for name, situation, answers, feed, expected in cases:
            if expected is None:
                continue
            world.write(shape, situation)
            run = world.run(situation, answers, feed)
            if (run.code == PAM_SUCCESS) != expected:
                wrong.append(f"{flag} x {name} x {shape}: expected {'success' if expected else 'failure'}, got {run}")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("flag", list(FLAGS), ids=list(FLAGS))
@pytest.mark.parametrize("inner", ["before-password-module", "after-succeeding-lines"])
def test_the_module_inside_its_own_password_check_never_passes_a_wrong_password(pam, rig, flag, inner):
    """The passcode service holds a line of the module (the guard's case):
    whatever its flag, a wrong password is never taken."""
    module = f"auth {FLAGS[flag]} {MODULE} state_dir={pam.state} conf={pam.conf} services=localauth-passcode"
    password = f"auth required {PAM_MATRIX} passdb={pam.passdb}"
    lines = [module, password] if inner == "before-password-module" else [
        "auth required pam_succeed_if.so user != root quiet_success", module, password]
    pam.write_service("localauth-passcode", lines)
    # The shipped owner lines, pam_matrix as the password module.
    pam.write_service(SERVICE, [pam.module_line("[success=2 ignore=ignore authinfo_unavail=ignore default=die]"),
                                f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
                                "auth requisite pam_deny.so", "auth required pam_permit.so"])
    wrong = pam.run(service=SERVICE, answers=["wrong", "wrong"], env=rig.env())
    assert wrong.code != PAM_SUCCESS, wrong
