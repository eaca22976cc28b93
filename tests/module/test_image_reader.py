"""The refund rule on an image reader: libfprint's virtual_image driver, an
FpImageDevice like most USB press readers. Such a reader clears
finger-needed when it captures the image, before its verdict, so a judged
miss followed by a stop reads, by content, like a stop while waiting; and
finger-present flips on and off within one callback, so it is never sent.
The real module through real libpam against a real fprintd."""
import pytest

from pamenv import PAM_CONV_ERR, PAM_SUCCESS, PASSWORDS
from fprint_rig import FprintRig, synthetic_finger
from test_fingerprint import run_with_ctrl_c, stop_flood_scan_interrupt

ALICE = PASSWORDS["alice"]


@pytest.fixture(scope="module")
def fingers():
    return synthetic_finger(1), synthetic_finger(2)  # alice's, and someone else's


@pytest.fixture
def rig(fingers, pam):
    with FprintRig(image_reader=True) as rig:
        rig.enroll_image("alice", fingers[0])
        pam.password_entered("alice", rig)  # the first password of this boot: the finger is enough now
        yield rig


def image_scan(rig, image):
    return lambda: rig.send_image(image)


@pytest.mark.stop_proof
@pytest.mark.parametrize("trial", range(3))
def test_a_judged_miss_on_an_image_reader_stays_counted(pam, rig, fingers, trial):
    verdicts, result = stop_flood_scan_interrupt(pam, rig, image_scan(rig, fingers[1]))
    assert verdicts == ["verify-no-match"]
    assert pam.record().F == 1, result.stdout
    assert result.code == PAM_CONV_ERR


def test_a_judged_match_on_an_image_reader_succeeds(pam, rig, fingers):
    verdicts, result = stop_flood_scan_interrupt(pam, rig, image_scan(rig, fingers[0]))
    assert verdicts == ["verify-match"]
    assert result.code == PAM_SUCCESS, result.stdout


@pytest.mark.stop_proof
def test_ctrl_c_while_an_image_reader_waits_costs_nothing(pam, rig):
    result = run_with_ctrl_c(pam, rig, [ALICE], [], "fingerprint reader")
    assert result.code == PAM_CONV_ERR and result.interrupts_delivered == 1
    assert pam.record().F == 0
