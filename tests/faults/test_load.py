"""The load test's quick form: the support package `load` (the long form is
`make load`, through tools/loadtest.py) with about 30 seconds of rounds. 32 concurrent transactions for one
user and 32 for 32 different users, through the real module, real libpam
and a real fprintd with libfprint's virtual device answering a random mix
of match and no-match, with right and wrong passwords, in rounds whose
counts can be checked exactly, beside two long-running soak processes with
a reader of their own (tests/support/load/__init__.py describes the design).

The run happens once for this file; each test below checks one promise of
its report, and the report is printed (`pytest -s` shows it)."""
import os

import pytest

import load
from fprint_rig import FprintRig, proc_gone

QUICK_SECONDS = 30
BOUND_SECONDS = 120     # a phase not over by then is killed, and fails the run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and the state directory's checks need root")


@pytest.fixture(scope="module")
def report():
    with FprintRig() as rig:
        rig_processes = [rig.fprintd_pid, rig.bus_proc.pid, rig.polkit_proc.pid]
        result = load.run_load(QUICK_SECONDS, bound=BOUND_SECONDS, rig=rig, log=lambda text: None)
    result["rig_left_running"] = [pid for pid in rig_processes if not proc_gone(pid)]
    print("\n" + load.format_report(result))
    return result


def test_the_run_matched_everywhere(report):
    assert report["mismatches"] == [], "\n".join(report["mismatches"][:50])


def test_it_ran_both_groups_concurrently_in_every_kind_of_phase(report):
    assert report["rounds"] >= 3
    rounds = report["rounds"]
    assert report["transactions"]["one-user"] == 2 * 32 * rounds
    assert report["transactions"]["users"] == 4 * 32 * rounds
    assert report["transactions"]["control"] == 32 * rounds
    for kind in ("fail", "mixed", "control", "solo"):
        for config in report["configs"]:
            assert report["phases"].get(f"{kind} ({config})", 0) >= 1, (kind, config)
    # The mix: successes by finger and by password, and failures.
    assert report["reported_verdicts"]["match"] > 0 and report["reported_verdicts"]["no-match"] > 0
    assert report["successes"]["one-user"] > 0 and report["successes"]["users"] > 0


def test_every_attempt_is_counted_exactly_once(report):
    for group in ("one-user", "users", "control", "reset"):
        assert report["expected_charges"][group] == report["disk_charges"][group] > 0, group
        assert report["exact_F"].get(group, 0) == report["exact_F_disk"].get(group, 0), group
        assert report["exact_P"].get(group, 0) == report["exact_P_disk"].get(group, 0), group
    # Exact F and P for every user of every phase without a success, and for
    # each different user in every phase; the one user's mixed phases are
    # checked through the attempt number and the recent failures.
    assert report["exact_checks"]["users"] == report["transactions"]["users"]
    assert report["exact_checks"]["one-user"] >= report["rounds"]
    # What the limits refused was seen, and was not charged.
    assert report["refusals"].get("password back-off", 0) > 0
    assert report["refusals"].get("fingerprint locked", 0) > 0


def test_the_feeder_and_fprintd_agree_with_the_transactions(report):
    fed, seen = report["fed"], report["reported_verdicts"]
    assert (fed.get("match", 0), fed.get("no-match", 0)) == (seen["match"], seen["no-match"])


def test_the_single_reader_is_held_by_one_prompt_at_a_time(report):
    reader = report["reader"]
    assert report["max_holders"] == 1
    assert reader["held"] == reader["bus claims"] > 0
    # Everyone else was told it is busy (and went on to the password).
    assert reader["told busy"] == reader["bus AlreadyInUse"] > 0


def test_no_transaction_hangs(report):
    assert 0 < report["max_latency_ms"] < BOUND_SECONDS * 1000
    assert not [m for m in report["mismatches"] if "no result" in m or "killed" in m]


def test_no_prompt_waits_on_another_users_lock(report):
    assert report["foreign_lock_waits"] == 0, report["lock_waits"]
    # The sampler does see waits: the one user's 32 prompts queue on its lock.
    assert report["lock_waits"].get("alice -> alice", 0) > 0, report["lock_waits"]
    assert report["longest_lock_wait_ms"]["users"] == 0
    # The different users' latency with the one user's load is that with a
    # load of the same shape spread over 32 other users, within noise.
    ratio = load.independence(report)
    assert ratio is not None and ratio < 2.0, report["latency"]


def test_memory_stays_flat(report):
    assert load.memory_problems(report) == []
    soak = report["soak"]
    assert [process["threads"] for process in soak["processes"]] == [4, 1]
    # The long-running processes ran whole fingerprint prompts, all of which
    # succeeded, and every attempt of theirs was counted once.
    assert soak["fed"]["match"] > 0 and soak["fed"]["no-match"] > 0
    assert soak["failures"] == 0 and soak["attempts_on_disk"] == soak["attempts_expected"] > soak["transactions"]


def test_nothing_is_left_running(report):
    assert report["leftover_processes"] == []
    assert report["rig_left_running"] == []
