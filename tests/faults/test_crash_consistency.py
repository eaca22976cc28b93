"""A power cut at any moment, built from the real module's own writes.

The module runs through real libpam with tests/support/programs/crashlog.c preloaded, which
journals every write in place to the record file and every sync of it.
From the journal the test builds what a disk could hold after a power cut
at each moment: the content as of the last sync, plus any of the writes
made since, each possibly cut short (every 16th byte) or with only some of
its 512-byte sectors on disk. Every such image must hold a whole copy of
the record (read by the independent reader in pamenv.py) that is one the
module wrote and no older than the last synced one; every write that
raised a count must be synced before the module went on; and no write may
go over the copy last known to be on disk, even after a sync that failed. (No device-mapper
here for dm-flakey: the journal stands in for dropping unsynced pages.)"""
import struct
from pathlib import Path

from pamenv import (BUILD, OFFSET_F_P, OFFSET_GENERATION, PAM_AUTH_ERR, PAM_SUCCESS, PASSWORDS, SLOT_SIZE,
                    SYNC_MARK_OFFSET, current_slot, current_slot_index, sync_mark)

CRASHLOG_SHIM = BUILD / "crashlog.so"
ALICE = PASSWORDS["alice"]


def journal_entries(path: Path):
    for line in path.read_text().splitlines():
        parts = line.split(" ")
        if parts[0] == "W":
            yield "W", int(parts[2]), bytes.fromhex(parts[3])
        elif parts[0] == "S":
            yield "S", None, None


def generation(slot: bytes) -> int:
    return struct.unpack_from("<Q", slot, OFFSET_GENERATION)[0]


def counts(slot: bytes):
    return struct.unpack_from("<II", slot, OFFSET_F_P)


def images_during(base: bytes, offset: int, data: bytes):
    """What the disk may hold while `data` is written at `offset` over `base`."""
    for cut in list(range(0, len(data), 16)) + [len(data)]:
        image = bytearray(base)
        image[offset:offset + cut] = data[:cut]
        yield bytes(image)
    sectors = len(data) // 512
    for subset in range(1 << sectors):
        image = bytearray(base)
        for sector in range(sectors):
            if subset & (1 << sector):
                image[offset + sector * 512:offset + (sector + 1) * 512] = data[sector * 512:(sector + 1) * 512]
        yield bytes(image)


def journaled_prompts(pam, journal, answers, fail_sync=()):
    """Runs one prompt per answer with the journal on; the prompts whose
    index is in `fail_sync` see every sync of the record fail."""
    env = {"LD_PRELOAD": f"libpam_wrapper.so libnss_wrapper.so {CRASHLOG_SHIM}", "CRASHLOG": str(journal),
           "CRASHLOG_MATCH": str(pam.state)}
    codes = []
    for index, answer in enumerate(answers):
        extra = dict(env, CRASHLOG_FAIL_SYNC="1") if index in fail_sync else env
        codes.append(pam.run(answers=[answer], env=extra).code)
    return codes


def replay(initial: bytes, entries):
    """Every image a power cut could leave, checked; -> (images, writes
    that did not wait for the disk)."""
    disk = bytes(initial)              # what a power cut keeps for sure
    cache = bytearray(initial)         # what the module reads back
    since_sync = [disk]                # what the writes since the last sync could have left
    written = {generation(current_slot(initial))}
    last_synced = generation(current_slot(initial))
    images = unsynced = 0
    for index, (kind, offset, data) in enumerate(entries):
        previous = entries[index - 1][0] if index else None
        following = entries[index + 1][0] if index + 1 < len(entries) else None
        if kind == "S":
            disk = bytes(cache)
            since_sync = [disk]
            last_synced = generation(current_slot(disk))
            continue
        if offset == SYNC_MARK_OFFSET:
            # The mark names a copy only after its sync returned.
            assert previous == "S" and data == sync_mark(last_synced), (index, previous)
            cache[offset:offset + len(data)] = data
            continue
        assert len(data) == SLOT_SIZE and offset in (0, SLOT_SIZE), (offset, len(data))
        before = current_slot(bytes(cache))
        assert generation(data) == generation(before) + 1
        # Never over the newest copy known to be on disk.
        assert offset // SLOT_SIZE != current_slot_index(disk), f"write {index} goes over the only copy on disk"
        written.add(generation(data))
        raised = counts(data)[0] > counts(before)[0] or counts(data)[1] > counts(before)[1]
        if not raised and following != "S":
            unsynced += 1
        for base in since_sync:
            for image in images_during(base, offset, data):
                slot = current_slot(image)   # asserts a whole copy
                assert generation(slot) >= last_synced, (index, generation(slot), last_synced)
                assert generation(slot) in written
                images += 1
        cache[offset:offset + SLOT_SIZE] = data
        since_sync.append(bytes(cache))
    return images, unsynced, bytes(cache)


def test_a_power_cut_at_any_moment_leaves_the_last_synced_record_or_a_newer_one(pam, tmp_path):
    pam.write_owner_stack(args="passcode_backoff=1000:1s")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR   # the record exists (written whole, synced)
    initial = pam.record_path().read_bytes()
    journal = tmp_path / "journal"
    answers = ["wrong", "wrong", ALICE, "wrong", ALICE, ALICE, "wrong"]
    codes = journaled_prompts(pam, journal, answers)
    assert codes == [PAM_SUCCESS if answer == ALICE else PAM_AUTH_ERR for answer in answers]
    entries = list(journal_entries(journal))
    slot_writes = [entry for entry in entries if entry[0] == "W" and entry[1] != SYNC_MARK_OFFSET]
    assert len(slot_writes) == 10, entries   # a charge per prompt, a reset per success
    # Every charge is synced before the module goes on: a sync follows it.
    for index, entry in enumerate(entries):
        if entry in slot_writes and counts(entry[2])[1] > 0:
            assert entries[index + 1][0] == "S", f"charge {index} was not synced before the module went on"
    images, unsynced, final = replay(initial, entries)
    assert unsynced == 3, "a reset after a success need not wait for the disk"
    assert images > 1500
    # The module reads back what it wrote last.
    assert pam.record_path().read_bytes() == final
    assert pam.record().P == 1 and pam.record().F == 0


def test_a_sync_that_failed_never_lets_the_next_write_go_over_the_copy_on_disk(pam, tmp_path):
    """A disk that reports a lost write (EIO from fdatasync): the charge is
    refused, and the copy it was written over is not taken for one on disk,
    so the prompts after it write over it, never over the last synced one.
    (A writer killed before its sync returned leaves the same file.)"""
    pam.write_owner_stack(args="passcode_backoff=1000:1s")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    initial = pam.record_path().read_bytes()
    journal = tmp_path / "journal"
    answers = ["wrong", "wrong", "wrong", ALICE, "wrong"]
    codes = journaled_prompts(pam, journal, answers, fail_sync={1})
    assert codes[1] != PAM_SUCCESS and codes[3] == PAM_SUCCESS, codes
    entries = list(journal_entries(journal))
    images, _, final = replay(initial, entries)
    assert images > 1000
    assert pam.record_path().read_bytes() == final


def test_a_lost_mark_never_lets_the_next_write_go_over_the_newest_copy(pam, tmp_path):
    """A writer killed between its sync and its mark (or a power cut that
    took the mark, which is never synced) leaves the newest copy on disk and
    the mark naming the one before: the next prompt syncs, marks the newest
    copy and only then writes over the older one."""
    pam.write_owner_stack(args="passcode_backoff=1000:1s")
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    before = pam.record_path().read_bytes()
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    after = bytearray(pam.record_path().read_bytes())
    after[SYNC_MARK_OFFSET:] = before[SYNC_MARK_OFFSET:]   # the mark of the copy before
    pam.record_path().write_bytes(bytes(after))
    initial = bytes(after)
    journal = tmp_path / "journal"
    codes = journaled_prompts(pam, journal, ["wrong", ALICE, "wrong"])
    assert codes == [PAM_AUTH_ERR, PAM_SUCCESS, PAM_AUTH_ERR]
    entries = list(journal_entries(journal))
    assert [entry[0] for entry in entries[:2]] == ["S", "W"] and entries[1][1] == SYNC_MARK_OFFSET, entries[:3]
    images, _, final = replay(initial, entries)
    assert images > 500
    assert pam.record_path().read_bytes() == final
    assert pam.record().P == 1
