"""The integration tests' private PAM world: the real pam_localauth.so loaded
by real libpam through pam_wrapper, test users from nss_wrapper, and
pam_wrapper's pam_matrix.so as the passcode stack. Nothing here touches the
host's /etc."""
import contextlib
import functools
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _without_whitespace(build: Path) -> Path:
    """The build directory by a path without whitespace: a PAM service
    file's module path and LD_PRELOAD end at a space, so a clone under
    "/tmp/my dir" is reached through a symbolic link in the suite's private
    /tmp (tools/isolated), owned like /tmp, so every test user follows it."""
    if not any(character.isspace() for character in str(build)) or not os.environ.get("LOCALAUTH_ISOLATED"):
        return build
    link = Path("/tmp/localauth-build")
    if not (link.is_symlink() and os.readlink(link) == str(build)):
        link.unlink(missing_ok=True)
        link.symlink_to(build)
    return link


BUILD = _without_whitespace(ROOT / ".build" / "module")
# Where the module and the tools start the helper: declared once, in the C
# shim; the Makefile and the package read it from there too.
HELPER_PATH = re.search(r'la_helper_path\(void\) \{ return "([^"]+)"; \}',
                        (ROOT / "Sources/CLibc/include/libc_shim.h").read_text()).group(1)
MODULE = BUILD / "pam_localauth.so"
HARNESS = BUILD / "pamharness"
CLAIM_DELAY_SHIM = BUILD / "claimdelay.so"
# Asked from the system, not assumed: the multiarch triple (x86_64-linux-gnu
# here; Debian's Python knows it, and a release root has no compiler) and
# where libpam keeps its modules (the directory of pam_unix.so: /lib/… on
# Debian 12, /usr/lib/… later, the same directory under merged /usr).
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or subprocess.run(
    ["gcc", "-print-multiarch"], capture_output=True, text=True, check=True).stdout.strip()
PAM_MODULE_DIR = next((Path(d) for d in (f"/lib/{MULTIARCH}/security", f"/usr/lib/{MULTIARCH}/security")
                       if Path(d, "pam_unix.so").exists()), Path(f"/lib/{MULTIARCH}/security"))
PAM_WRAPPER_MODULES = Path(f"/usr/lib/{MULTIARCH}/pam_wrapper")
PAM_FPRINTD = PAM_MODULE_DIR / "pam_fprintd.so"
PAM_MATRIX = PAM_WRAPPER_MODULES / "pam_matrix.so"
PAM_CHATTY = PAM_WRAPPER_MODULES / "pam_chatty.so"
PAM_SET_ITEMS = PAM_WRAPPER_MODULES / "pam_set_items.so"
PAM_GET_ITEMS = PAM_WRAPPER_MODULES / "pam_get_items.so"
# pam_matrix's check without its wipe of PAM_AUTHTOK (as pam_unix leaves it):
# the password line before an authsucc line, whose reset checks the token again.
PAM_KEEPTOK = BUILD / "pam_keeptok.so"

PAM_SUCCESS, PAM_SYSTEM_ERR, PAM_AUTH_ERR, PAM_AUTHINFO_UNAVAIL = 0, 4, 7, 9
PAM_CONV_ERR, PAM_IGNORE, PAM_PERM_DENIED = 19, 25, 6
# A password refused unchecked while its back-off runs (sudo then stops at once).
PAM_CRED_INSUFFICIENT = 8

USERS = {"root": 0, "alice": 1001, "bob": 1002, "carol": 1003}
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "root": "root-secret", "carol": "carol-secret"}
# Marker the IGNORE path shows: pam_chatty runs only when our module ignored.
IGNORED_MARKER = "Authentication succeeded"


@dataclass
class Run:
    code: int
    messages: list = field(default_factory=list)  # (style, text)
    fail_delay: int = None
    authtok: str = None
    account: int = None
    setcred: int = None
    interrupts_delivered: int = None
    elapsed_us: int = None         # with latency=True: pam_authenticate start to return
    first_prompt_us: int = None    # with latency=True: start to the first prompt
    started_us: int = None         # with latency=True: that start on CLOCK_MONOTONIC (time.monotonic())
    stdout: str = ""
    stderr: str = ""

    def texts(self, style=None):
        return [t for s, t in self.messages if style is None or s == style]

    def prompts(self):
        return [t for s, t in self.messages if s.startswith("prompt")]

    @property
    def ignored(self):
        """Our module returned PAM_IGNORE and the next module took over."""
        return self.code == PAM_SUCCESS and any(IGNORED_MARKER in t for t in self.texts("info"))


@dataclass
class Record:
    name: str
    F: int
    P: int
    backoff_ms: int
    last_passcode_wall: int
    last_fingerprint_wall: int
    failures: int


def parse_record(data: bytes, uid: int) -> Record:
    """An independent reader of the record format pinned below: the
    current copy of a two-slot file."""
    data = current_slot(data)
    assert struct.unpack_from("<I", data, OFFSET_UID)[0] == uid
    name_len = struct.unpack_from("<H", data, OFFSET_NAME_LENGTH)[0]
    name = data[OFFSET_NAME:OFFSET_NAME + name_len].decode()
    F, P = struct.unpack_from("<II", data, OFFSET_F_P)
    backoff_ms = struct.unpack_from("<q", data, OFFSET_BACKOFF_MS)[0]
    last_pass = struct.unpack_from("<q", data, OFFSET_LAST_PASSCODE)[0]
    last_fp = struct.unpack_from("<q", data, OFFSET_LAST_FINGERPRINT)[0]
    failures = data[OFFSET_FAILURE_COUNT]
    return Record(name, F, P, backoff_ms, last_pass, last_fp, failures)


def later_boot_clock(seconds: int) -> list:
    """A command prefix that runs the prompt in a new time namespace whose
    CLOCK_BOOTTIME is `seconds` ahead (same boot id): how the tests move the
    real module's clock past a wait without sleeping through it."""
    return ["unshare", "--time", f"--boottime={seconds}"]


# The record format (docs/DESIGN.md, "The state store"), pinned on purpose:
# the tests read and reseal records at these offsets, independently of the
# Swift code, so that a change of the on-disk format is a visible,
# deliberate change here too. The file holds two copies (slots) of the
# record; the whole one with the higher generation is current.
SLOT_SIZE = 2048
SYNC_MARK_OFFSET = 2 * SLOT_SIZE   # u64 generation known on disk, then its complement
RECORD_SIZE = 2 * SLOT_SIZE + 16   # the file
RECORD_VERSION = 2
RECORD_MAGIC = b"LOCALAUT"
OFFSET_VERSION = 8          # u16 version, then u32 slot size at 12
OFFSET_UID = 16             # u32
OFFSET_NAME_LENGTH = 20     # u16; the name at 24
OFFSET_NAME = 24
OFFSET_F_P = 288            # two u32: F, P
OFFSET_BACKOFF_MS = 296     # i64: the wait still to run
OFFSET_LAST_PASSCODE = 328  # i64 wall seconds
OFFSET_LAST_FINGERPRINT = 384
OFFSET_NEXT_SEQUENCE = 392  # u64
OFFSET_FAILURE_COUNT = 400  # u8
OFFSET_GENERATION = 1760    # u64: which copy is newer
OFFSET_CHECKSUM = SLOT_SIZE - 8   # FNV-1a 64 of everything before it


def fnv1a64(data: bytes) -> int:
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def slot_is_whole(slot: bytes) -> bool:
    return (len(slot) == SLOT_SIZE and slot[:8] == RECORD_MAGIC
            and struct.unpack_from("<HxxI", slot, OFFSET_VERSION) == (RECORD_VERSION, SLOT_SIZE)
            and struct.unpack_from("<Q", slot, OFFSET_CHECKSUM)[0] == fnv1a64(slot[:OFFSET_CHECKSUM]))


def current_slot_index(data: bytes) -> int:
    """Which slot of a record file is current (asserts that one is whole)."""
    assert len(data) == RECORD_SIZE, len(data)
    whole = [i for i in (0, 1) if slot_is_whole(data[i * SLOT_SIZE:(i + 1) * SLOT_SIZE])]
    assert whole, "no whole slot"
    return max(whole, key=lambda i: struct.unpack_from("<Q", data, i * SLOT_SIZE + OFFSET_GENERATION)[0])


def current_slot(data: bytes) -> bytes:
    index = current_slot_index(data)
    return data[index * SLOT_SIZE:(index + 1) * SLOT_SIZE]


def sync_mark(generation: int) -> bytes:
    return struct.pack("<QQ", generation, generation ^ 0xFFFFFFFFFFFFFFFF)


def reseal_record(data: bytes, patch=None, **fields) -> bytes:
    """A record file whose two slots both hold the current copy with F, P or
    backoff_ms replaced (and any `patch` of {offset: bytes} applied), each
    with a valid checksum: what the module reads whichever slot it picks."""
    out = bytearray(current_slot(data))
    if "F" in fields or "P" in fields:
        F, P = struct.unpack_from("<II", out, OFFSET_F_P)
        struct.pack_into("<II", out, OFFSET_F_P, fields.get("F", F), fields.get("P", P))
    if "backoff_ms" in fields:
        struct.pack_into("<q", out, OFFSET_BACKOFF_MS, fields["backoff_ms"])
    for offset, value in (patch or {}).items():
        out[offset:offset + len(value)] = value
    struct.pack_into("<Q", out, OFFSET_CHECKSUM, fnv1a64(bytes(out[:OFFSET_CHECKSUM])))
    return bytes(out) * 2 + sync_mark(struct.unpack_from("<Q", out, OFFSET_GENERATION)[0])


class SeededState:
    """A test world's state directory (`self.state`) and what it held when
    the test began: nothing, or the seed of `password_entered`."""

    def state_contents(self):
        """Every record and lock with its bytes (not the helper's slots)."""
        return {p.name: p.read_bytes() for p in sorted(self.state.iterdir()) if p.is_file()}

    def note_seed(self):
        self.seeded = self.state_contents()

    def state_untouched(self):
        """Nothing written since the test began (its seed, or nothing)."""
        return self.state_contents() == getattr(self, "seeded", {})

    def record_untouched(self, uid):
        """The record of `uid` is as the test began (seeded, or absent)."""
        name = f"{uid}.rec"
        return self.state_contents().get(name) == getattr(self, "seeded", {}).get(name)


class PamEnv(SeededState):
    """One private PAM world: service dir, users, passdb, state dir."""

    def __init__(self, base: Path):
        self.base = base
        self.services = base / "pam.d"
        self.state = base / "state"
        self.services.mkdir()
        self.state.mkdir(mode=0o700)
        os.chmod(self.state, 0o700)
        self.passwd = base / "passwd"
        self.group = base / "group"
        self.passdb = base / "passdb"
        self.passwd.write_text("".join(f"{u}:x:{i}:{i}:{u}:/home/{u}:/bin/sh\n" for u, i in USERS.items()))
        self.group.write_text("".join(f"{u}:x:{i}:\n" for u, i in USERS.items()))
        self.passdb.write_text("".join(f"{u}:{p}:localauth-passcode\n" for u, p in PASSWORDS.items())
                               + "".join(f"{u}:{p}:sudo\n" for u, p in PASSWORDS.items()))
        self.conf = base / "localauth.conf"  # absent unless a test writes it
        self.write_service("other", ["auth required pam_deny.so"])
        self.write_service("localauth-passcode", [f"auth required {PAM_MATRIX} passdb={self.passdb}"])

    def module_line(self, control: str, args: str = "") -> str:
        return f"auth {control} {MODULE} state_dir={self.state} conf={self.conf} {args}".rstrip()

    def write_service(self, name: str, lines: list):
        (self.services / name).write_text("\n".join(lines) + "\n")

    def write_owner_stack(self, name: str = "sudo", args: str = ""):
        """Our module decides; on IGNORE the marker module takes over."""
        self.write_service(name, [
            self.module_line("[success=2 ignore=ignore authinfo_unavail=ignore default=die]", args),
            f"auth [success=1 default=die] {PAM_CHATTY} num_lines=1 info",
            "auth requisite pam_deny.so",
            f"auth optional {PAM_GET_ITEMS}",
            "auth required pam_permit.so",
        ])

    def env(self, extra=None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LD_PRELOAD": "libpam_wrapper.so libnss_wrapper.so",
            "PAM_WRAPPER": "1",
            "PAM_WRAPPER_SERVICE_DIR": str(self.services),
            "NSS_WRAPPER_PASSWD": str(self.passwd),
            "NSS_WRAPPER_GROUP": str(self.group),
            # No fprintd unless a test starts the rig: a system bus that is not there.
            "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={self.base}/no-system-bus",
        }
        if extra:
            env.update(extra)
        return env

    def harness_args(self, service, user, answers=(), ruser=None, rhost=None, tty=None, silent=False, authtok=False,
                     account=False, count_interrupts=False, latency=False, real_uid=None):
        """`real_uid`: run PAM as sudo does, with that real uid and root's
        effective one (default: root's both, as a login screen)."""
        args = [str(HARNESS), "-s", service, "-u", user]
        if real_uid is not None:
            args += ["-R", str(real_uid)]
        for answer in answers:
            args += ["-a", answer]
        if ruser is not None:
            args += ["-r", ruser]
        if rhost is not None:
            args += ["-H", rhost]
        if tty is not None:
            args += ["-t", tty]
        if silent:
            args.append("-S")
        if authtok:
            args.append("-A")
        if account:
            args.append("-M")
        if count_interrupts:
            args.append("-I")
        if latency:
            args.append("-L")
        return args

    def run(self, service="sudo", user="alice", answers=(), env=None, timeout=60, preexec_fn=None, wrapper=(),
            **kwargs) -> Run:
        """One prompt. `wrapper` is a command prefix, e.g. later_boot_clock()."""
        proc = subprocess.run(list(wrapper) + self.harness_args(service, user, answers, **kwargs), env=self.env(env),
                              capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn)
        return parse_run(proc.stdout, proc.stderr)

    def spawn(self, service="sudo", user="alice", answers=(), env=None, **kwargs):
        return subprocess.Popen(self.harness_args(service, user, answers, **kwargs), env=self.env(env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run_parallel(self, count, service="sudo", user="alice", answer=lambda i: f"wrong-{i}", timeout=180):
        """Runs `count` prompts at once. pam_wrapper's private service dir has a
        one-letter name (/tmp/pam.X), so many processes at once collide; here
        a private mount namespace binds the test's service dir over /etc/pam.d
        instead (the host's /etc is untouched) and libpam runs unwrapped."""
        out = self.base / "parallel"
        out.mkdir(exist_ok=True)
        lines = ["set -e", "mount --make-rprivate /", f"mount --bind {self.services} /etc/pam.d",
                 "export LD_PRELOAD=libnss_wrapper.so", f"export NSS_WRAPPER_PASSWD={self.passwd}",
                 f"export NSS_WRAPPER_GROUP={self.group}",
                 f"export DBUS_SYSTEM_BUS_ADDRESS=unix:path={self.base}/no-system-bus", "pids="]
        for i in range(count):
            args = " ".join(f"'{a}'" for a in self.harness_args(service, user, [answer(i)]))
            lines.append(f"{args} > {out}/{i}.out 2>&1 & pids=\"$pids $!\"")
        lines.append("for p in $pids; do wait $p || true; done")
        subprocess.run(["unshare", "--mount", "bash", "-c", "\n".join(lines)], check=True, timeout=timeout,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return [parse_run((out / f"{i}.out").read_text()) for i in range(count)]

    def password_entered(self, user="alice", rig=None):
        """`user` typed the password once this boot (see password_entered)."""
        password_entered(self.state, USERS[user], user, rig.bus_address if rig else None)
        self.note_seed()

    def record_path(self, user="alice") -> Path:
        return self.state / f"{USERS[user]}.rec"

    def record(self, user="alice") -> Record:
        return parse_record(self.record_path(user).read_bytes(), USERS[user])

    def state_files(self):
        return sorted(p.name for p in self.state.iterdir())

    def record_files(self):
        """The state files apart from the store's reserve."""
        return [name for name in self.state_files() if not is_reserve(name)]


def is_reserve(name):
    """What the store keeps made ahead of need, beside the records: spare
    record and lock files (and the temporary a killed refill can leave),
    and the look-alike key, lock and file (every bucket) made with them."""
    return name.startswith(("spare.", "spare-lock.", "lookalike."))


LOOKALIKE_UID = 0xFFFFFFFF
LOOKALIKE_BUCKETS = 1024


def lookalike_records(data: bytes) -> dict:
    """The look-alike file read independently: every bucket (a record
    file's image at its offset) that holds a named record, by name."""
    assert len(data) == LOOKALIKE_BUCKETS * RECORD_SIZE, len(data)
    records = {}
    for bucket in range(LOOKALIKE_BUCKETS):
        record = parse_record(data[bucket * RECORD_SIZE:(bucket + 1) * RECORD_SIZE], LOOKALIKE_UID)
        if record.name:
            records[record.name] = record
    return records


def prompt_timings(pam, users, runs=30, warmup=3, env=None, service="sudo"):
    """For each user, `runs` (time to the first prompt, whole call) pairs in
    microseconds, one wrong password each, the users interleaved round by
    round so that drift hits them alike. The records are removed, and the
    look-alike file put back as it was made, before each run (outside the
    timed call) so the back-off never starts; lock files, the key and the
    spares stay, as on a machine in use."""
    timings = {user: [] for user in users}
    # A cancelled prompt for an unknown name makes the look-alike file and
    # key, and charges nothing.
    assert pam.run(service, "no-such-user-for-timing", [""], env=env).code == PAM_CONV_ERR
    blank = (pam.state / "lookalike.rec").read_bytes()
    for index in range(warmup + runs):
        for user in users:
            for path in pam.state.glob("[0-9]*.rec"):
                path.unlink()
            with open(pam.state / "lookalike.rec", "r+b") as restored:
                restored.write(blank)
                # On disk before the prompt, as on a machine in use: else the
                # unknown name's synced charge pays for flushing 4 MiB.
                os.fsync(restored.fileno())
            run = pam.run(service, user, ["wrong"], env=env, latency=True)
            assert run.first_prompt_us is not None and run.elapsed_us is not None, run.stdout
            if index >= warmup:
                timings[user].append((run.first_prompt_us, run.elapsed_us))
    return timings


def parse_run(stdout: str, stderr: str = "") -> Run:
    run = Run(code=-1, stdout=stdout, stderr=stderr)
    for line in stdout.splitlines():
        style, _, text = line.partition(": ")
        if style == "result":
            run.code = int(text.split()[0])
        elif style == "faildelay":
            run.fail_delay = int(text.split()[0])
        elif style == "authtok":
            run.authtok = text
        elif style == "acct":
            run.account = int(text)
        elif style == "setcred":
            run.setcred = int(text)
        elif style == "sigint-delivered":
            run.interrupts_delivered = int(text)
        elif style == "elapsed_us":
            run.elapsed_us = int(text)
        elif style == "first_prompt_us":
            run.first_prompt_us = int(text)
        elif style == "started_us":
            run.started_us = int(text)
        elif style in ("info", "error", "prompt-off", "prompt-on"):
            run.messages.append((style, text))
        elif style == "conv":
            run.messages.append(("conv", text))
    return run


def without_wrapper_lines(stderr: str) -> str:
    """A program's stderr without pam_wrapper's own diagnostics (its lines
    start with "PWRAP_": a stale directory of another run, a module without
    pam_sm_setcred). Those are the test library's, not the program's; any
    other line is still the program's and still compared."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("PWRAP_"))


def build():
    """Builds every test artifact (make test-artifacts): the module, the
    harness, the shim, the localauth command and the store probe. Skipped
    when LOCALAUTH_TESTS_BUILT is set: the clone-anywhere test runs a subset
    of the suite from the same checkout seen at other paths, where SwiftPM,
    which records absolute paths, would build everything again and fail."""
    if os.environ.get("LOCALAUTH_TESTS_BUILT"):
        return
    subprocess.run(["make", "-s", "test-artifacts"], cwd=ROOT, check=True)


@functools.lru_cache(maxsize=None)
def swift_bin() -> Path:
    """Where swift build puts the Swift products (the command, the probe);
    in a release root, which cannot run the toolchain's own programs, as
    tools/in-release asked it on the host."""
    if os.environ.get("LOCALAUTH_SWIFT_BIN"):
        return Path(os.environ["LOCALAUTH_SWIFT_BIN"])
    return Path(subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True,
                               text=True).stdout.strip())


def localauth_command() -> Path:
    return swift_bin() / "localauth"


def store_probe() -> Path:
    return swift_bin() / "la-store-probe"


def runtime_dir(state) -> Path:
    """The test's own /run/localauth (where the module counts while the
    state directory is read-only): a directory beside the state directory,
    kept across the prompts of a test (runtime_bound puts it in place)."""
    return Path(f"{state}.run")


def runtime_bound(state) -> str:
    """Shell commands (run as root in a private mount namespace) that put
    the test's own /run/localauth in place (runtime_dir)."""
    return f"RUN='{runtime_dir(state)}'; mkdir -p -m 0700 \"$RUN\"; mount --bind \"$RUN\" /run/localauth"


def read_only_state(state) -> str:
    """Shell commands (run as root in a private mount namespace) that make
    the state directory a filesystem of its own, holding the state, mounted
    read-only: its superblock, as a disk that went read-only leaves it (not
    one mount's read-only view); and the test's own /run/localauth."""
    return (runtime_bound(state) + "; "
            f"STATE='{state}'; SEED=$(mktemp -d); cp -a \"$STATE\"/. \"$SEED\"/; "
            "mount -t tmpfs -o size=8m,mode=0700 localauth-ro \"$STATE\"; cp -a \"$SEED\"/. \"$STATE\"/; rm -rf \"$SEED\"; "
            "mount -o remount,ro \"$STATE\"")


def password_entered(state_dir, uid: int, name: str, bus_address=None):
    """Leaves in the record what a correct password accepted by the password
    module leaves (the product's authsucc path, with the enrollment fprintd
    on `bus_address` reports): the state after the first password of this
    boot, from which the finger is enough. Tests about the fingerprint start
    here; the tests of the boot rule start from nothing."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env["DBUS_SYSTEM_BUS_ADDRESS"] = bus_address or f"unix:path={state_dir}/no-system-bus"
    subprocess.run([str(store_probe()), "password-entered", str(state_dir), str(uid), name], env=env, check=True,
                   capture_output=True, timeout=30)


def run_in_terminal(command, env, answers=()):
    """Runs a program as the session leader of a new pseudo-terminal (its
    controlling terminal), typing each answer when a line ends with ":".
    `command` is a list, or a function called in the child to make one (so
    it can name the terminal). Returns (exit code, output)."""
    pid, master = pty.fork()
    if pid == 0:
        args = command() if callable(command) else command
        os.execve(args[0], args, env)
    output = b""
    pending = list(answers)
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        output += data
        if pending and output.rstrip().endswith(b":"):
            os.write(master, pending.pop(0).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    os.close(master)
    return os.waitstatus_to_exitcode(status), output.decode().replace("\r\n", "\n")


@contextlib.contextmanager
def world_readable_pam(prefix):
    """A PamEnv that other uids can read (its state dir stays root-only 0700),
    for tests that run a program as an unprivileged user."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        os.chmod(base, 0o755)
        env = PamEnv(base)
        env.write_owner_stack("sudo")
        yield env
    finally:
        shutil.rmtree(base)


def open_to_others(env):
    """Makes everything but the state dir of a PamEnv readable by others."""
    for path in env.base.iterdir():
        if path != env.state:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)


def read_until(proc, marker, timeout=30):
    """A running harness's output up to `marker` (a bounded wait on a cue)."""
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while marker.encode() not in data:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} within {timeout} s: {data!r}"
        if select.select([fd], [], [], remaining)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"the harness ended before {marker!r}: {data!r}"
            data += chunk
    return data.decode()


# The prompt of pam_matrix, the password module of the worlds' stacks.
MATRIX_PROMPT = "Password: "


def install_shipped_stack(pam, name, module_args=""):
    """The shipped pam.d file `name` in `pam`'s world: its auth lines, with the
    built module (in scope for `name`) and, for pam_unix, a module that checks
    pam_matrix's password file and keeps the token as pam_unix does."""
    lines = []
    for line in (ROOT / "pam.d" / name).read_text().splitlines():
        if not line.startswith("auth") or "pam_rootok.so" in line:
            continue  # the tests run as root, where pam_rootok would answer for everyone
        line = re.sub(r"\bpam_localauth\.so\b", f"{MODULE} state_dir={pam.state} conf={pam.conf} services={name} {module_args}", line)
        line = re.sub(r"\bpam_unix\.so\b.*$", f"{PAM_KEEPTOK} passdb={pam.passdb}", line)
        lines.append(line)
    pam.write_service(name, lines)
