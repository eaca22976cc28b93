"""The module's memory, through the real module and real libpam (pam_wrapper,
nss_wrapper): valgrind memcheck over whole prompts, and what is left of a
password in the process once libpam hands control back.

Memcheck. pamharness runs under `valgrind --tool=memcheck` (XML output, the
suppressions of tools/valgrind.supp) for the passcode path (pam_matrix), the
fingerprint path (a real fprintd with libfprint's virtual device) and a
damaged record, each once and then several times in one process (-n), each
transaction with the same answers. A case fails on
  * any invalid read or write, use of an uninitialised value or bad free
    whose stack passes through pam_localauth.so;
  * any definitely lost block whose allocation stack passes through it;
  * any growth of the definitely lost bytes with the number of prompts: what
    libpam, pam_wrapper, nss_wrapper or glibc keep for themselves is the
    same for one prompt as for five, a leak of ours (or one of theirs that
    we cause) is not.
What is not ours but is reached from our calls goes into tools/valgrind.supp,
each entry with whose code it is. valgrind cannot unwind through the
module's Swift code (it carries no unwind tables), so a stack names the
module in its frames up to the first Swift function: enough to tell whose
it is. --keep-debuginfo=yes keeps the module's name on the frames of blocks
found after pam_end has unloaded it.

Secrets. pamharness -x gives an answer obfuscated (the harness never holds
it in the clear outside the reply it hands to libpam) and -m scans every
readable mapping of the process for it after pam_authenticate and after
pam_end. The reply is a block of a size nothing else asks malloc for, so
once freed it stays as its receiver left it: a module that frees it
unwiped leaves its tail there for the scan. Here the passcode service is the shipped one, real pam_unix against
a hash in nss_wrapper's passwd file: pam_matrix, the passcode stack of the
other tests, leaves copies of its own (the conversation's reply with only its
first byte zeroed, its strndup of it freed unwiped, and the stored password
it reads from its plaintext file on the stack), which would hide ours.
Linux-PAM drops PAM_AUTHTOK (overwritten, freed) when pam_authenticate
returns to the application, so libpam's item is no copy after it either; the
harness tells that item apart anyway, in case a libpam keeps it.
"""
import os
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

import pytest

from pamenv import HARNESS, PAM_AUTH_ERR, PAM_CRED_INSUFFICIENT, PAM_SUCCESS, PASSWORDS, ROOT, USERS
from private_world import openssl_hash
from sentences import FIRST_PROMPT, PASSCODE_PROMPT

VALGRIND = shutil.which("valgrind")
SUPPRESSIONS = ROOT / "tools" / "valgrind.supp"
MEMCHECK_ERRORS = 99       # --error-exitcode: memory errors only (leaks are read from the XML)
OUR_OBJECT = "/pam_localauth.so"

ALICE = PASSWORDS["alice"]
MATCH = "SCAN finger-alice"
MISS = "SCAN finger-nobody"

needs_valgrind = pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed (make deps)")


# ---- memcheck ---------------------------------------------------------------

@dataclass
class Finding:
    kind: str
    text: str
    objects: list        # the object of every frame of every stack, in order
    leaked_bytes: int = 0

    @property
    def ours(self):
        return any(obj.endswith(OUR_OBJECT) for obj in self.objects)

    def __str__(self):
        return f"{self.kind}: {self.text} via {' < '.join(o.rsplit('/', 1)[-1] for o in self.objects[:8])}"


@dataclass
class Memcheck:
    exit_code: int
    stdout: str
    stderr: str
    errors: list = field(default_factory=list)   # memory errors
    leaks: list = field(default_factory=list)    # definitely lost records

    @property
    def definitely_lost(self):
        return sum(leak.leaked_bytes for leak in self.leaks)

    def codes(self):
        """How many transactions ended with each PAM code (the harness's -n summary)."""
        counts = {}
        for line in self.stdout.splitlines():
            name, _, value = line.partition(": ")
            if name.startswith("code_"):
                counts[int(name[5:])] = int(value)
        return counts


def parse_memcheck(path):
    errors, leaks = [], []
    for error in ElementTree.parse(path).getroot().iter("error"):
        kind = error.findtext("kind")
        objects = [frame.findtext("obj") or "?" for stack in error.iter("stack") for frame in stack.iter("frame")]
        if kind.startswith("Leak_"):
            leaks.append(Finding(kind, error.findtext("xwhat/text"), objects, int(error.findtext("xwhat/leakedbytes"))))
        else:
            errors.append(Finding(kind, error.findtext("what") or error.findtext("xwhat/text") or "", objects))
    return errors, leaks


def memcheck(pam, answers, cycles, env=None, name="run"):
    """`cycles` transactions of the owner stack under memcheck, in one process."""
    xml = pam.base / f"memcheck-{name}-{cycles}.xml"
    command = [VALGRIND, "--tool=memcheck", f"--error-exitcode={MEMCHECK_ERRORS}", "--errors-for-leak-kinds=none",
               "--leak-check=full", "--show-leak-kinds=definite", "--keep-debuginfo=yes", "--num-callers=40",
               f"--suppressions={SUPPRESSIONS}", "--xml=yes", f"--xml-file={xml}"]
    command += pam.harness_args("sudo", "alice", answers) + ["-n", str(cycles), "-T", "1", "-q"]
    proc = subprocess.run(command, env=pam.env(env), capture_output=True, text=True, timeout=300)
    run = Memcheck(proc.returncode, proc.stdout, proc.stderr)
    assert xml.exists(), f"valgrind wrote no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    run.errors, run.leaks = parse_memcheck(xml)
    return run


def assert_memory_clean(once, repeated, cycles):
    problems = []
    for label, run in (("1 prompt", once), (f"{cycles} prompts", repeated)):
        # The exit code and the report agree (a report that lost its errors
        # would pass everything below).
        assert (run.exit_code == MEMCHECK_ERRORS) == bool(run.errors), (run.exit_code, run.stderr[-2000:])
        assert run.exit_code in (0, MEMCHECK_ERRORS), run.stderr[-2000:]
        problems += [f"{label}: memory error through pam_localauth.so: {e}" for e in run.errors if e.ours]
        problems += [f"{label}: definitely lost through pam_localauth.so: {leak}" for leak in run.leaks if leak.ours]
    if repeated.definitely_lost != once.definitely_lost:
        problems.append(f"definitely lost grows with the prompts: {once.definitely_lost} bytes after 1, "
                        f"{repeated.definitely_lost} after {cycles}")
    assert problems == [], "\n".join(problems)


@needs_valgrind
def test_memcheck_correct_password(pam):
    once = memcheck(pam, [ALICE], 1)
    repeated = memcheck(pam, [ALICE], 5)
    assert (once.codes(), repeated.codes()) == ({PAM_SUCCESS: 1}, {PAM_SUCCESS: 5})
    assert_memory_clean(once, repeated, 5)


@needs_valgrind
def test_memcheck_wrong_password_from_a_missing_record_on(pam):
    """The first prompt finds no record and makes one; every later one
    reads it. No back-off within these prompts: each password is checked."""
    pam.write_owner_stack(args="passcode_backoff=1000:1s")
    assert not pam.record_path().exists()
    once = memcheck(pam, ["wrong"], 1)
    repeated = memcheck(pam, ["wrong"], 5)
    assert (once.codes(), repeated.codes()) == ({PAM_AUTH_ERR: 1}, {PAM_AUTH_ERR: 5})
    assert pam.record().P == 6
    assert_memory_clean(once, repeated, 5)


@needs_valgrind
def test_memcheck_damaged_record(pam):
    """A damaged record is replaced, fail closed (the first back-off); the
    prompts after it are refused by that wait without asking."""
    def damage():
        pam.record_path().write_bytes(b"\x00garbage" * 10)
        os.chmod(pam.record_path(), 0o600)

    damage()
    once = memcheck(pam, [ALICE], 1)
    damage()
    repeated = memcheck(pam, [ALICE], 4)
    assert (once.codes(), repeated.codes()) == ({PAM_CRED_INSUFFICIENT: 1}, {PAM_CRED_INSUFFICIENT: 4})
    record = pam.record()
    assert (record.F, record.P) == (5, 5) and record.backoff_ms > 0
    assert_memory_clean(once, repeated, 4)


@needs_valgrind
def test_memcheck_fingerprint_match(pam, rig):
    """Prompt mode: the first prompt answered with "" chooses the finger."""
    runs = []
    for cycles in (1, 4):
        rig.feed([MATCH] * cycles)
        runs.append(memcheck(pam, [""], cycles, env=rig.env(), name="match"))
        assert rig.feed_wait(timeout=120).ok
    once, repeated = runs
    assert (once.codes(), repeated.codes()) == ({PAM_SUCCESS: 1}, {PAM_SUCCESS: 4})
    assert_memory_clean(once, repeated, 4)


@needs_valgrind
def test_memcheck_fingerprint_misses_then_the_password(pam, rig):
    runs = []
    for cycles in (1, 3):
        rig.feed([MISS] * 3 * cycles)
        runs.append(memcheck(pam, ["", ALICE], cycles, env=rig.env(), name="miss"))
        assert rig.feed_wait(timeout=180).ok
    once, repeated = runs
    assert (once.codes(), repeated.codes()) == ({PAM_SUCCESS: 1}, {PAM_SUCCESS: 3})
    assert (pam.record().F, pam.record().P) == (0, 0)
    assert_memory_clean(once, repeated, 3)


# ---- copies of the password -------------------------------------------------

# Long enough that a block freed without wiping (malloc reuses its first 16
# bytes) still shows the secret's last 16 bytes; no ':' (passwd format).
SECRET = "alice-memory-scan-passphrase-0f1e2d3c4b5a6978"
WRONG = "wrong-memory-scan-passphrase-8796a5b4c3d2e1f0"
MASK = 0x5c  # pamharness's SECRET_MASK


class Hidden(str):
    """An answer the harness gets obfuscated (-x), the secret of the scan."""


@dataclass
class Copy:
    kind: str        # full, or tail (only the last 16 bytes left)
    address: int
    perms: str
    mapping: str     # [heap], [stack], a file, anonymous(after:FILE)
    owner: str       # pam-authtok, harness-kept, harness-freed, harness-reply, -


@dataclass
class Scan:
    code: int = -1
    prompts: list = field(default_factory=list)
    authtok_item: str = None
    copies: dict = field(default_factory=lambda: {"after-authenticate": [], "after-end": []})
    counts: dict = field(default_factory=dict)
    stdout: str = ""

    def __str__(self):
        return self.stdout


def parse_scan(stdout):
    scan = Scan(stdout=stdout)
    for line in stdout.splitlines():
        style, _, text = line.partition(": ")
        if style == "result":
            scan.code = int(text.split()[0])
        elif style.startswith("prompt"):
            scan.prompts.append(text)
        elif style == "pam-authtok-item":
            scan.authtok_item = text
        elif style == "secret-copies":
            stage, count = text.split()
            scan.counts[stage] = int(count)
        elif style == "secret-copy":
            parts = text.split(" ")
            stage, kind, address, perms, owner = parts[0], parts[1], parts[2], parts[3], parts[-1]
            mapping = " ".join(parts[4:-1]).rpartition("+")[0]
            scan.copies[stage].append(Copy(kind, int(address, 16), perms, mapping, owner))
    for stage, copies in scan.copies.items():
        assert scan.counts.get(stage) == len(copies), f"the scan {stage} did not finish:\n{stdout}"
    return scan


def masked(secret):
    return bytes(byte ^ MASK for byte in secret.encode()).hex()


def scan_prompt(pam, answers, env=None, control=None):
    """One prompt with the secret scan (-m); `control` is -K keep|free."""
    args = [str(HARNESS), "-s", "sudo", "-u", "alice", "-m"]
    for answer in answers:
        args += ["-x", masked(answer)] if isinstance(answer, Hidden) else ["-a", answer]
    if control:
        args += ["-K", control]
    proc = subprocess.run(args, env=pam.env(env), capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    return parse_scan(proc.stdout)


@pytest.fixture
def world(pam):
    """The shipped passcode service (pam_unix) with alice's password as a
    SHA-512 hash in nss_wrapper's passwd file (nss_wrapper has no
    getspnam_r, which pam_unix would use for a shadow file). The module's
    line alone decides; no module after it sees PAM_AUTHTOK."""
    digest = openssl_hash(SECRET)
    pam.passwd.write_text("".join(f"{u}:{digest if u == 'alice' else 'x'}:{i}:{i}:{u}:/home/{u}:/bin/sh\n"
                                  for u, i in USERS.items()))
    shutil.copy(ROOT / "pam.d" / "localauth-passcode", pam.services / "localauth-passcode")
    pam.write_service("sudo", [pam.module_line("[success=1 default=die]"), "auth requisite pam_deny.so",
                               "auth required pam_permit.so"])
    return pam


def assert_no_copy(scan):
    """None after pam_end; after pam_authenticate none but libpam's own
    PAM_AUTHTOK item, while the handle lives and if libpam still holds it
    (Linux-PAM drops it as pam_authenticate returns: "unset" here)."""
    assert scan.authtok_item in ("set", "unset"), f"libpam's PAM_AUTHTOK item could not be located:\n{scan}"
    items = [c for c in scan.copies["after-authenticate"] if c.owner == "pam-authtok"]
    assert len(items) == (1 if scan.authtok_item == "set" else 0), str(scan)
    others = [c for c in scan.copies["after-authenticate"] if c.owner != "pam-authtok"]
    assert others == [], f"copies of the password after pam_authenticate:\n{scan}"
    assert scan.copies["after-end"] == [], f"copies of the password after pam_end:\n{scan}"


def test_a_wrong_password_leaves_no_copy(world):
    scan = scan_prompt(world, [Hidden(WRONG)])
    assert scan.code == PAM_AUTH_ERR and scan.prompts == [PASSCODE_PROMPT]
    assert scan.counts == {"after-authenticate": 0, "after-end": 0}, str(scan)
    assert world.record().P == 1


def test_the_correct_password_leaves_no_copy(world):
    """The module sets PAM_AUTHTOK on this success (for the modules after
    it); libpam's item is the one copy that may outlive the prompt, and
    only until pam_end."""
    scan = scan_prompt(world, [Hidden(SECRET)])
    assert scan.code == PAM_SUCCESS and scan.prompts == [PASSCODE_PROMPT]
    assert_no_copy(scan)
    assert (world.record().F, world.record().P) == (0, 0)


def test_a_fingerprint_match_leaves_only_the_copy_kept_on_purpose(world, rig):
    """The harness keeps one copy itself (-K keep) in the same process: the
    scan finds it, among sd-bus and the rest, and nothing else."""
    rig.feed([MATCH])
    scan = scan_prompt(world, ["", Hidden(SECRET)], env=rig.env(), control="keep")
    assert rig.feed_wait(timeout=30).ok
    assert scan.code == PAM_SUCCESS and scan.prompts == [FIRST_PROMPT]
    for stage in ("after-authenticate", "after-end"):
        found = [(c.kind, c.mapping, c.owner) for c in scan.copies[stage]]
        assert found == [("full", "[heap]", "harness-kept")], str(scan)


def test_finger_misses_then_the_password_leave_no_copy(world, rig):
    rig.feed([MISS] * 3)
    scan = scan_prompt(world, ["", Hidden(SECRET)], env=rig.env())
    assert rig.feed_wait(timeout=30).ok
    assert scan.code == PAM_SUCCESS and scan.prompts == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert_no_copy(scan)
    assert (world.record().F, world.record().P) == (0, 0)


def test_finger_misses_then_a_wrong_password_leave_no_copy(world, rig):
    rig.feed([MISS] * 3)
    scan = scan_prompt(world, ["", Hidden(WRONG)], env=rig.env())
    assert rig.feed_wait(timeout=30).ok
    assert scan.code == PAM_AUTH_ERR and scan.prompts == [FIRST_PROMPT, PASSCODE_PROMPT]
    assert scan.counts == {"after-authenticate": 0, "after-end": 0}, str(scan)
    assert (world.record().F, world.record().P) == (3, 1)


def test_the_password_typed_at_the_first_prompt_leaves_no_copy(world, rig):
    """Prompt mode with the reader there: the first answer is the passcode."""
    scan = scan_prompt(world, [Hidden(SECRET)], env=rig.env())
    assert scan.code == PAM_SUCCESS and scan.prompts == [FIRST_PROMPT]
    assert_no_copy(scan)


# The controls: the scan is not blind. Without them every test above could
# pass with a scanner that finds nothing.

def test_the_scan_finds_a_copy_kept_on_purpose(world):
    scan = scan_prompt(world, [Hidden(WRONG)], control="keep")
    assert scan.code == PAM_AUTH_ERR
    for stage in ("after-authenticate", "after-end"):
        found = [(c.kind, c.mapping, c.owner) for c in scan.copies[stage]]
        assert found == [("full", "[heap]", "harness-kept")], str(scan)


def test_the_scan_finds_a_copy_freed_without_wiping(world):
    """malloc reuses the first 16 bytes of a freed block: what survives is
    the tail, which the scan reports as such."""
    scan = scan_prompt(world, [Hidden(WRONG)], control="free")
    assert scan.copies["after-authenticate"] == [], str(scan)
    found = [(c.kind, c.mapping, c.owner) for c in scan.copies["after-end"]]
    assert found == [("tail", "[heap]", "harness-freed")], str(scan)
