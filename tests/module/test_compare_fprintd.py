"""pam.d/sudo-biometrics (our module, policy biometrics, then pam_matrix as
the password module, then the authsucc line) against the stack it stands in
for: Debian's pam_fprintd.so 1.94.2 followed by a password module.

Both stacks live in the same PamEnv and talk to the same real fprintd
(tests/support/fprint_rig.py), so for the same scripted scans and password answers
they can be compared on: the PAM result code, who decided (the fingerprint
or the password module), who asked for the password, what fprintd saw, and,
for our stack, the counters on disk. Then the lockout that pam_fprintd does
not have: after 5 consecutive misses across prompts our stack skips the
sensor and requires the password, and the password's success (the authsucc
line, R11) unlocks it.

The reference, as a distribution would write it (pam_fprintd 1.94.2 options,
from its man page and source: `max-tries=N` >= 1, default 3; `timeout=N` in
seconds, default 30; `debug`):

    auth [success=2 default=ignore] pam_fprintd.so max-tries=3 timeout=10
    auth [success=1 default=ignore] pam_matrix.so passdb=...    (pam_unix)
    auth requisite pam_deny.so
    auth required  pam_permit.so

pam_fprintd opens the bus with sd-bus's sd_bus_open_system(), which reads
DBUS_SYSTEM_BUS_ADDRESS with secure_getenv(): the harness is not setuid, so
rig.env() points it at the rig's private bus, like our module.

Like for like: pam_fprintd's conversation is PAM_TEXT_INFO/PAM_ERROR_MSG
only (its own texts, an instruction before every attempt, "Failed to match
fingerprint" after each miss); it never asks before using the sensor. Our
module, without a controlling terminal, would run in *prompt* mode (R16) and
first ask "Password, or press Enter to use your fingerprint: ". So our
stack is installed with `mode=terminal` (fingerprint first, no first prompt;
Ctrl-C, which these tests never send, would choose the fallback): in both
stacks the only prompt is then pam_matrix's "Password: ", and "who asked for
the password" is the password module in both. The last test shows the
prompt-mode difference with the shipped file unchanged.

pam_fprintd returns PAM_MAXTRIES after max-tries misses (the result codes: never
ours); `default=ignore` turns it into "go on to the password" like our
PAM_AUTH_ERR/AUTHINFO_UNAVAIL under `default=ignore`, so the stacks' codes
agree even though the modules' own codes differ.
"""

import pytest

from pamenv import PAM_AUTH_ERR, PAM_FPRINTD, PAM_MATRIX, PAM_SUCCESS, PASSWORDS
from fprint_rig import (DEVICE_IFACE, FPRINT_NAME, MANAGER_IFACE, MANAGER_PATH, _Client)
from pamenv import install_shipped_stack as install
from sentences import FIRST_PROMPT, LOCKED, NOT_RECOGNIZED as OUR_MISS

REFERENCE = "fprintd-reference"
OURS = "sudo-biometrics"
ALICE, BOB = PASSWORDS["alice"], PASSWORDS["bob"]
MATCH = "SCAN finger-alice"
MISS = "SCAN finger-nobody"
PASSWORD_PROMPT = "Password: "            # pam_matrix, the password module of both stacks
REF_MISS = "Failed to match fingerprint"  # pam_fprintd, PAM_ERROR_MSG per miss


def write_reference(pam):
    pam.write_service(REFERENCE, [
        f"auth [success=2 default=ignore] {PAM_FPRINTD} max-tries=3 timeout=10",
        f"auth [success=1 default=ignore] {PAM_MATRIX} passdb={pam.passdb}",
        "auth requisite pam_deny.so",
        "auth required pam_permit.so",
    ])


@pytest.fixture
def stacks(pam):
    assert PAM_FPRINTD.exists(), "libpam-fprintd is a test dependency (tools/install-deps.sh)"
    write_reference(pam)
    install(pam, OURS, "mode=terminal")
    return pam


class SensorLog:
    """What fprintd emitted during one run, seen from a separate connection:
    VerifyFingerSelected (one per VerifyStart: an attempt started) and the
    final VerifyStatus results. sync() makes the log complete: fprintd's
    reply to a call made after the run is sent after every signal it emitted
    during the run, and dbus-daemon keeps one sender's order."""

    def __init__(self, rig):
        self.rig = rig
        self.events = []
        self.client = _Client(rig.bus_address)
        self.client.subscribe(FPRINT_NAME, DEVICE_IFACE, None, None,
                              lambda s, p, i, member, args: self.events.append((member, args)))

    def sync(self):
        if self.rig.fprintd_running():
            self.client.call(FPRINT_NAME, MANAGER_PATH, MANAGER_IFACE, "GetDevices", None, "(ao)")
        else:
            self.client.bus_call("GetId", None, "(s)")
        while self.client.ctx.iteration(False):
            pass

    def close(self):
        self.client.close()

    @property
    def attempts(self):
        return sum(1 for m, _ in self.events if m == "VerifyFingerSelected")

    @property
    def verdicts(self):
        return [a[0] for m, a in self.events if m == "VerifyStatus" and a[1]]


def device_idle(rig):
    """pam_fprintd does not Release after a match (it just closes its bus
    connection), so fprintd releases the claim when it sees the client
    vanish; this makes the next prompt independent of when that happens."""
    if rig.fprintd_running():
        rig.wait_until_claimable()


def attempt(pam, rig, service, answers, feed=(), user="alice"):
    """One prompt: the scans fed on cue, answers to prompts in order."""
    log = SensorLog(rig)
    try:
        if feed:
            rig.feed(list(feed))
        result = pam.run(service=service, user=user, answers=answers, env=rig.env())
        if feed:
            report = rig.feed_wait(timeout=30)
            assert report.ok, report
            result.fed = report.sent_commands()
        log.sync()
        result.attempts, result.verdicts = log.attempts, log.verdicts
    finally:
        log.close()
    device_idle(rig)
    return result


def decided_by(result):
    """Who decided: the fingerprint (no prompt at all, fprintd's last verdict
    a match) or the password module (its prompt was the only prompt)."""
    if result.prompts() == [] and result.verdicts[-1:] == ["verify-match"]:
        return "fingerprint"
    if result.prompts() == [PASSWORD_PROMPT]:
        return "password"
    return f"unclear: prompts {result.prompts()}, verdicts {result.verdicts}"


def counts(pam, user="alice"):
    """(F, P) on disk; (0, 0) when the module never wrote a record."""
    if not pam.record_path(user).exists():
        return (0, 0)
    record = pam.record(user)
    return (record.F, record.P)


def state_snapshot(pam):
    return {p.name: p.read_bytes() for p in pam.state.iterdir()}


def compare(pam, rig, answers, feed=(), user="alice"):
    """The reference first (it keeps no state of ours), then our stack,
    with the same scans and answers."""
    before = state_snapshot(pam)
    ref = attempt(pam, rig, REFERENCE, answers, feed, user)
    assert state_snapshot(pam) == before  # pam_fprintd keeps no counters
    ours = attempt(pam, rig, OURS, answers, feed, user)
    assert ours.code == ref.code
    assert decided_by(ours) == decided_by(ref)
    assert ours.attempts == ref.attempts
    assert ours.verdicts == ref.verdicts
    return ref, ours


# ---- the same scans and answers, the same outcome ----

def test_match_first_try(stacks, rig):
    ref, ours = compare(stacks, rig, [], [MATCH])
    assert ref.code == PAM_SUCCESS and decided_by(ref) == "fingerprint"
    assert ref.prompts() == ours.prompts() == []
    assert ref.attempts == 1 and ref.verdicts == ["verify-match"]
    assert ref.texts("info") == ["Swipe your right index finger across the fingerprint reader"]
    assert ours.texts("info") == [f"{OURS} needs to confirm your identity (alice). "
                                  "Swipe your finger across the fingerprint reader."]
    assert ref.texts("error") == ours.texts("error") == []
    assert counts(stacks) == (0, 0)
    assert stacks.record().last_fingerprint_wall > 0


def test_three_misses_then_the_correct_password(stacks, rig):
    ref, ours = compare(stacks, rig, [ALICE], [MISS] * 3)
    assert ref.code == PAM_SUCCESS and decided_by(ref) == "password"
    assert ref.verdicts == ["verify-no-match"] * 3
    assert ref.texts("error") == [REF_MISS] * 3
    assert [t.startswith(OUR_MISS) for t in ours.texts("error")] == [True] * 3
    assert counts(stacks) == (0, 0)  # the authsucc line reset F after pam_matrix's success


def test_three_misses_then_a_wrong_password(stacks, rig):
    ref, ours = compare(stacks, rig, ["wrong"], [MISS] * 3)
    assert ref.code == PAM_AUTH_ERR and decided_by(ref) == "password"
    assert ref.verdicts == ["verify-no-match"] * 3
    # Three fingerprint failures stay counted; the wrong password was checked
    # by pam_matrix, not by our module, so P is not ours to count here.
    assert counts(stacks) == (3, 0)


def test_no_prints_enrolled_then_the_password(stacks, rig):
    assert rig.list_enrolled("bob") == []
    ref, ours = compare(stacks, rig, [BOB], user="bob")
    assert ref.code == PAM_SUCCESS and decided_by(ref) == "password"
    assert ref.attempts == 0 and ref.messages == ours.messages == [("prompt-off", PASSWORD_PROMPT)]
    assert counts(stacks, "bob") == (0, 0)  # nothing charged


def test_fprintd_not_running_then_the_password(stacks, rig):
    rig.stop_fprintd()
    ref, ours = compare(stacks, rig, [ALICE])
    assert ref.code == PAM_SUCCESS and decided_by(ref) == "password"
    assert ref.messages == ours.messages == [("prompt-off", PASSWORD_PROMPT)]
    assert counts(stacks) == (0, 0)
    wrong_ref, wrong_ours = compare(stacks, rig, ["wrong"])
    assert wrong_ref.code == PAM_AUTH_ERR and decided_by(wrong_ref) == "password"
    assert counts(stacks) == (0, 0)


# ---- the lockout added ----

def test_lockout_after_five_misses_across_prompts_then_the_password_unlocks(stacks, rig):
    pam = stacks
    # Prompt 1: identical in both stacks.
    ref1, ours1 = compare(pam, rig, ["wrong"], [MISS] * 3)
    assert ref1.code == PAM_AUTH_ERR and counts(pam) == (3, 0)

    # Prompt 2: pam_fprintd forgets and allows 3 more; ours allows the 2 left
    # of the 5, says it is locked, and hands over to the password.
    ref2 = attempt(pam, rig, REFERENCE, ["wrong"], [MISS] * 3)
    assert ref2.code == PAM_AUTH_ERR and ref2.attempts == 3
    ours2 = attempt(pam, rig, OURS, ["wrong"], [MISS] * 2)
    assert ours2.code == PAM_AUTH_ERR and decided_by(ours2) == "password"
    assert ours2.attempts == 2 and ours2.verdicts == ["verify-no-match"] * 2
    assert any(LOCKED in t for t in ours2.texts("error"))
    assert counts(pam) == (5, 0)

    # Prompt 3: one matching scan is offered. Ours does not start the sensor
    # (no VerifyStart: no VerifyFingerSelected, the scan stays unfed) and asks
    # for the password at once; the same scan then goes to pam_fprintd, which
    # still accepts it.
    rig.feed([MATCH])
    locked = attempt(pam, rig, OURS, ["wrong"])
    assert locked.attempts == 0 and locked.verdicts == []
    assert locked.prompts() == [PASSWORD_PROMPT]
    assert any(LOCKED in t for t in locked.texts("error"))
    assert locked.code == PAM_AUTH_ERR
    assert counts(pam) == (5, 0)  # a prompt that skipped the sensor charged nothing
    accepted = attempt(pam, rig, REFERENCE, [])
    report = rig.feed_wait(timeout=30)
    assert report.ok and report.sent_commands() == [MATCH]
    assert report.sent[0][1] == "VerifyFingerSelected#1"  # the first attempt anyone started
    assert accepted.code == PAM_SUCCESS and decided_by(accepted) == "fingerprint"
    assert counts(pam) == (5, 0)  # pam_fprintd's success does not touch our lockout

    # The correct password through our stack: pam_matrix decides, the
    # authsucc line resets the counters, and the fingerprint works again.
    unlock = attempt(pam, rig, OURS, [ALICE])
    assert unlock.code == PAM_SUCCESS and decided_by(unlock) == "password"
    assert unlock.attempts == 0
    assert counts(pam) == (0, 0)
    again = attempt(pam, rig, OURS, [], [MATCH])
    assert again.code == PAM_SUCCESS and decided_by(again) == "fingerprint"
    assert again.fed == [MATCH]


def test_lockout_survives_pam_fprintd_and_a_wrong_password(stacks, rig):
    """Locked: neither the reference's matches nor wrong passwords through
    our stack unlock it; only the password's success does."""
    pam = stacks
    attempt(pam, rig, OURS, ["wrong"], [MISS] * 3)
    attempt(pam, rig, OURS, ["wrong"], [MISS] * 2)
    assert counts(pam) == (5, 0)
    for _ in range(2):
        assert attempt(pam, rig, REFERENCE, [], [MATCH]).code == PAM_SUCCESS
        locked = attempt(pam, rig, OURS, ["wrong"])
        assert locked.code == PAM_AUTH_ERR and locked.attempts == 0
    assert counts(pam) == (5, 0)
    assert attempt(pam, rig, OURS, [ALICE]).code == PAM_SUCCESS
    assert counts(pam) == (0, 0)


# ---- the conversation difference that mode=terminal removes ----

def test_shipped_file_without_mode_asks_before_the_sensor(stacks, rig):
    """The shipped file unchanged, no controlling terminal: prompt mode (R16).
    Our module asks first and needs an empty answer to start the sensor;
    pam_fprintd never asks. With that answer the outcome is the same."""
    pam = stacks
    install(pam, OURS)
    ref = attempt(pam, rig, REFERENCE, [], [MATCH])
    ours = attempt(pam, rig, OURS, [""], [MATCH])
    assert ref.code == ours.code == PAM_SUCCESS
    assert ref.prompts() == [] and ours.prompts() == [FIRST_PROMPT]
    assert ref.verdicts == ours.verdicts == ["verify-match"]
    # Without that answer (a client that cannot answer) ours never reaches the
    # sensor, where pam_fprintd would have used it.
    rig.feed([MATCH])
    silent = attempt(pam, rig, OURS, [])
    assert silent.prompts() == [FIRST_PROMPT] and silent.attempts == 0
    assert silent.code != PAM_SUCCESS
    assert attempt(pam, rig, REFERENCE, []).code == PAM_SUCCESS
    assert rig.feed_wait(timeout=30).ok
