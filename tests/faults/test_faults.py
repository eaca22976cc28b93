"""Faults below and around the real module, through real libpam: the state
directory's filesystem full, read-only, failing writes, syncs, reads and
opens (tests/support/programs/faultinject.c, LD_PRELOAD into the harness) or swapped for a
symlink mid-prompt; the wall clock moved by days; an fprintd that answers
with the wrong types; a passcode stack that cannot load or hangs; the
prompt's process signalled at each step; hostile descriptor limits.

Each test asserts what matters in that fault: nothing granted, no charge
lost (the counts on disk), the reader released, a message the person can
read and a log line the administrator can. docs/RELIABILITY.md lists them
with the command that runs each."""
import fcntl
import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fprint_rig import DEVICE_IFACE, DIE_WITH_TESTS, FPRINT_NAME, MANAGER_IFACE, MANAGER_PATH, PY3, BusMonitor, FprintRig, process_state
from pamenv import (BUILD, PAM_KEEPTOK, PAM_MATRIX, PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT, PAM_CONV_ERR, PAM_SUCCESS,
                    PAM_SYSTEM_ERR, PASSWORDS, RECORD_SIZE, LOOKALIKE_UID, USERS, later_boot_clock, lookalike_records, parse_record, parse_run,
                    read_only_state, runtime_bound, runtime_dir, ROOT)
from pamenv import install_shipped_stack as install
from sentences import FIRST_PROMPT, NOT_RECORDED, PASSCODE_PROMPT

ALICE = PASSWORDS["alice"]
UID = USERS["alice"]
SHIM = BUILD / "faultinject.so"
FAKETIME = Path(f"/usr/lib/{os.uname().machine}-linux-gnu/faketime/libfaketime.so.1")
MATCH = "SCAN finger-alice"
MISS = "SCAN finger-nobody"


def faulty(pam, call=None, errno=None, **extra):
    """The environment that preloads the fault shim into the harness, with
    the shim's log in the test's directory."""
    env = {"LD_PRELOAD": f"libpam_wrapper.so libnss_wrapper.so {SHIM}", "FAULT_LOG": str(pam.base / "faults.log"),
           "FAULT_MATCH": str(pam.state)}
    if call:
        env.update({"FAULT_CALL": call, "FAULT_ERRNO": str(errno)})
    env.update({key: str(value) for key, value in extra.items()})
    return env


def faults_hit(pam):
    log = pam.base / "faults.log"
    return log.read_text().splitlines() if log.exists() else []


def log_lines(run):
    """What the module sent to syslog (pam_wrapper prints it on stderr)."""
    return [line for line in run.stderr.splitlines() if "SYSLOG" in line and "pam_sm_setcred" not in line]


def seeded_with_one_wrong_password(pam):
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert (pam.record().F, pam.record().P) == (0, 1)
    return pam.record_path().read_bytes()


def in_private_mounts(script, copy_out=None):
    """A command prefix: a private mount namespace where `script` runs
    first (as root), then the prompt; the state is copied to `copy_out`
    before the namespace (and what was mounted in it) goes away."""
    tail = f'set +e; "$@"; rc=$?; cp -a "$STATE"/. {copy_out}/; exit $rc' if copy_out else 'exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec", f"{script}\n{tail}", "sh"]


# ---- the state directory's filesystem ----

FILL = {
    # a small tmpfs with its blocks used up, or one with plenty of space and its inodes used up
    "blocks": ("size=8m", "dd if=/dev/zero of=$STATE/filler bs=4k 2>/dev/null || true"),
    "inodes": ("size=8m,nr_inodes=80", "i=0; while touch $STATE/f$i 2>/dev/null; do i=$((i+1)); done"),
}


def full_state(pam, tmp_path, kind, out, before_fill=""):
    """A command prefix: the prompt runs with the state directory a copy of
    the real one on a tmpfs that is then filled up; what the prompt left
    is copied to `out`."""
    options, fill = FILL[kind]
    seed = tmp_path / "seed"
    script = (f"STATE={pam.state}; mkdir -p {seed}; cp -a $STATE/. {seed}/; "
              f"mount -t tmpfs -o {options},mode=0700 none $STATE; cp -a {seed}/. $STATE/; {before_fill} {fill}")
    out.mkdir()
    return in_private_mounts(script, out)


def spares(directory):
    return sorted(path.name for path in directory.glob("spare.*"))


@pytest.mark.parametrize("kind", sorted(FILL))
def test_a_full_filesystem_still_takes_a_charge_in_place(pam, tmp_path, kind):
    """A record already on disk is charged by writing over its own blocks:
    filling the disk cannot make a guess go uncounted."""
    seeded_with_one_wrong_password(pam)
    out = tmp_path / "after"
    run = pam.run(answers=["wrong-again"], wrapper=full_state(pam, tmp_path, kind, out))
    assert run.code == PAM_AUTH_ERR, run
    assert parse_record((out / f"{UID}.rec").read_bytes(), UID).P == 2
    assert (out / "filler").exists() or (out / "f0").exists()


@pytest.mark.parametrize("kind", sorted(FILL))
def test_a_full_filesystem_takes_a_first_record_and_a_fresh_unknown_name_alike(pam, tmp_path, kind):
    """A known user's first record takes one of the spare files the store
    keeps made (written over and renamed: no new inode or block); an
    unknown name's bucket, made ahead in the look-alike file, is written
    in place. So with the space or the inodes used up both still prompt,
    count and fail alike, and nobody is locked out of a first sudo."""
    seeded_with_one_wrong_password(pam)
    assert len(spares(pam.state)) == 8
    runs, outs = {}, {}
    for user in ("bob", "nosuchuser"):
        outs[user] = tmp_path / f"after-{user}"
        runs[user] = pam.run(user=user, answers=["wrong"], wrapper=full_state(pam, tmp_path, kind, outs[user]))
    known, unknown = runs["bob"], runs["nosuchuser"]
    assert known.code == unknown.code == PAM_AUTH_ERR, (known, unknown)
    assert known.prompts() == unknown.prompts() == [PASSCODE_PROMPT]
    assert known.messages == unknown.messages
    assert known.fail_delay and unknown.fail_delay  # the delay is jittered: both ask for one
    assert parse_record((outs["bob"] / "1002.rec").read_bytes(), 1002).P == 1
    assert lookalike_records((outs["nosuchuser"] / "lookalike.rec").read_bytes())["nosuchuser"].P == 1
    # bob's spare is not made again while the filesystem is full; the
    # unknown name took none.
    assert (len(spares(outs["bob"])), len(spares(outs["nosuchuser"]))) == (7, 8)


@pytest.mark.parametrize("kind", sorted(FILL))
def test_a_full_filesystem_without_spares_still_charges_records_and_unknown_names_alike(pam, tmp_path, kind):
    """With the spares used up as well, a record on disk and an unknown
    name's bucket are both still charged in place, alike. Only an account
    that has no record yet is refused (after the same prompt, with the
    words for an attempt that could not be recorded): what that tells,
    that the name is an account, any local user can already ask NSS."""
    seeded_with_one_wrong_password(pam)
    runs = {}
    for user in ("alice", "nosuchuser", "bob"):
        out = tmp_path / f"after-{user}"
        runs[user] = pam.run(user=user, answers=["wrong"],
                             wrapper=full_state(pam, tmp_path, kind, out, before_fill="rm -f $STATE/spare.*;"))
        if user == "bob":
            assert not (out / "1002.rec").exists()
    known, unknown, first = runs["alice"], runs["nosuchuser"], runs["bob"]
    assert known.code == unknown.code == PAM_AUTH_ERR, (known, unknown)
    assert known.messages == unknown.messages and known.prompts() == [PASSCODE_PROMPT]
    assert known.fail_delay and unknown.fail_delay
    assert first.code == PAM_SYSTEM_ERR and first.prompts() == [PASSCODE_PROMPT], first
    assert first.texts("error") == [NOT_RECORDED]
    assert any("errno 28" in line for line in log_lines(first)), first.stderr


@pytest.mark.parametrize("kind", sorted(FILL))
def test_a_store_of_an_earlier_release_gets_its_look_alike_file_from_a_known_users_prompt(pam, tmp_path, kind):
    """A store with the key and per-name bucket files but no look-alike
    file: the next known user's prompt makes it (and removes the old
    files), so that when the disk fills afterwards an unknown name's first
    prompt still finds its bucket, and is answered like a known user's."""
    seeded_with_one_wrong_password(pam)
    (pam.state / "lookalike.rec").unlink()
    (pam.state / "u123.rec").write_bytes(bytes(4112))
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR
    assert (pam.state / "lookalike.rec").stat().st_size == 1024 * 4112 and not (pam.state / "u123.rec").exists()
    runs = {}
    for user in ("alice", "nosuchuser"):
        runs[user] = pam.run(user=user, answers=["wrong"], wrapper=full_state(pam, tmp_path, kind, tmp_path / f"after-{user}"))
    assert runs["alice"].code == runs["nosuchuser"].code == PAM_AUTH_ERR, runs
    assert runs["alice"].messages == runs["nosuchuser"].messages


# One mount's read-only view of the writable state directory (a bind, as a
# service's ReadOnlyPaths or a container makes): no failure of the disk.
READ_ONLY_VIEW = 'STATE={state}; mount --bind "$STATE" "$STATE"; mount -o remount,bind,ro "$STATE"'


def profile_stack(pam):
    """common-auth as pam-auth-update writes it from the package's profile
    (its Auth line, then the password line), the password line checking
    pam_matrix's file and keeping the token as pam_unix does."""
    profile = (ROOT / "config" / "pam-auth-update.localauth").read_text()
    control = re.search(r"^Auth:\n\t(\[[^\]]*\])\tpam_localauth\.so", profile, re.M).group(1)
    pam.write_service("common-auth", [
        pam.module_line(control.replace("success=end", "success=2"), "services=common-auth"),
        f"auth [success=1 default=ignore] {PAM_KEEPTOK} passdb={pam.passdb}",
        "auth requisite pam_deny.so", "auth required pam_permit.so"])


def hand_over_stack(pam, name):
    if name == "common-auth":
        profile_stack(pam)
    else:
        install(pam, name)


def counts_in(directory, user):
    """(F, P) of `user`'s record in a store directory: its own file, or for
    a name without an account its bucket of the look-alike file."""
    if user in USERS:
        path = Path(directory) / f"{USERS[user]}.rec"
        record = parse_record(path.read_bytes(), USERS[user]) if path.exists() else None
    else:
        path = Path(directory) / "lookalike.rec"
        record = lookalike_records(path.read_bytes()).get(user) if path.exists() else None
    return (record.F, record.P) if record else None


@pytest.mark.parametrize("name", ["sudo", "su", "login", "common-auth"])
@pytest.mark.parametrize("user", ["alice", "nosuchuser"])
def test_a_read_only_state_directory_counts_in_run_then_on_disk_again(pam, tmp_path, name, user):
    """A disk gone read-only locks no one out and leaves no password
    uncounted: each shipped stack's prompt goes on as on a writable disk,
    its charges kept in /run/localauth (a root-only tmpfs; here the test's
    own), starting from the record the read-only disk still holds raised to
    one short of each limit (a restart loses /run, and the disk cannot say
    what it held); the read-only filesystem is left as it was. A known and
    an unknown name are counted alike. Once the directory is writable again
    the counts are folded back into it and /run's copy goes."""
    hand_over_stack(pam, name)
    if user == "alice":
        seeded_with_one_wrong_password(pam)
    before = pam.state_contents()
    lockout, first_wait = 5, 5
    # The first wrong password reaches the first wait; the second is typed
    # once it has run (the boot clock moved on, never waited for).
    for attempt, later in ((1, ()), (2, later_boot_clock(61))):
        out = tmp_path / f"after-{attempt}"
        out.mkdir()
        run = pam.run(service=name, user=user, answers=["wrong"],
                      wrapper=in_private_mounts(read_only_state(pam.state), copy_out=out) + list(later))
        assert run.code == PAM_AUTH_ERR and run.prompts() == [PASSCODE_PROMPT], run
        assert run.texts("error") == [], run
        assert counts_in(runtime_dir(pam.state), user) == (lockout - 1, first_wait - 1 + attempt), run.stderr
        assert {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()} == before
    # Writable again (and the second wait over): folded back, counted on,
    # and gone from /run.
    run = pam.run(service=name, user=user, answers=["wrong"],
                  wrapper=in_private_mounts(runtime_bound(pam.state)) + later_boot_clock(61 + 301))
    assert run.code == PAM_AUTH_ERR, run
    assert counts_in(pam.state, user) == (lockout - 1, first_wait + 2)
    assert counts_in(runtime_dir(pam.state), user) is None


def test_a_read_only_state_directory_keeps_the_back_off_and_the_lockout(pam, rig):
    """Counting in /run holds every rule, from one short of each limit:
    one miss locks the finger, one wrong password starts the back-off; the
    right password is then refused unchecked, the miss still counted. The
    boot clock moved past the wait, the password gets in and both counts
    are zero."""
    install(pam, "sudo")
    read_only = in_private_mounts(read_only_state(pam.state))
    pam.password_entered("alice", rig)
    rig.feed([MISS])
    run = pam.run(service="sudo", answers=["", "wrong"], wrapper=read_only, env=rig.env())
    assert rig.feed_wait(timeout=30).ok
    assert run.code == PAM_AUTH_ERR, run
    assert "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password." in run.texts("error"), run
    assert counts_in(runtime_dir(pam.state), "alice") == (5, 5)
    run = pam.run(service="sudo", answers=[ALICE], wrapper=read_only, env=rig.env())
    assert run.code == PAM_CRED_INSUFFICIENT and PASSCODE_PROMPT not in run.prompts(), run
    assert run.texts("error") == ["Too many failed fingerprint attempts. Fingerprint is locked until you enter your password.",
                                  "Too many wrong passwords. Try again in 1 minute."], run
    assert counts_in(runtime_dir(pam.state), "alice") == (5, 5)
    run = pam.run(service="sudo", answers=[ALICE], wrapper=read_only + later_boot_clock(61), env=rig.env())
    assert run.code == PAM_SUCCESS, run
    assert counts_in(runtime_dir(pam.state), "alice") == (0, 0)


def test_an_ext4_error_under_errors_remount_ro_counts_in_run(pam, tmp_path):
    """What a failing disk does: the state directory on ext4 mounted with
    errors=remount-ro (Debian's default), then an error (the kernel's own
    trigger_fs_error). The kernel marks the filesystem read-only (on recent
    kernels as emergency_ro, which statvfs does not show), the next write
    gets EROFS, and the charge goes to /run."""
    install(pam, "sudo")
    seeded_with_one_wrong_password(pam)
    disk, mounted = tmp_path / "disk.img", tmp_path / "fs"
    mounted.mkdir()
    subprocess.run(["truncate", "-s", "16M", str(disk)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(disk)], check=True)
    script = (f'{runtime_bound(pam.state)}; STATE={pam.state}; mount -o loop,errors=remount-ro {disk} {mounted}; '
              f'cp -a "$STATE"/. {mounted}/; chmod 0700 {mounted}; mount --bind {mounted} "$STATE"; '
              f'echo 1 > /sys/fs/ext4/$(basename $(findmnt -n -o SOURCE {mounted}))/trigger_fs_error')
    tail = f'set +e; "$@"; rc=$?; umount "$STATE" {mounted}; exit $rc'
    run = pam.run(service="sudo", answers=["wrong"],
                  wrapper=["unshare", "--mount", "--propagation", "private", "sh", "-ec", f"{script}\n{tail}", "sh"])
    assert run.code == PAM_AUTH_ERR and run.prompts() == [PASSCODE_PROMPT], run
    assert counts_in(runtime_dir(pam.state), "alice") == (4, 5), "from one short of each limit, then the wrong one"
    assert pam.record().P == 1, "the disk as it was"


def test_a_disk_filled_under_ext4_counts_in_run_past_the_limits(pam, tmp_path):
    """The attack review's reproduction: the state directory on ext4
    (errors=remount-ro, Debian's default) in a sparse image that lives on a
    small tmpfs, which a user then fills. The next charge's sync fails,
    ext4 aborts its journal and the kernel marks the filesystem read-only
    (emergency_ro; here the first journal commit after the fill). Before,
    every sudo password was then checked
    uncounted (7 wrong ones, none charged); now the counting goes on in
    /run, from one short of each limit: the first wrong password starts
    the back-off, and the other six are refused unchecked."""
    install(pam, "sudo")
    backing, mounted = tmp_path / "backing", tmp_path / "fs"
    backing.mkdir()
    mounted.mkdir()
    setup = (f"{runtime_bound(pam.state)}; STATE={pam.state}; "
             f"mount -t tmpfs -o size=6m localauth-backing {backing}; truncate -s 64M {backing}/disk.img; "
             f"mkfs.ext4 -q -F {backing}/disk.img; "
             f"mount -o loop,errors=remount-ro {backing}/disk.img {mounted}; cp -a \"$STATE\"/. {mounted}/; chmod 0700 {mounted}; "
             f"sync -f {mounted}; mount --bind {mounted} \"$STATE\"; "
             f"dd if=/dev/zero of={backing}/filler bs=64k 2>/dev/null || true; "
             # The next journal commit cannot be written: ext4 aborts its
             # journal and the kernel makes the filesystem read-only.
             f"touch {mounted}/.dirty 2>/dev/null || true; sync -f {mounted} 2>/dev/null || true; "
             f"echo ready; read -r done || true; "
             f"umount \"$STATE\" {mounted}")
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-ec", setup],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        inside = ["nsenter", f"--mount=/proc/{holder.pid}/ns/mnt", "--"]
        runs = [pam.run(service="sudo", answers=["wrong"], wrapper=inside) for _ in range(7)]
        last = pam.run(service="sudo", answers=[ALICE], wrapper=inside)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert [run.code for run in runs] == [PAM_AUTH_ERR] + [PAM_CRED_INSUFFICIENT] * 6, runs
    assert last.code == PAM_CRED_INSUFFICIENT and last.prompts() == [], last
    assert counts_in(runtime_dir(pam.state), "alice")[1] == 5


def test_a_read_only_state_directory_and_an_unusable_run_refuse(pam):
    """Counting in /run needs /run: one that cannot be written (here a
    read-only tmpfs in its place) refuses the attempt, nothing asked,
    nothing checked, as any charge that cannot be written does."""
    install(pam, "sudo")
    before = seeded_with_one_wrong_password(pam)
    script = (read_only_state(pam.state) + "; mount -t tmpfs -o ro,mode=0700 localauth-run-ro /run/localauth")
    run = pam.run(service="sudo", answers=[ALICE], wrapper=in_private_mounts(script))
    assert run.code == PAM_SYSTEM_ERR and run.prompts() == [] and run.texts("error") == [NOT_RECORDED], run
    assert any("counting in /run/localauth failed too" in line for line in log_lines(run)), run.stderr
    assert pam.record_path().read_bytes() == before


@pytest.mark.parametrize("wrapper", ["user namespace", "pid namespace", "read-only view"])
def test_a_read_only_state_that_a_user_could_arrange_still_refuses(pam, wrapper):
    """What no unprivileged user can cause moves the counting to /run; what one can,
    or what is no failure of the disk, does not. A user's own user
    namespace (here made by root, mapping root to itself: the most a user's
    namespace could make look like the system, the paths owned by root, the
    prompt's process root in it, the filesystem truly read-only), a pid
    namespace of its own (what a setuid sandbox such as firejail gives its
    users, with mounts of its choosing), and one mount's read-only view of
    the writable state directory (a service's ReadOnlyPaths, a container)
    all keep the refusal: nothing asked, nothing checked, nothing written."""
    install(pam, "sudo")
    before = seeded_with_one_wrong_password(pam)
    script = READ_ONLY_VIEW.format(state=pam.state) if wrapper == "read-only view" else read_only_state(pam.state)
    namespaces = {"user namespace": ["--user", "--map-root-user"], "pid namespace": ["--pid", "--fork", "--mount-proc"],
                  "read-only view": []}[wrapper]
    prefix = ["unshare", *namespaces, "--mount", "--propagation", "private", "sh", "-ec", f'{script}\nexec "$@"', "sh"]
    wrapper_dirs = set(Path("/tmp").glob("pam.?"))
    run = pam.run(service="sudo", answers=[ALICE, ALICE], wrapper=prefix)
    # pam_wrapper's directory names its process by the pid it had in its
    # own pid namespace, which the suite's leftover check cannot tell from
    # a live one: the prompt has ended, so it goes here.
    for left in set(Path("/tmp").glob("pam.?")) - wrapper_dirs:
        shutil.rmtree(left, ignore_errors=True)
    assert run.code == PAM_SYSTEM_ERR, run
    assert run.prompts() == [] and run.texts("error") == [NOT_RECORDED], run
    assert any("errno 30" in line for line in log_lines(run)), run.stderr
    assert not any("counting in /run" in line for line in log_lines(run)), run.stderr
    assert pam.record_path().read_bytes() == before


@pytest.mark.parametrize("call, errno, expected_log", [
    ("write", 5, "cannot charge a passcode attempt for uid 1001: write failed: Input/output error (errno 5)"),
    ("sync", 5, "cannot charge a passcode attempt for uid 1001: write failed: Input/output error (errno 5)"),
    ("write", 30, "cannot charge a passcode attempt for uid 1001: write failed: Read-only file system (errno 30)"),
    ("write", 28, "cannot charge a passcode attempt for uid 1001: write failed: No space left on device (errno 28)"),
    ("open", 13, "cannot be opened: Permission denied (errno 13)"),
    ("open", 12, "cannot be opened: Cannot allocate memory (errno 12)"),
], ids=["write-EIO", "sync-EIO", "write-EROFS-on-a-writable-disk", "write-ENOSPC", "open-EACCES", "open-ENOMEM"])
def test_a_failing_store_call_refuses_the_attempt_and_loses_no_charge(pam, call, errno, expected_log):
    """The charge is written (and synced) before the password is checked;
    when that fails while the filesystem stays writable (a disk error the
    filesystem did not answer by going read-only; EROFS that no read-only
    filesystem explains), or for a reason a user could cause (no space, a security
    module, a shortage), the password is not checked at all. A failed sync
    may leave the charge on disk (one too many, never one too few)."""
    before = seeded_with_one_wrong_password(pam)
    run = pam.run(answers=[ALICE], env=faulty(pam, call, errno))
    assert faults_hit(pam), "the fault was never injected"
    assert run.code == PAM_SYSTEM_ERR, run
    assert run.texts("error") == [NOT_RECORDED]
    assert any(expected_log in line for line in log_lines(run)), run.stderr
    if call == "sync":
        assert pam.record().P == 2
    else:
        assert pam.record_path().read_bytes() == before


def held_as_a_stopped_prompt_would(pam, user):
    """A descriptor holding the lock a prompt for `user` takes, as a prompt
    its user stopped mid-write would: a known user's lock file, or the
    look-alike lock file that unknown names share."""
    fd = os.open(pam.state / (f"{USERS[user]}.lock" if user in USERS else "lookalike.lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("user", ["alice", "nosuchuser"])
def test_a_lock_held_by_a_stopped_prompt_refuses_within_the_bound_and_counts_nothing(pam, user):
    """Anyone can stop a `su` to any name in the instant it writes (SIGSTOP
    is theirs to send) and hold that name's lock for as long as they like:
    the next prompt for the name waits a few seconds, not forever, and is
    refused uncounted and unchecked, with the reason in the log; another
    account's prompt goes on meanwhile, and the held name's next prompt
    after the release counts as ever. A known and an unknown name alike
    (unknown names share one lock: while it is held, they are all refused)."""
    for name in (user, "bob"):
        assert pam.run(user=name, answers=["wrong"]).code == PAM_AUTH_ERR
    before = {path.name: path.read_bytes() for path in pam.state.glob("*.rec")}
    held = held_as_a_stopped_prompt_would(pam, user)
    try:
        run = pam.run(user=user, answers=[PASSWORDS.get(user, "wrong")])
        assert run.code == PAM_SYSTEM_ERR and run.texts("error") == [NOT_RECORDED], run
        assert any("another prompt held the record's lock for 3000 ms" in line for line in log_lines(run)), run.stderr
        assert {path.name: path.read_bytes() for path in pam.state.glob("*.rec")} == before
        assert pam.run(user="bob", answers=["wrong"]).code == PAM_AUTH_ERR
    finally:
        os.close(held)
    assert pam.run(user=user, answers=["wrong"]).code == PAM_AUTH_ERR
    if user in USERS:
        assert pam.record(user).P == 2
    else:
        assert lookalike_records((pam.state / "lookalike.rec").read_bytes())[user].P == 2


def bucket_of(key: bytes, name: str) -> int:
    """An unknown name's bucket, as the store places it: SHA-256 of the key
    and the name, its first two bytes modulo 1024."""
    digest = hashlib.sha256(key + name.encode()).digest()
    return (digest[0] << 8 | digest[1]) % 1024


def test_a_bucket_the_disk_cannot_read_is_replaced_in_place_and_the_others_kept(pam):
    """An I/O error reading one unknown name's bucket, twice (a bad sector
    under it): that bucket gets R12's record, written over its region of
    the same file; the other buckets keep their counts (before, the whole
    file was made again, every other unknown name's count gone)."""
    assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR
    key = (pam.state / "lookalike.key").read_bytes()
    failing = next(f"other{index}" for index in range(1000)
                   if bucket_of(key, f"other{index}") != bucket_of(key, "nosuchuser"))
    inode = (pam.state / "lookalike.rec").stat().st_ino
    run = pam.run(user=failing, answers=["wrong"], env=faulty(pam, "read", 5, FAULT_MATCH="/lookalike.rec$", FAULT_TIMES=2))
    assert len(faults_hit(pam)) == 2
    assert run.code in (PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT), run
    assert (pam.state / "lookalike.rec").stat().st_ino == inode, "written in place"
    records = lookalike_records((pam.state / "lookalike.rec").read_bytes())
    assert records["nosuchuser"].P == 1, "another bucket kept"
    assert (records[failing].F, records[failing].P) == (5, 5), "R12's record"


def test_a_bucket_the_disk_can_neither_read_nor_write_gets_the_file_made_again(pam):
    """A bad block under a bucket fails the write over it too (a write over
    part of a block reads the block first): the look-alike file is then made
    again, as one that is not sound is, with R12's record in that bucket;
    the other buckets' counts go (unknown names' only), and no name is
    refused for good."""
    assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR
    key = (pam.state / "lookalike.key").read_bytes()
    failing = next(f"other{index}" for index in range(1000)
                   if bucket_of(key, f"other{index}") != bucket_of(key, "nosuchuser"))
    inode = (pam.state / "lookalike.rec").stat().st_ino
    run = pam.run(user=failing, answers=["wrong"],
                  env=faulty(pam, "read,write", 5, FAULT_MATCH="/lookalike.rec$", FAULT_TIMES=3))
    assert [line.split()[0] for line in faults_hit(pam)] == ["read", "read", "write"], faults_hit(pam)
    assert run.code in (PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT), run
    assert (pam.state / "lookalike.rec").stat().st_ino != inode, "made again"
    records = lookalike_records((pam.state / "lookalike.rec").read_bytes())
    assert (records[failing].F, records[failing].P) == (5, 5), "R12's record"
    assert "nosuchuser" not in records
    assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR


@pytest.mark.parametrize("errors", [1, 2], ids=["transient", "persistent"])
def test_a_look_alike_key_the_disk_cannot_read_makes_the_bucket_r12s(pam, errors):
    """A key the disk fails to read once is read again, and nothing
    changes. One it fails to read twice is replaced (the buckets shuffled
    anew), and the name's bucket is R12's record, as a known user's record
    the disk fails to read is: the same wait at the same prompt, never a
    fresh start an account would not get."""
    for _ in range(2):
        assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR
    key = (pam.state / "lookalike.key").read_bytes()
    run = pam.run(user="nosuchuser", answers=["wrong"],
                  env=faulty(pam, "read", 5, FAULT_MATCH="/lookalike.key$", FAULT_TIMES=errors))
    assert len(faults_hit(pam)) == errors
    if errors == 1:
        assert run.code == PAM_AUTH_ERR and run.texts("error") == [], run
        assert (pam.state / "lookalike.key").read_bytes() == key
        assert lookalike_records((pam.state / "lookalike.rec").read_bytes())["nosuchuser"].P == 3
        return
    assert run.code == PAM_CRED_INSUFFICIENT and run.prompts() == [], run
    assert run.texts("error") == ["Too many wrong passwords. Try again in 1 minute."], run
    new_key = (pam.state / "lookalike.key").read_bytes()
    assert new_key != key
    start = bucket_of(new_key, "nosuchuser") * RECORD_SIZE
    record = parse_record((pam.state / "lookalike.rec").read_bytes()[start:start + RECORD_SIZE], LOOKALIKE_UID)
    assert (record.name, record.F, record.P) == ("nosuchuser", 5, 5)


@pytest.mark.parametrize("errno", [23, 24, 12], ids=["ENFILE", "EMFILE", "ENOMEM"])
def test_a_shortage_reading_the_look_alike_key_refuses_and_keeps_the_key(pam, errno):
    """The key places unknown names in their buckets: a new one made
    because the old could not be opened for a moment would start every
    invented name's count again."""
    assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR
    key = (pam.state / "lookalike.key").read_bytes()
    buckets = (pam.state / "lookalike.rec").read_bytes()
    run = pam.run(user="nosuchuser", answers=["wrong"], env=faulty(pam, "open", errno, FAULT_MATCH="/lookalike.key$"))
    assert faults_hit(pam)
    assert run.code == PAM_SYSTEM_ERR and run.texts("error") == [NOT_RECORDED], run
    assert (pam.state / "lookalike.key").read_bytes() == key
    assert (pam.state / "lookalike.rec").read_bytes() == buckets
    assert pam.run(user="nosuchuser", answers=["wrong"]).code == PAM_AUTH_ERR
    assert lookalike_records((pam.state / "lookalike.rec").read_bytes())["nosuchuser"].P == 2


def test_a_shortage_looking_at_the_record_refuses_and_keeps_it(pam):
    """fstat of an open record failing for want of memory says nothing
    about the record: it is neither trusted nor replaced (a replacement
    could hold a shorter wait)."""
    before = seeded_with_one_wrong_password(pam)
    run = pam.run(answers=[ALICE], env=faulty(pam, "fstat", 12, FAULT_MATCH=f"/{UID}.rec$"))
    assert faults_hit(pam)
    assert run.code == PAM_SYSTEM_ERR and run.texts("error") == [NOT_RECORDED], run
    assert any("read failed: Cannot allocate memory (errno 12)" in line for line in log_lines(run)), run.stderr
    assert pam.record_path().read_bytes() == before


def test_a_spare_that_cannot_be_written_is_retired(pam):
    """A bad block in a spare refuses that one prompt only: the spare is
    removed, the next first prompt takes another, and the refill makes the
    pool whole again."""
    seeded_with_one_wrong_password(pam)
    assert len(spares(pam.state)) == 8
    run = pam.run(user="bob", answers=["wrong"], env=faulty(pam, "write", 5, FAULT_MATCH="/spare.0$"))
    assert faults_hit(pam)
    assert run.code == PAM_SYSTEM_ERR and run.texts("error") == [NOT_RECORDED], run
    assert "spare.0" not in spares(pam.state) and not (pam.state / "1002.rec").exists()
    assert pam.run(user="bob", answers=["wrong"]).code == PAM_AUTH_ERR
    assert parse_record((pam.state / "1002.rec").read_bytes(), 1002).P == 1
    assert len(spares(pam.state)) == 8


def test_a_failing_rename_of_a_new_record_refuses_and_leaves_only_a_temporary(pam):
    run = pam.run(answers=[ALICE], env=faulty(pam, "rename", 5))
    assert faults_hit(pam)
    assert run.code == PAM_SYSTEM_ERR and run.texts("error") == [NOT_RECORDED]
    assert not pam.record_path().exists()
    # The leftover temporary is harmless: the next prompt works.
    assert pam.run(answers=["wrong"]).code == PAM_AUTH_ERR and pam.record().P == 1


def test_one_transient_read_error_is_read_again_and_changes_nothing(pam):
    """One I/O error reading the record (the disk answers the next read) is
    read again: the record is kept as it was, the finger is not locked,
    and the attempt is counted on it as on any other."""
    seeded_with_one_wrong_password(pam)
    run = pam.run(answers=["wrong"], env=faulty(pam, "read", 5, FAULT_MATCH=f"{pam.state}/{UID}.rec", FAULT_TIMES="1"))
    assert len(faults_hit(pam)) == 1
    assert run.code == PAM_AUTH_ERR and run.texts("error") == [], run
    record = pam.record()
    assert (record.F, record.P) == (0, 2), "counted on the record read the second time"
    assert pam.run(answers=[ALICE]).code == PAM_SUCCESS


def test_an_unreadable_record_is_replaced_fail_closed_and_the_password_gets_in(pam):
    """A read error that persists (the second read fails too) is a damaged
    record: the finger is locked and the password waits out the first
    back-off, then gets in. Neither refunding what the record may hold nor
    refusing every attempt (the owner locked out while the disk fails)
    would do."""
    seeded_with_one_wrong_password(pam)
    run = pam.run(answers=[ALICE], env=faulty(pam, "read", 5, FAULT_MATCH=f"{pam.state}/{UID}.rec"))
    assert faults_hit(pam)
    assert run.code == PAM_CRED_INSUFFICIENT and run.prompts() == []
    assert run.texts("error") == ["Too many wrong passwords. Try again in 1 minute."]
    record = pam.record()
    assert (record.F, record.P) == (5, 5)
    assert pam.run(answers=[ALICE], wrapper=later_boot_clock(61)).code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_state_directory_swapped_for_a_symlink_mid_prompt_is_refused(pam, when):
    """The directory is moved away and a symlink to an attacker's directory
    put in its place at the moment the module opens it (just before, or
    just after): nothing is read from or written to the attacker's
    directory, and the real record keeps its count."""
    before = seeded_with_one_wrong_password(pam)
    attacker = pam.base / "attacker"
    attacker.mkdir(mode=0o700)
    run = pam.run(answers=[ALICE], env=faulty(pam, FAULT_SWAP=pam.state, FAULT_SWAP_TARGET=attacker, FAULT_SWAP_WHEN=when))
    assert faults_hit(pam) == [f"swap {pam.state}"]
    assert run.code == PAM_SYSTEM_ERR, run
    assert run.texts("error") == [NOT_RECORDED]
    # Just before: the prompt's first read refuses. Just after: that read
    # went on through the descriptor it holds, and the next transaction,
    # walking the path again, refuses.
    refused = "cannot read the record of" if when == "before" else "cannot read the back-off of"
    assert any(refused in line and "is not a directory owned by root with mode 0700" in line
               for line in log_lines(run)), run.stderr
    assert list(attacker.iterdir()) == []
    assert (Path(f"{pam.state}.moved") / f"{UID}.rec").read_bytes() == before


# ---- the wall clock ----

@pytest.mark.skipif(not FAKETIME.exists(), reason="libfaketime is not installed")
@pytest.mark.parametrize("shift", ["-3d", "+3d"])
def test_a_wall_clock_moved_by_days_neither_ends_nor_stretches_a_wait(pam, shift):
    for attempt in range(5):
        assert pam.run(answers=[f"wrong-{attempt}"]).code == PAM_AUTH_ERR
    moved = {"LD_PRELOAD": f"libpam_wrapper.so libnss_wrapper.so {FAKETIME}", "FAKETIME": shift,
             "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    refused = pam.run(answers=[ALICE], env=moved)
    assert refused.code == PAM_CRED_INSUFFICIENT and refused.prompts() == []
    assert refused.texts("error") == ["Too many wrong passwords. Try again in 1 minute."]
    assert 55_000 < pam.record().backoff_ms <= 60_000
    # The wait runs on the boot clock: 61 s later it is over, whatever the wall says.
    assert pam.run(answers=[ALICE], env=moved, wrapper=later_boot_clock(61)).code == PAM_SUCCESS
    shown = pam.record().last_passcode_wall
    assert abs(shown - (time.time() + (3 if shift == "+3d" else -3) * 86400)) < 600  # the display follows the wall


# ---- the passcode stack ----

@pytest.mark.parametrize("lines", [
    ["auth required /nonexistent/pam_nothing.so"],
    ["this is not a pam line"],
    [],
], ids=["module-missing", "garbage", "empty"])
def test_a_passcode_stack_that_cannot_run_decides_nothing(pam, lines):
    """A stack that never asks for the password cannot have checked it: the
    attempt is given back and the module steps aside (the test's stack then
    reaches its marker module; the shipped stacks reach pam_unix)."""
    pam.write_service("localauth-passcode", lines)
    run = pam.run(answers=[ALICE])
    assert run.ignored, run
    assert any("did not ask for the passcode; check its stack" in line for line in log_lines(run)), run.stderr
    assert (pam.record().F, pam.record().P) == (0, 0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_a_hanging_passcode_stack_killed_keeps_the_entry_counted(pam, sig):
    """The password is charged before the stack checks it: a stack that
    hangs, and a prompt killed while it hangs, leave it counted."""
    pidfile = pam.base / "sleeper.pid"
    hang = pam.base / "hang.sh"
    hang.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 600\n")
    hang.chmod(0o755)
    pam.write_service("localauth-passcode", [
        f"auth required {PAM_MATRIX} passdb={pam.passdb}",   # asks for the password, then
        f"auth required pam_exec.so {hang}",                 # the stack hangs
    ])
    proc = pam.spawn(answers=["wrong"])
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None, "the passcode stack never ran"
            time.sleep(0.01)  # polling a condition, bounded by the deadline
        assert pam.record().P == 1           # charged while the stack still runs
        proc.send_signal(sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == -sig
    assert pam.record().P == 1


# ---- odd user names ----

@pytest.mark.parametrize("name", [
    "a" * 5000, os.fsdecode(b"al\xffice\xfe"), "../../etc/passwd", "alice/../root", "alice\nroot", "alice ", "",
    "al\x01\x1bice", "%s%n%x",
], ids=["5000-bytes", "non-utf8", "dotdot", "slash", "newline", "trailing-space", "empty", "control", "format"])
def test_an_odd_user_name_looks_like_any_unknown_user_and_writes_only_buckets(pam, name):
    reference = pam.run(user="nosuchuser", answers=["x"])
    run = pam.run(user=name, answers=["x"])
    assert (run.code, run.messages) == (reference.code, reference.messages) == (PAM_AUTH_ERR, [("prompt-off", PASSCODE_PROMPT)])
    assert pam.record_files() == [], pam.state_files()
    assert sorted(p.name for p in pam.base.iterdir()) == ["group", "pam.d", "passdb", "passwd", "state"]


# ---- hostile limits ----

@pytest.mark.parametrize("seeded", [False, True], ids=["no-record", "record-on-disk"])
def test_every_descriptor_limit_fails_closed(pam, seeded):
    """From too few descriptors for the program to start, through too few
    for the store, to enough: each run either does not start, refuses with
    the message (leaving the record as it was), or charges the wrong
    password exactly once (a new record, or the one on disk in place)."""
    refused = 0
    for limit in range(3, 17):
        if pam.record_path().exists():
            pam.record_path().unlink()
        before = seeded_with_one_wrong_password(pam) if seeded else None
        run = pam.run(answers=["wrong"], preexec_fn=lambda n=limit: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)))
        assert run.code != PAM_SUCCESS
        if run.code == PAM_SYSTEM_ERR:
            refused += 1
            assert run.texts("error") == [NOT_RECORDED], (limit, run)
            assert (pam.record_path().read_bytes() == before) if seeded else not pam.record_path().exists()
        elif run.code == PAM_AUTH_ERR:
            assert pam.record().P == (2 if seeded else 1), limit
        else:
            assert run.code == -1, (limit, run)   # the harness itself could not start
            assert (pam.record_path().read_bytes() == before) if seeded else not pam.record_path().exists()
    assert refused >= 1, "no limit reached the store's refusal"


# ---- fprintd answering with the wrong types (a stand-in fprintd on the rig's bus) ----

class FakeFprintd:
    """python-dbusmock owning fprintd's name on the rig's bus, with a
    manager and one device whose methods the test defines."""
    DEVICE = "/net/reactivated/Fprint/Device/0"

    def __init__(self, rig):
        from gi.repository import GLib
        self.GLib = GLib
        self.rig = rig
        rig.stop_fprintd()
        self.proc = subprocess.Popen(DIE_WITH_TESTS + [PY3, "-m", "dbusmock", "--system", FPRINT_NAME, MANAGER_PATH, MANAGER_IFACE],
                                     env=rig.env(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL)
        rig._wait_name(FPRINT_NAME, True, self.proc)

    def method(self, path, interface, name, in_sig, out_sig, code):
        self.rig.ctl.call(FPRINT_NAME, path, "org.freedesktop.DBus.Mock", "AddMethod",
                          self.GLib.Variant("(sssss)", (interface, name, in_sig, out_sig, code)))

    def device(self, methods):
        props = {"name": self.GLib.Variant("s", "stand-in"), "scan-type": self.GLib.Variant("s", "press"),
                 "num-enroll-stages": self.GLib.Variant("i", 5), "finger-present": self.GLib.Variant("b", False),
                 "finger-needed": self.GLib.Variant("b", False)}
        self.rig.ctl.call(FPRINT_NAME, MANAGER_PATH, "org.freedesktop.DBus.Mock", "AddObject",
                          self.GLib.Variant("(ssa{sv}a(ssss))", (self.DEVICE, DEVICE_IFACE, props, methods)))

    def calls(self, path, name):
        found = self.rig.ctl.call(FPRINT_NAME, path, "org.freedesktop.DBus.Mock", "GetMethodCalls",
                                  self.GLib.Variant("(s)", (name,)))
        return found[0]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def stand_in(pam):
    with FprintRig() as rig:
        fake = FakeFprintd(rig)
        try:
            yield rig, fake
        finally:
            fake.close()


GOOD_DEVICE_METHODS = [
    ("ListEnrolledFingers", "s", "as", "ret = ['right-index-finger']"),
    ("Claim", "s", "", ""),
    ("Release", "", "", ""),
    ("VerifyStop", "", "", ""),
]


@pytest.mark.parametrize("case", ["devices-as-string", "fingers-as-integer", "claim-returns-a-value"])
def test_an_fprintd_answering_with_wrong_types_means_the_password(pam, stand_in, case):
    rig, fake = stand_in
    methods = list(GOOD_DEVICE_METHODS)
    if case == "devices-as-string":
        fake.method(MANAGER_PATH, MANAGER_IFACE, "GetDevices", "", "s", f"ret = '{fake.DEVICE}'")
    else:
        fake.method(MANAGER_PATH, MANAGER_IFACE, "GetDevices", "", "ao", f"ret = ['{fake.DEVICE}']")
    if case == "fingers-as-integer":
        methods[0] = ("ListEnrolledFingers", "s", "i", "ret = 7")
    if case == "claim-returns-a-value":
        methods[1] = ("Claim", "s", "i", "ret = 1")
    methods.append(("VerifyStart", "s", "", ""))
    fake.device(methods)
    pam.password_entered("alice", rig)
    run = pam.run(answers=["", ALICE] if case == "claim-returns-a-value" else [ALICE], env=rig.env())
    assert run.code == PAM_SUCCESS, run
    assert run.prompts()[-1] in (PASSCODE_PROMPT, FIRST_PROMPT)
    assert (pam.record().F, pam.record().P) == (0, 0)
    assert fake.calls(fake.DEVICE, "VerifyStart") == [] or case == "claim-returns-a-value"


def test_verdicts_of_the_wrong_type_are_never_counted(pam, stand_in):
    """Every verify the stand-in starts answers with two malformed
    VerifyStatus signals and then a plain no-match: only the no-matches
    count (three verifies for the prompt's three tries), then the password
    prompt; a wrong password there is counted too."""
    rig, fake = stand_in
    fake.method(MANAGER_PATH, MANAGER_IFACE, "GetDevices", "", "ao", f"ret = ['{fake.DEVICE}']")
    emit = ("self.EmitSignal('net.reactivated.Fprint.Device', 'VerifyFingerSelected', 's', ['right-index-finger']); "
            "self.EmitSignal('net.reactivated.Fprint.Device', 'VerifyStatus', 'i', [1]); "
            "self.EmitSignal('net.reactivated.Fprint.Device', 'VerifyStatus', 'ss', ['verify-match', 'yes']); "
            "self.EmitSignal('net.reactivated.Fprint.Device', 'VerifyStatus', 'sb', ['verify-no-match', True])")
    fake.device(GOOD_DEVICE_METHODS + [("VerifyStart", "s", "", emit)])
    pam.password_entered("alice", rig)
    run = pam.run(answers=["", "wrong"], env=rig.env())
    assert run.code == PAM_AUTH_ERR, run
    assert len(fake.calls(fake.DEVICE, "VerifyStart")) == 3, run.stdout
    assert sum("Fingerprint not recognized" in t for t in run.texts()) == 3
    assert run.prompts() == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert (pam.record().F, pam.record().P) == (3, 1)
    assert fake.calls(fake.DEVICE, "Release"), "the reader was not released"


# ---- signals at each step of a prompt (the real fprintd) ----


def wait_for_counts(pam, counts, proc, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        if pam.record_path().exists() and (pam.record().F, pam.record().P) == counts:
            return
        assert time.monotonic() < deadline and proc.poll() is None, f"never reached {counts}"
        time.sleep(0.005)  # polling a condition, bounded by the deadline


STEPS = {
    # name: (answers, what the rig feeds first, the counts on disk that mark the step)
    "reader-waiting": (["", ALICE], [], (1, 0)),
    "after-a-miss": (["", ALICE], [MISS], (2, 0)),
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_signal_while_the_reader_waits_keeps_every_charge_and_frees_the_reader(pam, rig, step, sig):
    """In prompt mode the signal's default action ends the program: the
    attempt pending on the reader stays charged (it may have been judged),
    a miss before it stays, nothing is granted, and fprintd gives the reader
    to the next prompt."""
    answers, feed, counts = STEPS[step]
    if feed:
        rig.feed(feed)
    proc = pam.spawn(answers=answers, env=rig.env())
    try:
        wait_for_counts(pam, counts, proc)
        if feed:
            assert rig.feed_wait(timeout=30).ok
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -sig
    assert "result:" not in out
    assert (pam.record().F, pam.record().P) == counts
    rig.reader_given_back("alice")
    # The next prompt is served: the reader, the counts, the match.
    rig.feed([MATCH])
    assert pam.run(answers=[""], env=rig.env()).code == PAM_SUCCESS
    assert (pam.record().F, pam.record().P) == (0, 0)


def test_a_stopped_and_continued_prompt_goes_on_as_if_nothing_happened(pam, rig):
    proc = pam.spawn(answers=[""], env=rig.env())
    try:
        wait_for_counts(pam, (1, 0), proc)
        proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while process_state(proc.pid) != "T":
            assert time.monotonic() < deadline
            time.sleep(0.001)  # polling a condition, bounded by the deadline
        rig.feed([MATCH], on_cue=False)
        assert rig.feed_wait(timeout=30).ok
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = parse_run(out, err)
    assert run.code == PAM_SUCCESS, run
    assert (pam.record().F, pam.record().P) == (0, 0)


@pytest.mark.parametrize("verdict, offset_ms", [(v, o) for v in (MISS, MATCH) for o in (-3, 0, 3)],
                         ids=[f"{'miss' if v == MISS else 'match'}{o:+d}ms" for v in (MISS, MATCH) for o in (-3, 0, 3)])
def test_ctrl_c_racing_a_verdict_never_loses_a_miss_nor_grants_without_a_match(pam, rig, verdict, offset_ms):
    """Terminal mode: Ctrl-C a few milliseconds before, with, or after the
    finger is judged. A bus client that eavesdrops (as the rig's bus lets
    anyone) sees in the bus's own order whether fprintd's verdict went out
    before the prompt's VerifyStop: then fprintd judged the finger and a
    miss must stay counted. Whichever wins, a success is a match with the
    counts reset, and otherwise the attempt stays charged unless the stop
    came first and the reader proved it judged nothing."""
    pam.write_owner_stack(args="mode=terminal timeout=20")
    monitor = BusMonitor(rig)
    proc = pam.spawn(answers=[], env=rig.env(), count_interrupts=True)

    def scan():
        if offset_ms >= 0:
            rig.send_vdev(verdict, timeout=10)   # before the Ctrl-C: the finger must reach the reader
            return
        try:
            rig.send_vdev(verdict, timeout=2)
        except (OSError, TimeoutError):
            pass    # the Ctrl-C won: the reader was released before the finger came

    try:
        monitor.wait_for("VerifyStart")   # a scan sent from here on is judged by this verify
        if offset_ms < 0:
            proc.send_signal(signal.SIGINT)
            time.sleep(-offset_ms / 1000)   # the race's offset, not a policy timer
            scan()
        else:
            scan()
            time.sleep(offset_ms / 1000)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        rig.wait_until_claimable("alice", timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        order = monitor.close()
    run = parse_run(out, err)
    record = pam.record()
    stop = next((i for i, (m, _) in enumerate(order) if m == "VerifyStop"), len(order))
    judged_before_stop = [a for m, a in order[:stop] if m == "VerifyStatus"]
    verifies = sum(m == "VerifyStart" for m, _ in order)
    assert run.code != -1, run
    if run.code == PAM_SUCCESS:
        # fprintd judged a match (its verdict may be routed after the stop,
        # which it had not read yet): a real match, with the counts reset.
        assert ("VerifyStatus", "verify-match") in order and (record.F, record.P) == (0, 0), (run, order)
        return
    # Never more charged than verifies started; a miss fprintd judged before
    # the stop is never given back; a Ctrl-C before any failure cancels, and
    # after one it chooses the password (which this prompt does not answer).
    assert record.F <= verifies, (run, order)
    if "verify-no-match" in judged_before_stop:
        assert record.F >= 1, (run, order)
    assert run.code == PAM_CONV_ERR, run
    # A cancel leaves the Ctrl-C to the program; a fallback takes it and asks for the password.
    if PASSCODE_PROMPT in run.prompts():
        assert run.interrupts_delivered == 0, run
    else:
        assert run.interrupts_delivered == 1 and record.F <= 1, run
