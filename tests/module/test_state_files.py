"""The state directory and its files through the real module and real libpam:
every directory on the way to the state directory is checked, a missing one
is never made where others could have made it, and no odd file in it (or a
wait read from it) can keep the owner out for good: the owner always gets in
with the password after at most the first back-off. Waits are passed by
moving the module's boot clock forward (a time namespace), not by sleeping."""
import os
import shutil
import stat

import pytest

from pamenv import (PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT, PAM_CONV_ERR, PAM_SUCCESS, PAM_SYSTEM_ERR, PASSWORDS, USERS,
                    later_boot_clock, lookalike_records, reseal_record)

ALICE = PASSWORDS["alice"]
BOB = USERS["bob"]
LOCKOUT, FIRST_BACKOFF, FIRST_WAIT_S = 5, 5, 60


def lock_path(pam):
    return pam.state / f"{USERS['alice']}.lock"


def use_state_dir(pam, directory):
    pam.write_owner_stack(args=f"state_dir={directory}")  # the last state_dir= wins


# ---- the way to the state directory ----

def test_a_state_directory_below_a_user_writable_directory_is_refused(pam):
    """bob owns the parent: he could move the directory away and have a
    fresh one made, taking his counts back to zero."""
    parent = pam.base / "bobs"
    parent.mkdir(mode=0o755)
    os.chown(parent, BOB, BOB)
    state = parent / "state"
    state.mkdir(mode=0o700)
    use_state_dir(pam, state)
    refused = pam.run(answers=["wrong"])
    assert refused.code == PAM_SYSTEM_ERR
    assert f"state directory {state}: a directory on its path is a symlink, not root's" in refused.stdout + refused.stderr
    assert list(state.iterdir()) == []
    shutil.rmtree(state)  # "moved away"
    assert pam.run(answers=[ALICE]).code == PAM_SYSTEM_ERR
    assert not state.exists()  # never made again below bob's directory


def test_a_state_directory_behind_a_symlink_is_refused(pam):
    real = pam.base / "real"
    (real / "state").mkdir(parents=True, mode=0o700)
    os.chmod(real / "state", 0o700)
    (pam.base / "link").symlink_to(real)
    use_state_dir(pam, pam.base / "link" / "state")
    assert pam.run(answers=[ALICE]).code == PAM_SYSTEM_ERR
    assert list((real / "state").iterdir()) == []


def test_a_missing_state_directory_is_not_made_in_a_sticky_directory(pam):
    """In a directory everyone may write (sticky, as /tmp) another user could
    have made it first; an existing root-owned 0700 one there is fine."""
    sticky = pam.base / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    use_state_dir(pam, sticky / "state")
    refused = pam.run(answers=[ALICE])
    assert refused.code == PAM_SYSTEM_ERR
    assert f"state directory {sticky / 'state'} is missing and its parent is writable by others" in refused.stdout + refused.stderr
    assert not (sticky / "state").exists()
    (sticky / "state").mkdir(mode=0o700)
    os.chmod(sticky / "state", 0o700)
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS
    assert (sticky / "state" / f"{USERS['alice']}.rec").exists()


def test_a_missing_state_directory_is_made_private_below_a_safe_parent(pam):
    use_state_dir(pam, pam.base / "made")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    info = os.lstat(pam.base / "made")
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o700


# ---- odd files in the state directory ----

def _lock_symlink(pam):
    (pam.base / "elsewhere").write_text("not a lock")
    lock_path(pam).symlink_to(pam.base / "elsewhere")


def _lock_dangling_symlink(pam):
    lock_path(pam).symlink_to(pam.base / "nowhere")


def _lock_fifo(pam):
    os.mkfifo(lock_path(pam), 0o600)


def _lock_directory(pam):
    lock_path(pam).mkdir()
    (lock_path(pam) / "inside").write_text("x")


def _lock_of_another_owner(pam):
    lock_path(pam).write_bytes(b"")
    os.chown(lock_path(pam), BOB, BOB)


def _record_directory(pam):
    pam.record_path().unlink()
    pam.record_path().mkdir()


def _record_directory_not_empty(pam):
    _record_directory(pam)
    (pam.record_path() / "inside").write_text("x")


ODD_FILES = {
    "lock is a symlink": _lock_symlink,
    "lock is a dangling symlink": _lock_dangling_symlink,
    "lock is a FIFO": _lock_fifo,
    "lock is a directory": _lock_directory,
    "lock is another user's file": _lock_of_another_owner,
    "record is a directory": _record_directory,
    "record is a non-empty directory": _record_directory_not_empty,
}


@pytest.mark.parametrize("kind", list(ODD_FILES))
def test_an_odd_file_is_replaced_fail_closed_and_the_password_gets_in(pam, kind):
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR  # a record and a lock exist
    if kind.startswith("lock"):
        lock_path(pam).unlink()
    ODD_FILES[kind](pam)

    refused = pam.run(answers=[ALICE], env={"PAM_WRAPPER_DEBUGLEVEL": "1"})  # warnings too
    assert refused.code == PAM_CRED_INSUFFICIENT and refused.prompts() == [], refused.stdout
    assert f"record of uid {USERS['alice']} was replaced" in refused.stdout + refused.stderr
    assert "Too many wrong passwords. Try again in 1 minute." in refused.texts("error")
    record = pam.record()
    assert (record.F, record.P) == (LOCKOUT, FIRST_BACKOFF) and 0 < record.backoff_ms <= FIRST_WAIT_S * 1000
    info = os.lstat(lock_path(pam))
    assert stat.S_ISREG(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) & 0o022 == 0
    if kind == "lock is a symlink":
        assert (pam.base / "elsewhere").read_text() == "not a lock"  # never followed

    later = pam.run(answers=[ALICE], wrapper=later_boot_clock(FIRST_WAIT_S + 1))
    assert later.code == PAM_SUCCESS, later.stdout
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_a_directory_at_the_temporary_name_does_not_stop_the_write(pam):
    temporary = pam.state / f"{USERS['alice']}.rec.tmp"
    temporary.mkdir()
    (temporary / "inside").write_text("x")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().P == 1
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


# ---- waits read from disk ----

def test_a_huge_stored_wait_ends_after_max_backoff(pam):
    """A record with a valid checksum may still say anything: a wait of 2^62
    ms is read as at most max_backoff (1 h by default)."""
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    path = pam.record_path()
    path.write_bytes(reseal_record(path.read_bytes(), P=5, backoff_ms=2 ** 62))
    refused = pam.run(answers=[ALICE])
    assert refused.code == PAM_CRED_INSUFFICIENT and refused.prompts() == []
    assert "Too many wrong passwords. Try again in 1 hour." in refused.texts("error")
    later = pam.run(answers=[ALICE], wrapper=later_boot_clock(3601))
    assert later.code == PAM_SUCCESS, later.stdout
    assert (pam.record().P, pam.record().backoff_ms) == (0, 0)


def test_a_wait_longer_than_a_lowered_max_backoff_ends_at_the_new_bound(pam):
    pam.write_owner_stack(args="passcode_backoff=1:1h")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.record().backoff_ms == 3_600_000
    pam.write_owner_stack(args="passcode_backoff=1:1h max_backoff=2m")
    refused = pam.run(answers=[ALICE])
    assert "Too many wrong passwords. Try again in 2 minutes." in refused.texts("error")
    assert pam.run(answers=[ALICE], wrapper=later_boot_clock(121)).code == PAM_SUCCESS


# ---- unknown names cannot fill the state directory ----

def test_invented_names_share_one_lock_and_a_bounded_set_of_records(pam):
    """Each unknown name used to leave a lock file of its own, even for a
    cancelled prompt, so a loop of invented names could exhaust the file
    system and lock the owner out. They now share one lock file and one
    file of 1024 look-alike records, placed by a keyed hash."""
    for index in range(40):
        assert pam.run(user=f"nosuch{index}", answers=[""]).code == PAM_CONV_ERR  # cancelled at the prompt
    assert set(pam.state_files()) <= {"lookalike.lock", "lookalike.key", "lookalike.rec"}, pam.state_files()
    for index in range(40):
        assert pam.run(user=f"nosuch{index}", answers=["wrong"]).code == PAM_AUTH_ERR
    assert pam.state_files() == ["lookalike.key", "lookalike.lock", "lookalike.rec"]
    counted = lookalike_records((pam.state / "lookalike.rec").read_bytes())
    assert 0 < len(counted) <= 40 and all(record.P == 1 for record in counted.values())
    info = os.lstat(pam.state / "lookalike.key")
    assert stat.S_ISREG(info.st_mode) and info.st_size == 32 and stat.S_IMODE(info.st_mode) == 0o600


def test_a_prompt_never_waits_for_the_state_directory_lock(pam):
    """Repairs of odd files lock the state directory; a prompt stopped by
    its user while holding that lock must not hold up everyone's writes.
    Plain charges and successes never take it."""
    import fcntl
    directory = os.open(pam.state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)  # as a stopped prompt in a repair would hold it
        assert pam.run(answers=["wrong"], timeout=20).code == PAM_AUTH_ERR
        assert pam.run(user="bob", answers=["wrong"], timeout=20).code == PAM_AUTH_ERR
        assert pam.run(answers=[ALICE], timeout=20).code == PAM_SUCCESS
        assert (pam.record().F, pam.record().P) == (0, 0)
    finally:
        os.close(directory)


# ---- what a record belongs to ----

def test_a_second_name_of_the_same_uid_counts_on_the_same_record(pam):
    """A record is the uid's; its name tells a reused uid apart. A second
    passwd name for the uid (an alias, or a local and a directory entry
    sharing it) is the same account: its wrong answers count on the same
    record, and a switch of names does not replace the record as a reused
    uid's (which would lock the finger and start a back-off at once)."""
    with open(pam.passwd, "a") as passwd:
        passwd.write(f"alice-alias:x:{USERS['alice']}:{USERS['alice']}:alias:/home/alice:/bin/sh\n")
    with open(pam.passdb, "a") as passdb:
        passdb.write(f"alice-alias:{ALICE}:localauth-passcode\n")
    pam.write_owner_stack()
    assert pam.run(answers=["wrong-1"]).code == PAM_AUTH_ERR
    for attempt in range(2):
        assert pam.run(user="alice-alias", answers=[f"wrong-alias-{attempt}"]).code == PAM_AUTH_ERR
        assert pam.run(answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    record = pam.record()
    assert (record.name, record.F, record.P) == ("alice", 0, 5), record
    # The fifth wrong answer started the first back-off, not a replacement.
    assert 0 < record.backoff_ms <= FIRST_WAIT_S * 1000, record
    assert pam.run(user="alice-alias", answers=[ALICE], wrapper=later_boot_clock(FIRST_WAIT_S + 1)).code == PAM_SUCCESS
    assert (pam.record().P, pam.record().name) == (0, "alice")


def test_a_record_whose_name_leads_nowhere_now_is_a_reused_uids(pam):
    """The name the record was made with no longer names this uid: the uid
    was given to someone new, who starts from the fail-closed record."""
    pam.write_owner_stack()
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    pam.passwd.write_text(pam.passwd.read_text().replace("alice:x:", "dave:x:"))
    with open(pam.passdb, "a") as passdb:
        passdb.write(f"dave:{ALICE}:localauth-passcode\n")
    run = pam.run(user="dave", answers=["wrong"])
    assert run.code == PAM_CRED_INSUFFICIENT
    record = pam.record()
    assert record.name == "dave" and record.F == LOCKOUT and record.P >= FIRST_BACKOFF, record
