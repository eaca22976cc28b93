"""The load test's transactions: what each is planned to do, what it did,
how a round is launched, and the exact checks of a round against the
records, the bus and the sampled memory."""
import collections
import os
import shutil
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pamenv import PAM_AUTH_ERR, PAM_CONV_ERR, PAM_CRED_INSUFFICIENT, PAM_SUCCESS, parse_run
from sentences import LOCKED, NOT_RECOGNIZED, PASSCODE_PROMPT, READER_BUSY
from .world import (BACKOFF, HINTS, INSTRUCTION, KIND_FINGERPRINT, KIND_PASSWORD, MAX_FAILURES,
                    SETTLED, SOAK_SERVICE, Snapshot, UNEXPECTED, password_of)


# ============================================================================
# Transactions
# ============================================================================

@dataclass
class Planned:
    group: str            # "one-user", "users", "control", "reset"
    user: str
    kind: str
    answers: list
    wrapper: list = field(default_factory=list)


@dataclass
class Outcome:
    """One transaction's own report, read from its messages and result code."""
    plan: Planned
    code: int
    elapsed_us: int
    instruction: int = 0
    busy: int = 0
    not_recognized: int = 0
    hints: int = 0
    locked: bool = False
    refused: bool = False        # the back-off refused the password
    fingerprint_success: bool = False
    password_charged: int = 0
    password_right: bool = False
    fail_delay: bool = False
    problems: list = field(default_factory=list)
    exit_status: int = None

    @property
    def fingerprint_charges(self):
        return self.not_recognized + (1 if self.fingerprint_success else 0)

    @property
    def charges(self):
        return self.fingerprint_charges + self.password_charged

    @property
    def success(self):
        return self.code == PAM_SUCCESS


def outcome_of(plan: Planned, stdout: str) -> Outcome:
    run = parse_run(stdout)
    result = Outcome(plan, run.code, run.elapsed_us if run.elapsed_us is not None else -1)
    result.fail_delay = bool(run.fail_delay)
    for style, text in run.messages:
        if style == "info" and text.endswith(INSTRUCTION) and "your finger" in text:
            result.instruction += 1
        elif text == READER_BUSY:
            result.busy += 1
        elif text.startswith(NOT_RECOGNIZED):
            result.not_recognized += 1
        elif text in HINTS:
            result.hints += 1
        elif LOCKED in text:
            result.locked = True
        elif text.startswith(BACKOFF):
            result.refused = True
        elif any(text.startswith(u) for u in UNEXPECTED):
            result.problems.append(f"says {text!r}")
    prompts = run.prompts()
    answered = [plan.answers[i] for i in range(min(len(prompts), len(plan.answers)))]
    typed = [a for a in answered if a]
    if run.code == -1:
        result.problems.append("no result: did not end (killed at the bound) or crashed")
        return result
    if len(typed) > 1:
        result.problems.append(f"asked for the password twice: {prompts}")
    if typed and not result.refused:
        result.password_charged = 1
        result.password_right = typed[0] == password_of(plan.user)
    result.fingerprint_success = (run.code == PAM_SUCCESS and not typed and answered == [""]
                                  and result.instruction == 1)
    # What the result code must be, given what the transaction saw.
    if result.fingerprint_success or (result.password_charged and result.password_right):
        expected = PAM_SUCCESS
    elif result.password_charged:
        expected = PAM_AUTH_ERR
    elif result.refused:
        expected = PAM_CRED_INSUFFICIENT   # refused unchecked by the back-off
    else:
        expected = PAM_CONV_ERR   # the answers ran out: a cancel
    if run.code != expected:
        result.problems.append(f"result {run.code}, expected {expected}")
    if result.fail_delay != bool(result.password_charged and not result.password_right):
        result.problems.append(f"fail delay {run.fail_delay} does not fit a {'wrong' if result.password_charged else 'no'} password")
    if result.instruction + result.busy > 1 or (result.instruction and result.busy):
        result.problems.append("held the reader and was told it is busy")
    # Told the reader is busy: on to the password (or refused by its back-off).
    if result.busy and not result.refused and prompts[1:2] != [PASSCODE_PROMPT]:
        result.problems.append(f"told the reader is busy, then prompted {prompts[1:]} instead of the password")
    if result.not_recognized > 3:
        result.problems.append(f"{result.not_recognized} no-match verdicts in one prompt (max_tries is 3)")
    return result


class Launcher:
    """Starts many harness processes at once in a private mount namespace
    (the world's service files bound over /etc/pam.d, libpam unwrapped,
    nss_wrapper for the users; the host's /etc is untouched) and collects
    their reports. A phase that is not over within `bound` seconds is killed
    (its process group: the namespace's shell and every harness)."""

    def __init__(self, world, rig, bound):
        self.world = world
        self.rig = rig
        self.bound = bound
        self.count = 0
        self.shell_errors = []

    def prelude(self, nss=True, rig=None):
        lines = ["set -e", "mount --make-rprivate /", f"mount --bind {self.world.services} /etc/pam.d",
                 f"export DBUS_SYSTEM_BUS_ADDRESS={(rig or self.rig).bus_address}"]
        if nss:
            lines += ["export LD_PRELOAD=libnss_wrapper.so", f"export NSS_WRAPPER_PASSWD={self.world.passwd}",
                      f"export NSS_WRAPPER_GROUP={self.world.group}"]
        return lines

    def run(self, plans):
        self.count += 1
        out = self.world.base / "runs" / str(self.count)
        out.mkdir(parents=True)
        lines = self.prelude() + ["pids="]
        for index, plan in enumerate(plans):
            argv = plan.wrapper + self.world.harness_args("sudo", plan.user, plan.answers, latency=True)
            # The exit status too: a signal shows as 128 + its number.
            lines.append("{ " + " ".join(f"'{a}'" for a in argv) + f" > {out}/{index}.out 2>&1; echo $? > {out}/{index}.rc; }} & "
                         + 'pids="$pids $!"')
        lines.append("for p in $pids; do wait $p || true; done")
        started = time.monotonic()
        with open(out / "shell.err", "w") as shell_err:
            proc = subprocess.Popen(["unshare", "--mount", "bash", "-c", "\n".join(lines)], start_new_session=True,
                                    stderr=shell_err, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        killed = False
        try:
            proc.wait(timeout=self.bound)
        except subprocess.TimeoutExpired:
            killed = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        wall = time.monotonic() - started
        outcomes = []
        for index, plan in enumerate(plans):
            output = out / f"{index}.out"
            status = out / f"{index}.rc"
            outcome = outcome_of(plan, output.read_text(errors="replace") if output.exists() else "")
            outcome.exit_status = int(status.read_text()) if status.exists() else None
            if outcome.code == -1:
                outcome.problems.append(f"exit status {outcome.exit_status}, output {output.read_text(errors='replace')[-300:]!r}"
                                        if output.exists() else "never started")
            outcomes.append(outcome)
        shell = (out / "shell.err").read_text(errors="replace").strip()
        if shell:
            self.shell_errors.append(shell[-2000:])
        shutil.rmtree(out)
        return outcomes, wall, killed

    def start_soak(self, cycles, threads, rig):
        """The long-running multi-cycle process, on its own rig: root (from
        the host's passwd, read only: nss_wrapper is not thread-safe) presses
        Enter for the finger, then types the right password if asked."""
        argv = self.world.harness_args(SOAK_SERVICE, "root", ["", password_of("root")]) + ["-n", str(cycles), "-T", str(threads), "-q"]
        script = "\n".join(self.prelude(nss=False, rig=rig) + ["exec " + " ".join(f"'{a}'" for a in argv)])
        return subprocess.Popen(["unshare", "--mount", "bash", "-c", script], start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


# ============================================================================
# Phases and their accounting
# ============================================================================

FAIL_KINDS = [("fp-wrong", 6), ("typed-wrong", 3), ("fp-cancel", 1)]
MIXED_KINDS = [("fp-right", 3), ("fp-wrong", 3), ("typed-right", 1), ("typed-wrong", 2), ("fp-cancel", 1)]


def answers_for(kind, user, tag):
    wrong = f"wrong-{tag}"
    return {"fp-wrong": ["", wrong], "typed-wrong": [wrong], "fp-cancel": [""], "fp-right": ["", password_of(user)],
            "typed-right": [password_of(user)]}[kind]


def plan_group(rng, group, users, kinds, tag):
    names, weights = zip(*kinds)
    plans = []
    for index, user in enumerate(users):
        kind = rng.choices(names, weights)[0]
        plans.append(Planned(group, user, kind, answers_for(kind, user, f"{tag}-{index}")))
    return plans


class Accounts:
    """Everything measured, and every mismatch found."""

    def __init__(self):
        self.mismatches = []
        self.transactions = collections.Counter()      # group -> count
        self.latencies = collections.defaultdict(list)  # (group, phase kind) -> [us]
        self.expected_charges = collections.Counter()  # group -> attempt numbers expected to be used
        self.disk_charges = collections.Counter()      # group -> attempt numbers used on disk
        self.exact_checks = collections.Counter()      # group -> (user, phase) pairs with F and P exact
        self.exact_F = collections.Counter()           # group -> sum of F expected in exact checks
        self.exact_F_disk = collections.Counter()
        self.exact_P = collections.Counter()
        self.exact_P_disk = collections.Counter()
        self.bounded_checks = collections.Counter()
        self.fed = collections.Counter()
        self.reported = collections.Counter()          # transactions' fingerprint verdicts: match / no-match
        self.reader = collections.Counter()            # held / busy / locked / bus claims / bus busy
        self.refusals = collections.Counter()          # lockout / back-off
        self.successes = collections.Counter()
        self.phases = collections.Counter()
        self.max_holders = 0
        self.problems = collections.Counter()

    def fail(self, text):
        self.mismatches.append(text)


def group_of(world, user):
    if user == world.one_user:
        return "one-user"
    return "users" if user in world.users else "control"


def check_phase(world, accounts, label, kind, outcomes, before, after, fed, bus):
    """Compares one phase's transactions with the records, the feeder and the bus."""
    lockout, backoff_after = world.config.lockout, world.config.backoff_after
    accounts.phases[f"{kind} ({world.config.name})"] += 1
    by_user = collections.defaultdict(list)
    for outcome in outcomes:
        by_user[outcome.plan.user].append(outcome)
        group = outcome.plan.group
        accounts.transactions[group] += 1
        if outcome.elapsed_us >= 0:
            accounts.latencies[(group, kind)].append(outcome.elapsed_us)
        for problem in outcome.problems:
            accounts.problems[problem] += 1
            accounts.fail(f"{label}: {outcome.plan.user} ({outcome.plan.kind}, answers {outcome.plan.answers}): {problem}")
        accounts.reader["held"] += outcome.instruction
        accounts.reader["told busy"] += outcome.busy
        accounts.reader["hints shown"] += outcome.hints
        accounts.reported["match"] += int(outcome.fingerprint_success)
        accounts.reported["no-match"] += outcome.not_recognized
        accounts.successes[group] += int(outcome.success)
        if outcome.locked and not outcome.instruction:
            accounts.refusals["fingerprint locked"] += 1
        if outcome.refused:
            accounts.refusals["password back-off"] += 1

    # The feeder: what it sent is what the transactions saw.
    accounts.fed.update(fed)
    matches = sum(o.fingerprint_success for o in outcomes)
    misses = sum(o.not_recognized for o in outcomes)
    hints = sum(o.hints for o in outcomes)
    if (fed["match"], fed["no-match"], fed["retry"]) != (matches, misses, hints):
        accounts.fail(f"{label}: the feeder sent {fed['match']} match, {fed['no-match']} no-match, {fed['retry']} hints; "
                      f"the transactions report {matches}, {misses}, {hints}")

    # The bus: claims, refusals and verdicts per user.
    if bus is None:
        accounts.fail(f"{label}: the bus monitor never saw the phase's end")
    else:
        accounts.reader["bus claims"] += sum(bus.claims.values())
        accounts.reader["bus AlreadyInUse"] += sum(bus.busy.values())
        accounts.max_holders = max(accounts.max_holders, bus.max_holders)
        if bus.overlaps:
            accounts.fail(f"{label}: {bus.overlaps} Claim(s) succeeded while another prompt held the reader")
        if bus.claim_errors:
            accounts.fail(f"{label}: Claim errors other than AlreadyInUse: {dict(bus.claim_errors)}")
        if bus.unattributed:
            accounts.fail(f"{label}: {bus.unattributed} VerifyStatus while no single prompt held the reader")
        for user in set(by_user) | set(bus.claims) | set(bus.busy) | set(bus.verdicts):
            mine = by_user.get(user, [])
            held, busy = sum(o.instruction for o in mine), sum(o.busy for o in mine)
            verdicts = bus.verdicts.get(user, collections.Counter())
            seen = (verdicts["verify-match"], verdicts["verify-no-match"])
            reported = (sum(o.fingerprint_success for o in mine), sum(o.not_recognized for o in mine))
            if (bus.claims[user], bus.busy[user]) != (held, busy):
                accounts.fail(f"{label}: {user}: the bus saw {bus.claims[user]} claims and {bus.busy[user]} AlreadyInUse; "
                              f"the transactions report {held} holding the reader and {busy} told it is busy")
            if seen != reported:
                accounts.fail(f"{label}: {user}: fprintd sent {seen[0]} match and {seen[1]} no-match to its prompts; "
                              f"they report {reported[0]} and {reported[1]}")

    # The records.
    for user, mine in by_user.items():
        group = group_of(world, user) if mine[0].plan.group != "reset" else "reset"
        old, new = before.get(user), after.get(user)
        if new is None:
            if any(o.charges for o in mine):
                accounts.fail(f"{label}: {user}: attempts were reported but no record exists")
            continue
        old = old or Snapshot(0, 0, 0, None, [])
        charges = sum(o.charges for o in mine)
        used = new.sequence - old.sequence if old.sequence is not None else None
        accounts.expected_charges[group] += charges
        accounts.disk_charges[group] += used if used is not None else charges
        if used is not None and used != charges:
            accounts.fail(f"{label}: {user}: the attempt number rose by {used}; the transactions report {charges} attempts")
        fingerprint = sum(o.not_recognized for o in mine)
        passwords = sum(o.password_charged for o in mine if not o.password_right)
        succeeded = [o for o in mine if o.success]
        if new.F > lockout:
            accounts.fail(f"{label}: {user}: F = {new.F} above the lockout {lockout}")
        if not succeeded:
            expected = (old.F + fingerprint, old.P + passwords)
            exact = True
        elif len(mine) == 1:
            expected = (0, 0)
            exact = True
        else:
            exact = False
        if exact:
            accounts.exact_checks[group] += 1
            accounts.exact_F[group] += expected[0]
            accounts.exact_P[group] += expected[1]
            accounts.exact_F_disk[group] += new.F
            accounts.exact_P_disk[group] += new.P
            if (new.F, new.P) != expected:
                accounts.fail(f"{label}: {user}: F, P on disk {new.F}, {new.P}; expected {expected[0]}, {expected[1]} "
                              f"(before {old.F}, {old.P}; {len(mine)} transactions)")
            if not succeeded:
                if any(o.locked for o in mine) and new.F != lockout:
                    accounts.fail(f"{label}: {user}: a prompt was told the finger is locked but F = {new.F}")
                if any(o.refused for o in mine) and new.P != backoff_after:
                    accounts.fail(f"{label}: {user}: a password was refused by the back-off but P = {new.P}")
                if old.P <= backoff_after and new.P > backoff_after:
                    accounts.fail(f"{label}: {user}: P = {new.P} above the back-off threshold {backoff_after}")
        else:
            accounts.bounded_checks[group] += 1
            if new.F > old.F + fingerprint or new.P > old.P + passwords:
                accounts.fail(f"{label}: {user}: F, P on disk {new.F}, {new.P} above what was charged "
                              f"({old.F}+{fingerprint}, {old.P}+{passwords})")
        check_recent_failures(accounts, label, user, new)


def check_recent_failures(accounts, label, user, snapshot):
    """The record's own consistency: the recent failures not settled by a
    success are the newest F+P attempt numbers, F of them fingerprint ones."""
    owed = snapshot.F + snapshot.P
    open_entries = [(seq, kind & 0x7F) for seq, kind in snapshot.entries if not kind & SETTLED]
    if owed <= MAX_FAILURES:
        numbers = sorted(seq for seq, _ in open_entries)
        expected = list(range(snapshot.sequence - owed, snapshot.sequence))
        kinds = collections.Counter(kind for _, kind in open_entries)
        if numbers != expected or (kinds[KIND_FINGERPRINT], kinds[KIND_PASSWORD]) != (snapshot.F, snapshot.P):
            accounts.fail(f"{label}: {user}: unsettled recent failures {open_entries} do not match F={snapshot.F}, "
                          f"P={snapshot.P}, next attempt {snapshot.sequence}")
    elif len(open_entries) != min(len(snapshot.entries), MAX_FAILURES):
        accounts.fail(f"{label}: {user}: F+P={owed} but only {len(open_entries)} recent failures are unsettled")


# ============================================================================
# The run
# ============================================================================

WINDOWS = 8


def window_peaks(samples):
    """(median attempts, peak VmRSS KB) of each of WINDOWS equal runs of
    (KB, attempts so far) samples. Peaks, because a sample taken between
    two transactions finds the module and libsystemd unloaded by pam_end
    (about 1.3 MB less), and a leak raises the peaks as well."""
    if len(samples) < 4 * WINDOWS:
        return []
    size = len(samples) // WINDOWS
    windows = [samples[i * size:(i + 1) * size] for i in range(WINDOWS)]
    return [(statistics.median(d for _, d in w), max(r for r, _ in w)) for w in windows]


def growth_per_attempt(samples):
    """Bytes of VmRSS per attempt: the least-squares slope of the windows'
    peaks over their attempts, the first two windows (warm-up) left out.
    None with too few samples."""
    peaks = window_peaks(samples)[2:]
    if len(peaks) < 3:
        return None
    xs, ys = [d for d, _ in peaks], [r * 1024 for _, r in peaks]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def rss_kb(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None
