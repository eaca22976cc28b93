"""The load test's run: rounds of phases over the world, the soaks beside
them, and the report's figures (run_load)."""
import contextlib
import os
import random
import re
import shutil
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

from gi.repository import GLib

from fprint_rig import FprintRig
from pamenv import MODULE, later_boot_clock, password_entered
from .bus import BusWatch
from .locks import LockSampler
from .report import leftover_processes, memory_problems
from .rounds import (Accounts, FAIL_KINDS, Launcher, MIXED_KINDS, Planned, check_phase, growth_per_attempt,
                     plan_group, rss_kb, window_peaks)
from .world import (CONFIGS, LoadWorld, MARK_IFACE, MARK_PATH, MAX_BACKOFF_SECONDS, PRINT_ID, SOAK_ARGS, SOAK_SERVICE,
                    ScanFeeder, password_of)


class LoadTest:
    def __init__(self, rig, base, seconds, group_size=32, seed=None, bound=120, log=print, module=MODULE):
        self.rig = rig
        self.seconds = seconds
        self.group_size = group_size
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self.rng = random.Random(self.seed)
        self.bound = bound
        self.log = log
        self.world = LoadWorld(base, group_size, module)
        self.accounts = Accounts()
        self.exits = contextlib.ExitStack()
        self.marks = 0
        self.memory = {}
        self.soak = {}

    # -- setup -------------------------------------------------------------
    def prepare(self):
        for user in self.world.all_users():
            self.rig.enroll(user, print_id=PRINT_ID)
        for user in self.world.all_users():
            password_entered(self.world.state, self.world.uids[user], user, self.rig.bus_address)
        # The soak process's own rig (a second bus, fprintd and virtual
        # reader), so that its fingerprint prompts leave the main rig's
        # accounting alone; root is enrolled there and starts from "password
        # entered" with that rig's enrollment (its attempt number is then
        # known before its first transaction).
        self.soak_rig = self.exits.enter_context(FprintRig())
        self.soak_rig.enroll("root", print_id=PRINT_ID)
        password_entered(self.world.state, 0, "root", self.soak_rig.bus_address)
        self.world.write_owner_stack(SOAK_SERVICE, args=SOAK_ARGS)
        self.soak_feeder = ScanFeeder(self.soak_rig, self.rng.randrange(1 << 30))
        self.soak_feeder.configure(0.5, 0.05)
        self.soak_feeder.start()
        self.soak_rig_pids = {"soak fprintd": self.soak_rig.fprintd_pid, "soak dbus-daemon": self.soak_rig.bus_proc.pid,
                              "soak polkit": self.soak_rig.polkit_proc.pid}
        self.feeder = ScanFeeder(self.rig, self.rng.randrange(1 << 30))
        self.bus = BusWatch(self.rig)
        self.feeder.start()
        self.bus.start()
        # The monitor is listening once it sees a mark.
        deadline = time.monotonic() + 10
        while not self.bus.ready.is_set():
            self.mark_signal("ready")
            if time.monotonic() > deadline:
                raise RuntimeError("dbus-monitor never saw the first mark")
            self.bus.ready.wait(0.2)
        self.bus.take_phase("ready", timeout=1)
        self.feeder.take_phase("ready", timeout=1)
        self.locks = LockSampler(self.world)
        self.locks.start()
        self.launcher = Launcher(self.world, self.rig, self.bound)

    def mark_signal(self, name):
        self.rig.ctl.conn.emit_signal(None, MARK_PATH, MARK_IFACE, "Phase", GLib.Variant("(s)", (name,)))
        self.rig.ctl.conn.flush_sync(None)

    def snapshots(self, users):
        return {user: self.world.record_state(user) for user in users}

    # -- one phase -----------------------------------------------------------
    def phase(self, kind, plans, match_probability=0.0, retry_probability=0.0):
        self.marks += 1
        label = f"#{self.marks} {kind}"
        users = sorted({p.user for p in plans})
        self.feeder.configure(match_probability, retry_probability)
        before = self.snapshots(users)
        self.rng.shuffle(plans)
        outcomes, wall, killed = self.launcher.run(plans)
        mark = f"end-{self.marks}"
        self.mark_signal(mark)
        fed = self.feeder.take_phase(mark)
        bus = self.bus.take_phase(mark)
        after = self.snapshots(users)
        if killed:
            self.accounts.fail(f"{label}: not over within {self.bound} s: killed")
        check_phase(self.world, self.accounts, label, kind, outcomes, before, after, fed, bus)
        self.locks.refresh()
        return outcomes, wall

    def reset(self, users):
        """Each user with a count or a wait left types the right password;
        one in the back-off does so with the boot clock moved past it."""
        plans = []
        for user in users:
            state = self.world.record_state(user)
            if state is None or (state.F, state.P, state.backoff_ms) == (0, 0, 0):
                continue
            wrapper = later_boot_clock(MAX_BACKOFF_SECONDS + 60) if state.backoff_ms else []
            plans.append(Planned("reset", user, "typed-right", [password_of(user)], wrapper))
        if not plans:
            return
        self.phase("reset", plans)
        for user in users:
            state = self.world.record_state(user)
            if state is not None and (state.F, state.P, state.backoff_ms) != (0, 0, 0):
                self.accounts.fail(f"reset: {user} still has F={state.F} P={state.P} backoff_ms={state.backoff_ms}")

    def round(self, number):
        world, rng, size = self.world, self.rng, self.group_size
        world.use(CONFIGS[(number - 1) % len(CONFIGS)])
        tag = f"r{number}"
        one_user = [world.one_user] * size
        timings = {}
        plans = plan_group(rng, "one-user", one_user, FAIL_KINDS, f"{tag}a") + plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}b")
        timings["fail"] = self.phase("fail", plans)[1]
        self.reset([world.one_user] + world.users)
        plans = plan_group(rng, "one-user", one_user, MIXED_KINDS, f"{tag}c") + plan_group(rng, "users", world.users, MIXED_KINDS, f"{tag}d")
        timings["mixed"] = self.phase("mixed", plans, match_probability=0.35, retry_probability=0.1)[1]
        self.reset([world.one_user] + world.users)
        plans = plan_group(rng, "control", world.controls, FAIL_KINDS, f"{tag}e") + plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}f")
        timings["control"] = self.phase("control", plans)[1]
        self.reset(world.controls + world.users)
        plans = plan_group(rng, "users", world.users, FAIL_KINDS, f"{tag}g")
        timings["solo"] = self.phase("solo", plans)[1]
        self.reset(world.users)
        return timings

    # -- the soak processes ----------------------------------------------------
    class Soak:
        """One multi-cycle harness process: its own figures and its samples."""

        def __init__(self, test, cycles, threads):
            self.test = test
            self.cycles, self.threads = cycles, threads
            warm = max(cycles // 10, 1)
            self.warm = warm
            self.transactions = warm + (cycles - warm) * threads   # pamharness -n/-T: a tenth on the main thread
            self.proc = test.launcher.start_soak(cycles, threads, test.soak_rig)
            self.started = time.monotonic()
            self.ended = None
            self.output = None
            self.samples = []    # (VmRSS KB, root's attempts so far: the soaks' progress)
            # Its output is read, and its end timed, as it happens.
            self.waiter = threading.Thread(target=self._wait, name="load-soak", daemon=True)
            self.waiter.start()

        def _wait(self):
            self.output = self.proc.communicate()
            self.ended = time.monotonic()

        def running(self):
            return self.ended is None

        def sample(self, done):
            """VmRSS now, while all its threads run (not as they end: their
            stacks go); `done` is root's attempts since the soaks started."""
            if not self.running():
                return
            try:   # the harness: bash exec'd it
                status = Path(f"/proc/{self.proc.pid}/status").read_text()
                rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
                threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
            except (OSError, AttributeError):
                return
            if threads == self.threads + 1:   # its main thread waits for the workers
                self.samples.append((rss, done))

        def finish(self, timeout, accounts, name):
            self.waiter.join(max(1, timeout))
            if self.waiter.is_alive():
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.waiter.join(30)
                accounts.fail(f"{name}: did not end within its bound ({timeout:.0f} s): killed")
            out, err = self.output or ("", "")
            result = {"cycles": self.cycles, "threads": self.threads, "transactions": self.transactions,
                      "seconds": (self.ended or time.monotonic()) - self.started, "pid": self.proc.pid}
            values = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
            if self.proc.returncode != 0 or "rss_kb_end" not in values:
                accounts.fail(f"{name}: failed ({self.proc.returncode}): {out}{err}")
                return result
            result.update({"rss_kb_warm": int(values["rss_kb_warm"]), "rss_kb_end": int(values["rss_kb_end"]),
                           "failures": int(values["failures"])})
            if result["failures"]:
                accounts.fail(f"{name}: {result['failures']} of {self.transactions} transactions did not succeed: "
                              + ", ".join(f"{k}={v}" for k, v in values.items() if k.startswith("code_")))
            peaks = window_peaks(self.samples)
            if peaks:
                result["sampled_rss_kb"] = {"first": peaks[2][1], "last": peaks[-1][1],
                                            "max": max(r for r, _ in self.samples), "samples": len(self.samples),
                                            "window_peaks": [r for _, r in peaks],
                                            "window_attempts": [d for d, _ in peaks],
                                            "bytes_per_attempt": growth_per_attempt(self.samples)}
            return result

    class SoakGroup:
        """Soak processes started together on the soak rig, and root's exact
        accounting over all of them: every cycle ends in a success, by a
        match (its attempt charged) or by the password (charged) after
        no-matches (each charged) or a busy reader. So root's attempt number
        rises by one per cycle plus one per no-match the soak feeder sent."""

        def __init__(self, test, cycles, threads_list):
            self.test = test
            before = test.world.record_state("root")
            self.sequence_before = before.sequence
            test.soak_feeder.take()
            self.soaks = [LoadTest.Soak(test, cycles, threads) for threads in threads_list]
            self.stop = threading.Event()
            self.sampler = threading.Thread(target=self._sample, name="load-soak-sampler", daemon=True)
            self.sampler.start()

        SAMPLE_INTERVAL = 0.1

        def _sample(self):
            while not self.stop.wait(self.SAMPLE_INTERVAL) and self.running():
                self.sample()

        def running(self):
            return any(soak.running() for soak in self.soaks)

        def sample(self):
            """Every SAMPLE_INTERVAL, once each process's threads run: their
            main threads' tenths are done well before root has seen four
            times their cycles' attempts (at most two attempts a cycle
            each). The record is read as it is being written: a slot
            being written is not whole, and the other one is read."""
            try:
                state = self.test.world.record_state("root")
            except AssertionError:
                return
            done = state.sequence - self.sequence_before if state else 0
            if done > 4 * sum(soak.warm for soak in self.soaks):
                for soak in self.soaks:
                    soak.sample(done)

        def kill(self):
            self.stop.set()
            for soak in self.soaks:
                if soak.running():
                    os.killpg(soak.proc.pid, signal.SIGKILL)
                    soak.waiter.join(30)

        def finish(self, timeout, accounts, name):
            results = [soak.finish(timeout, accounts, f"{name} ({soak.threads} thread{'s' if soak.threads > 1 else ''})")
                       for soak in self.soaks]
            self.stop.set()
            self.sampler.join(5)
            after = self.test.world.record_state("root")
            used = after.sequence - self.sequence_before
            fed = self.test.soak_feeder.take()
            transactions = sum(soak.transactions for soak in self.soaks)
            expected = transactions + fed["no-match"]
            if used != expected:
                accounts.fail(f"{name}: {transactions} transactions and {fed['no-match']} no-matches fed; "
                              f"root's attempt number rose by {used}")
            if (after.F, after.P) != (0, 0):
                accounts.fail(f"{name}: root's record at the end: F={after.F} P={after.P}")
            return {"processes": results, "transactions": transactions, "fed": dict(fed), "attempts_on_disk": used,
                    "attempts_expected": expected, "failures": sum(r.get("failures", 0) for r in results),
                    "seconds": max(r["seconds"] for r in results)}

    CALIBRATION_CYCLES = 40
    # The soak processes: 4 threads (transactions side by side in one
    # process), and 1 (one malloc arena: its growth per attempt is the
    # clean measure of a leak).
    SOAK_THREADS = (4, 1)

    def start_calibration(self):
        """A short soak run alongside round 1: how long one cycle takes
        under the rounds' load."""
        self.calibration = self.SoakGroup(self, self.CALIBRATION_CYCLES, self.SOAK_THREADS)

    def start_soak(self, deadline):
        result = self.calibration.finish(self.bound, self.accounts, "the calibration soak")
        per_cycle = result["seconds"] / self.CALIBRATION_CYCLES
        # Sized to the time left at round 1's pace (the heaviest: the later
        # rounds run it somewhat faster, so it tends to end a little early;
        # the rounds go on until it ends if it is late).
        cycles = max(100, int((deadline - time.monotonic()) / per_cycle))
        self.soak_run = self.SoakGroup(self, cycles, self.SOAK_THREADS)
        self.soak = {"calibration": result, "calibration_s_per_cycle": per_cycle}

    def finish_soak(self):
        self.soak.update(self.soak_run.finish(self.bound, self.accounts, "the soak"))

    # -- the whole run ---------------------------------------------------------
    def sample_memory(self):
        for name, pid in (("fprintd", self.rig.fprintd_pid), ("dbus-daemon", self.rig.bus_proc.pid),
                          ("fprintd (soak rig)", self.soak_rig_pids["soak fprintd"])):
            value = rss_kb(pid)
            if value is not None:
                self.memory.setdefault(name, []).append(value)

    def run(self):
        started = time.monotonic()
        self.prepare()
        self.setup_seconds = time.monotonic() - started
        rounds = []
        deadline = started + self.seconds
        try:
            self.start_calibration()
            while True:
                rounds.append(self.round(len(rounds) + 1))
                if len(rounds) == 1:
                    self.start_soak(deadline)
                self.sample_memory()
                now = time.monotonic()
                self.log(f"round {len(rounds)} ({self.world.config.name}): "
                         + ", ".join(f"{k} {v:.1f} s" for k, v in rounds[-1].items())
                         + f"; {len(self.accounts.mismatches)} mismatches so far")
                if now >= deadline and (not self.soak_run.running() or now >= deadline + self.seconds):
                    break
            self.finish_soak()
        finally:
            self.close()
        self.rounds = rounds
        self.runtime = time.monotonic() - started
        return self.report()


    def close(self):
        for name in ("locks",):
            thread = getattr(self, name, None)
            if thread is not None:
                thread.stop.set()
                thread.join(5)
        for feeder in (getattr(self, "feeder", None), getattr(self, "soak_feeder", None)):
            if feeder is not None:
                feeder.stop.set()
                feeder.join(10)
        bus = getattr(self, "bus", None)
        if bus is not None:
            bus.close()
        for group in (getattr(self, "calibration", None), getattr(self, "soak_run", None)):
            if group is not None:
                group.kill()
        self.exits.close()

    # -- the report ------------------------------------------------------------
    def report(self):
        a = self.accounts
        for error in self.feeder.errors + self.soak_feeder.errors:
            a.fail(f"feeder: {error}")
        for error in self.launcher.shell_errors:
            a.fail(f"the launching shell said: {error}")
        if a.max_holders > 1:
            a.fail(f"{a.max_holders} prompts held the reader at once")
        if a.reader["held"] != a.reader["bus claims"] or a.reader["told busy"] != a.reader["bus AlreadyInUse"]:
            a.fail(f"reader: {dict(a.reader)}")
        foreign = self.locks.foreign_waits()
        for (waiter, owner), samples in sorted(foreign.items()):
            a.fail(f"a transaction of {waiter} waited for the lock of {owner} ({samples} samples)")
        latency = {}
        for (group, kind), values in sorted(a.latencies.items()):
            values = sorted(values)
            latency[f"{group}/{kind}"] = {"n": len(values), "median_ms": statistics.median(values) / 1000,
                                          "p90_ms": values[int(0.9 * (len(values) - 1))] / 1000, "max_ms": values[-1] / 1000}
        max_latency_ms = max((v["max_ms"] for v in latency.values()), default=0)
        if max_latency_ms > self.bound * 1000:
            a.fail(f"a transaction took {max_latency_ms:.0f} ms, above the bound")
        memory = {name: {"first": values[0], "end": values[-1], "max": max(values), "samples": len(values),
                         "series": values} for name, values in self.memory.items()}
        return {
            "seed": self.seed, "seconds": self.seconds, "runtime_s": self.runtime, "setup_s": self.setup_seconds,
            "module_sha256": self.world.module_sha256, "module": str(self.world.module_source),
            "rounds": len(self.rounds), "configs": [c.name for c in CONFIGS],
            "group_size": self.group_size, "transactions": dict(a.transactions), "phases": dict(a.phases),
            "expected_charges": dict(a.expected_charges), "disk_charges": dict(a.disk_charges),
            "exact_checks": dict(a.exact_checks), "bounded_checks": dict(a.bounded_checks),
            "exact_F": dict(a.exact_F), "exact_F_disk": dict(a.exact_F_disk),
            "exact_P": dict(a.exact_P), "exact_P_disk": dict(a.exact_P_disk),
            "successes": dict(a.successes), "refusals": dict(a.refusals),
            "fed": dict(a.fed), "reported_verdicts": dict(a.reported), "reader": dict(a.reader),
            "max_holders": a.max_holders, "latency": latency, "max_latency_ms": max_latency_ms,
            "lock_samples": self.locks.samples, "lock_waits": {f"{w} -> {o}": n for (w, o), n in sorted(self.locks.waits.items())},
            "foreign_lock_waits": len(foreign), "lock_waits_unconfirmed": self.locks.unconfirmed,
            "lock_holder_activity": {f"{u}: {what}": n for (u, what), n in sorted(self.locks.holder_activities().items())},
            "longest_lock_wait_ms": {g: 1000 * self.locks.longest_wait(users) for g, users in
                                     (("one-user", {self.world.one_user}), ("users", set(self.world.users)),
                                      ("control", set(self.world.controls)))},
            "memory_kb": memory, "soak": dict(self.soak), "bus_lines": self.bus.lines,
            "processes": {"fprintd": self.rig.fprintd_pid, "dbus-daemon": self.rig.bus_proc.pid,
                          "polkit": self.rig.polkit_proc.pid, "dbus-monitor": self.bus.proc.pid,
                          **{f"soak {i}": r.get("pid") for i, r in enumerate(self.soak.get("processes", []))},
                          **{f"calibration soak {i}": r.get("pid") for i, r in enumerate(self.soak.get("calibration", {}).get("processes", []))},
                          **self.soak_rig_pids},
            "mismatches": list(a.mismatches),
        }


def run_load(seconds, group_size=32, seed=None, bound=120, rig=None, log=print, module=MODULE):
    """Runs the load test; -> its report (a dict), with the memory bounds and
    the processes left behind checked. Starts (and stops) its own rig unless
    one is given (the caller then stops it and checks its processes)."""
    base = Path(tempfile.mkdtemp(prefix="localauth-load-"))
    try:
        if rig is None:
            with FprintRig() as own:
                report = LoadTest(own, base, seconds, group_size, seed, bound, log=log, module=module).run()
            pids = set(report["processes"].values())
        else:
            report = LoadTest(rig, base, seconds, group_size, seed, bound, log=log, module=module).run()
            pids = {pid for name, pid in report["processes"].items() if name not in ("fprintd", "dbus-daemon", "polkit")}
        report["memory_problems"] = memory_problems(report)
        report["leftover_processes"] = leftover_processes(base, pids)
        report["mismatches"].extend(report["memory_problems"])
        report["mismatches"].extend(f"left running: {p}" for p in report["leftover_processes"])
        return report
    finally:
        shutil.rmtree(base, ignore_errors=True)
