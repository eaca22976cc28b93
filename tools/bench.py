#!/usr/bin/env python3
"""Benchmark (not a test: nothing here asserts on time). `make bench`.

Prints tables of ratios, ours / theirs, each row naming its reference,
from medians of interleaved runs (the sides alternate round by round, so
drift hits both alike), with p90, min and max; then the footprint (the
module's file by part of the code), the scale and the breakdown of one
match and one password by what their system calls touch. With --write FILE
the same report goes into FILE between its "bench:begin" and "bench:end"
markers (docs/PERFORMANCE.md), the analysis around them kept.

Latency is the time from just before pam_authenticate() to its return in
the libpam client (tests/support/programs/pamharness.c -L, CLOCK_MONOTONIC;
pam_start's module loading is outside); "whole process" is spawn to exit of
that client as seen from here. Every side runs in the same private PAM
world, against the same real fprintd + virtual device
(tests/support/fprint_rig.py), whose matching scan is fed on cue
(VerifyFingerSelected), so the rig's reaction is in every figure alike. A
match is also run by tools/matchfloor.c, fprintd's minimal sequence and
nothing else, interleaved with the modules: the floor a module's match is
measured against. The sides live in bench_sides.py, the statistics in
bench_report.py, the footprint in bench_footprint.py, the store's scale and
the breakdown in bench_store.py.

Usage: make bench   (or tools/bench.py [-n N] [--warmup W] [--write FILE]) as root.
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_sides import (ALICE, LOADTIME, MATCH_FLOOR, NOSYNC_MODULE, PAM_FAILLOCK, RELEASE_PROBE, ROOT, BenchError,
                         ask_once, floor_once, fingerprint_once, password_once, real_programs, script_sides, sudo_script_once,
                         typed_while_waiting_once, write_services)
from bench_apps import app_world, helper_password_sides, secret_sides
from bench_footprint import asking_instructions, callgrind_instructions, load_once, module_sizes
from bench_report import interleaved, out, p90, ratio_row, table_header, write_between_markers
from bench_store import breakdown, charge_processes, populate_records
from fprint_rig import FprintRig
from pamenv import HARNESS, MODULE, PAM_FPRINTD, PamEnv, prompt_timings, reseal_record

LINKMAP = MODULE.parent / "pam_localauth.linkmap"
MODULE_LIMIT = 200 * 1024     # bytes: the module's goal


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    memory = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} × {cpu}, {memory} GiB"


def batch_ratios(ours, ref, size=30):
    """The ratio of medians in consecutive batches (the spread behind one median)."""
    return [statistics.median(ours[i:i + size]) / statistics.median(ref[i:i + size])
            for i in range(0, len(ours) - size + 1, size)]


def spread(ratios):
    return ", ".join(f"{r:.2f}×" for r in ratios)


def measure(opts, base, state_fs):
    """Every measurement; -> what the report needs."""
    pam = PamEnv(base)
    faillock_dir = base / "faillock"
    faillock_dir.mkdir(mode=0o700)
    write_services(pam, faillock_dir)
    n, warmup = opts.n, opts.warmup
    m = {"n": n, "warmup": warmup}
    out(f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; state directory on {state_fs[0]} "
        f"({state_fs[1]}); N={n} per side after {warmup} warm-up rounds ({opts.match_n} for a match). "
        f"Command: `make bench` (tools/bench.py -n {n} --match-n {opts.match_n}).")
    out()
    with FprintRig() as rig:
        rig.enroll("alice")
        pam.password_entered("alice", rig)  # the finger is enough from here (a password this boot)
        device = rig.device_path()
        whole, ready = {}, {}
        m["match"] = interleaved(opts.match_n, warmup, [
            ("ours", lambda: fingerprint_once(pam, rig, "bench-ours", whole, ready)),
            ("ref", lambda: fingerprint_once(pam, rig, "bench-fprintd", whole, ready)),
            ("floor", lambda: floor_once(rig, device, whole, ready)),
            ("floor+enrolled", lambda: floor_once(rig, device, whole, ready, enrolled=True)),
            ("floor+rules", lambda: floor_once(rig, device, whole, ready, rules=pam.state / "floor.rec")),
        ])
        m["whole"] = {side: values[-opts.match_n:] for side, values in whole.items()}
        m["ready"] = {side: values[-opts.match_n:] for side, values in ready.items()}
        m["names"] = prompt_timings(pam, ["bob", "nosuchuser"], runs=n, warmup=warmup, env=rig.env(),
                                    service="bench-ours")
        pam.password_entered("alice", rig)
        m["match breakdown"] = breakdown(pam, "bench-ours", [], rig.env(), rig)
        m["fprintd breakdown"] = breakdown(pam, "bench-fprintd", [], rig.env(), rig)
        m["instructions"] = {}
        if not opts.quick:
            m["instructions"]["match ours"] = callgrind_instructions(pam, "bench-ours", [], rig.env(), rig)
            m["instructions"]["match fprintd"] = callgrind_instructions(pam, "bench-fprintd", [], rig.env(), rig)
        # A script's sudo, and a person's: fprintd runs and the user has a finger.
        (base / "sudo-world").mkdir(mode=0o755)
        sudo_world = real_programs.World(base / "sudo-world", rig)
        rig.enroll(real_programs.USER)
        sudo_world.password_entered()
        ours_stack, plain_stack = script_sides(sudo_world)
        m["scripts"] = {how: interleaved(max(5, n // 3), 1, [
            ("ours", lambda how=how: sudo_script_once(sudo_world, ours_stack, how)),
            ("ref", lambda how=how: sudo_script_once(sudo_world, plain_stack, how)),
        ]) for how in ("-S", "-A")}
        m["typed"] = interleaved(max(5, n // 3), 1, [
            ("ours", lambda: typed_while_waiting_once(sudo_world, rig, ours_stack, True)),
            ("ref", lambda: typed_while_waiting_once(sudo_world, rig, plain_stack, False)),
        ])
        (base / "app-world").mkdir(mode=0o755)
        world = None
        try:
            world = app_world(base / "app-world", rig)
            m["secret"] = interleaved(max(5, n // 3), 1, secret_sides(world, rig))
            rig.stop_fprintd()
            m["through helper"] = interleaved(n, warmup, helper_password_sides(world))
        finally:
            if world is not None:
                world.close()
        env = rig.env()  # a system bus without fprintd, as on a machine without a reader
        faillock_tally = faillock_dir / "alice"

        def reset_ours():
            path = pam.record_path()
            path.write_bytes(reseal_record(path.read_bytes(), P=0, backoff_ms=0))

        def reset_faillock():
            if faillock_tally.exists():
                faillock_tally.write_bytes(b"")

        m["right"] = interleaved(n, warmup, [
            ("ours", lambda: password_once(pam, "bench-ours", env)),
            ("nosync", lambda: password_once(pam, "bench-nosync", env)),
            ("ref", lambda: password_once(pam, "bench-faillock", env)),
            ("ask", lambda: ask_once(env)),
        ])
        m["wrong"] = interleaved(n, warmup, [
            ("ours", lambda: password_once(pam, "bench-ours", env, "wrong", False, reset_ours)),
            ("nosync", lambda: password_once(pam, "bench-nosync", env, "wrong", False, reset_ours)),
            ("ref", lambda: password_once(pam, "bench-faillock", env, "wrong", False, reset_faillock)),
        ])
        m["password breakdown"] = breakdown(pam, "bench-ours", [ALICE], env)
        m["faillock breakdown"] = breakdown(pam, "bench-faillock", [ALICE], env)
        if not opts.quick:
            m["instructions"]["password ours"] = callgrind_instructions(pam, "bench-ours", [ALICE], env)
            m["instructions"]["password faillock"] = callgrind_instructions(pam, "bench-faillock", [ALICE], env)
            m["instructions"]["asking fprintd"] = asking_instructions(base, env)
        m["per records"] = {}
        for count in ([1, 1000] if opts.quick else [1, 1000, 100_000]):
            populate_records(pam, count - 1)
            m["per records"][count] = [password_once(pam, "bench-ours", env) for _ in range(warmup + n)][warmup:]
    m["loads"] = interleaved(n, 1, [
        ("ours", lambda: load_once(MODULE, False)),
        ("fprintd", lambda: load_once(PAM_FPRINTD, False)),
        ("faillock", lambda: load_once(PAM_FAILLOCK, False)),
    ])
    m["cold"] = interleaved(max(5, n // 3), 0, [
        ("ours", lambda: load_once(MODULE, True)),
        ("fprintd", lambda: load_once(PAM_FPRINTD, True)),
        ("faillock", lambda: load_once(PAM_FAILLOCK, True)),
    ])
    m["scale"] = []
    for users in ("one", "many"):
        for processes in (1, 8, 32, 128):
            each = max(5, 640 // processes)
            seconds, exact, total = charge_processes(base / "scale", processes, each, users)
            m["scale"].append((users, processes, each, seconds, exact, total))
    shutil.rmtree(base / "scale", ignore_errors=True)
    return m


def report_latency(m, ratios):
    out("### Latency: ours / theirs")
    out()
    table_header()
    match = m["match"]
    ratios["match"] = ratio_row("fingerprint match, `pam_authenticate`", match["ours"], match["ref"],
                                "pam_fprintd.so (libpam-fprintd)")
    ratio_row("fingerprint match, whole client process", m["whole"]["bench-ours"], m["whole"]["bench-fprintd"],
              "pam_fprintd.so, same client")
    ratios["floor"] = ratio_row("fingerprint match, ours against the floor", match["ours"], match["floor"],
                                "tools/matchfloor.c: Claim, VerifyStart, VerifyStatus, VerifyStop + Release")
    ratios["floor+enrolled"] = ratio_row(
        "fingerprint match, ours against the floor that checks the enrollment", match["ours"], match["floor+enrolled"],
        "tools/matchfloor.c --enrolled: GetDevices and ListEnrolledFingers first")
    ratios["floor+rules"] = ratio_row(
        "fingerprint match, ours against the floor under the rules", match["ours"], match["floor+rules"],
        "tools/matchfloor.c --rules: the enrollment checked, logind asked before the claim and at the match, "
        "the attempt charged on disk (one fdatasync) before VerifyStart")
    ratio_row("fingerprint match, pam_fprintd against the floor", match["ref"], match["floor"],
              "tools/matchfloor.c")
    ratios["ready"] = ratio_row("until the reader is ready (call to fprintd's VerifyFingerSelected)",
                                m["ready"]["bench-ours"], m["ready"]["bench-fprintd"], "pam_fprintd.so")
    ratio_row("until the reader is ready, ours against the floor", m["ready"]["bench-ours"], m["ready"]["floor"],
              "tools/matchfloor.c")
    ratio_row("until the reader is ready, ours against the floor that checks the enrollment", m["ready"]["bench-ours"],
              m["ready"]["floor+enrolled"], "tools/matchfloor.c --enrolled")
    ratio_row("until the reader is ready, ours against the floor under the rules", m["ready"]["bench-ours"],
              m["ready"]["floor+rules"], "tools/matchfloor.c --rules")
    right, wrong = m["right"], m["wrong"]
    ratios["password"] = ratio_row("correct password (durable)", right["ours"], right["ref"],
                                   "pam_faillock ×3 + pam_matrix (no fsync)")
    ratios["password-nosync"] = ratio_row("correct password, benchmark build without sync", right["nosync"],
                                          right["ref"], "pam_faillock ×3 + pam_matrix")
    asked = [ref + ask for ref, ask in zip(right["ref"], right["ask"])]
    ratios["password-floor"] = ratio_row(
        "correct password, build without sync, against pam_faillock plus asking fprintd", right["nosync"], asked,
        "pam_faillock ×3 + pam_matrix, plus tools/matchfloor.c --ask (a new bus connection, GetDevices)")
    ratio_row("wrong password (durable)", wrong["ours"], wrong["ref"], "pam_faillock ×3 + pam_matrix (no fsync)")
    ratio_row("wrong password, benchmark build without sync", wrong["nosync"], wrong["ref"],
              "pam_faillock ×3 + pam_matrix")
    helper = m["through helper"]
    ratios["through helper"] = ratio_row(
        "correct password at a screen locker's stack, the module in a user's process (through the setuid helper)",
        helper["ours"], helper["ref"], "the same stack and password in root's process (the module decides in it)")
    ratio_row("a person's sudo: password typed while the reader waits, Enter to exit", m["typed"]["ours"],
              m["typed"]["ref"], "the real sudo without localauth: Enter at its prompt to exit")
    ratio_row("an app's secret released by a touch (`localauth secret load`, the setuid helper), whole run",
              m["secret"]["ours"], m["secret"]["ref"], "the same touch without a secret (`localauth evaluate`)")
    for how, label in (("-S", "a script's `sudo -S` (password piped, in a terminal), whole run"),
                       ("-A", "a script's `sudo -A` (an askpass program), whole run")):
        ratio_row(label, m["scripts"][how]["ours"], m["scripts"][how]["ref"], "the real sudo without localauth (pam_unix)")
    out()
    ratios["match batches"] = batch_ratios(match["ours"], match["ref"])
    ratios["floor batches"] = batch_ratios(match["ours"], match["floor"])
    ratios["enrolled batches"] = batch_ratios(match["ours"], match["floor+enrolled"])
    ratios["rules batches"] = batch_ratios(match["ours"], match["floor+rules"])
    ratios["password batches"] = batch_ratios(right["nosync"], right["ref"], 10)
    out(f"Batch spread (ratios of medians in consecutive batches): match against pam_fprintd, batches of 30: "
        f"{spread(ratios['match batches'])}; against the floor: {spread(ratios['floor batches'])}; against the floor that "
        f"checks the enrollment: {spread(ratios['enrolled batches'])}; against the floor under the rules: "
        f"{spread(ratios['rules batches'])}; correct password "
        f"without sync against pam_faillock, batches of 10: {spread(ratios['password batches'])}.")
    out()
    durability = statistics.median(right["ours"]) - statistics.median(right["nosync"])
    out(f"The price of durability (correct password, ours minus the build without sync): "
        f"{durability / 1000:.3f} ms; wrong password: "
        f"{(statistics.median(wrong['ours']) - statistics.median(wrong['nosync'])) / 1000:.3f} ms. "
        f"pam_faillock writes its tally without fsync, so a crash can lose its failures.")
    out()
    handed = statistics.median(helper["ours"]) - statistics.median(helper["ref"])
    out(f"The price of the setuid helper (a locker's correct password as the user, minus as root): "
        f"{handed / 1000:.3f} ms a prompt.")
    out()
    out("Unknown user names must not be told apart by time: a known user without a finger vs a name no "
        "account has, one wrong password each, fprintd running:")
    out()
    out("| | known, median ms | unknown, median ms | ratio |")
    out("|---|---|---|---|")
    for which, label in ((0, "time to the first prompt"), (1, "whole call")):
        known = statistics.median(pair[which] for pair in m["names"]["bob"]) / 1000
        unknown = statistics.median(pair[which] for pair in m["names"]["nosuchuser"]) / 1000
        out(f"| {label} | {known:.2f} | {unknown:.2f} | {unknown / known:.2f}× |")


def report_footprint(m, ratios):
    out()
    out("### Footprint: ours / theirs")
    out()
    sizes = {"ours": MODULE.stat().st_size, "fprintd": PAM_FPRINTD.stat().st_size,
             "faillock": PAM_FAILLOCK.stat().st_size}
    ratios["size"] = sizes["ours"]
    out("| what | ours | pam_fprintd.so | pam_faillock.so | ours / pam_fprintd | ours / pam_faillock |")
    out("|---|---|---|---|---|---|")
    out(f"| module file (bytes) | {sizes['ours']} | {sizes['fprintd']} | {sizes['faillock']} | "
        f"{sizes['ours'] / sizes['fprintd']:.2f}× | {sizes['ours'] / sizes['faillock']:.2f}× |")
    for key, label in (("loads", "first load, warm cache (µs, median)"), ("cold", "first load, cold file (µs, median)")):
        med = {k: statistics.median(v[0] for v in m[key][k]) for k in m[key]}
        ratios[key] = med["ours"] / med["fprintd"]
        out(f"| {label} | {med['ours']:.0f} | {med['fprintd']:.0f} | {med['faillock']:.0f} | "
            f"{med['ours'] / med['fprintd']:.2f}× | {med['ours'] / med['faillock']:.2f}× |")
    rss = {k: statistics.median(v[1] for v in m["loads"][k]) for k in m["loads"]}
    out(f"| RSS added by loading (KiB, median) | {rss['ours']:.0f} | {rss['fprintd']:.0f} | {rss['faillock']:.0f} | "
        f"{rss['ours'] / max(rss['fprintd'], 1):.2f}× | {rss['ours'] / max(rss['faillock'], 1):.2f}× |")
    instructions = m["instructions"]
    if instructions:
        out(f"| instructions, whole client process, one match (callgrind Ir) | {instructions['match ours']:,} | "
            f"{instructions['match fprintd']:,} | – | {instructions['match ours'] / instructions['match fprintd']:.2f}× | – |")
        ratios["instructions"] = instructions["password ours"] / instructions["password faillock"]
        out(f"| instructions, whole client process, one correct password | {instructions['password ours']:,} | – | "
            f"{instructions['password faillock']:,} | – | {ratios['instructions']:.2f}× |")
        floor = instructions["password faillock"] + instructions["asking fprintd"]
        ratios["instructions floor"] = instructions["password ours"] / floor
        out(f"| instructions, one correct password, against pam_faillock's plus asking fprintd (`matchfloor --ask` "
            f"less /bin/true: libsystemd loaded, a connection, GetDevices) | {instructions['password ours']:,} | – | "
            f"{floor:,} | – | {ratios['instructions floor']:.2f}× |")
    out()
    out("Loading is `dlopen(RTLD_NOW)` in a fresh process already linked to libpam (tools/loadtime.c); "
        "cold: the module and its libraries dropped from the page cache with posix_fadvise (pages that "
        "other processes map stay resident).")
    out()
    out("The module file by part of the code (from the link map; a generic function counts where it is "
        "declared, though Embedded Swift compiles it where it is specialized: the last column):")
    out()
    out("| part | bytes | share of the file | of which compiled into another part's object |")
    out("|---|---|---|---|")
    for part, (size, elsewhere) in module_sizes(LINKMAP, MODULE).items():
        out(f"| {part} | {size:,} | {size / sizes['ours']:.0%} | {elsewhere:,} |")


def report_scale(m):
    out()
    out("### Scale")
    out()
    out("Failures recorded per second by concurrent processes (the store probe, release build: the "
        "module's own ledger and store, one wrong-password charge per transaction, each on disk before it "
        "returns):")
    out()
    out("| users | processes | charges each | seconds | charges / s | counts on disk exact |")
    out("|---|---|---|---|---|---|")
    exact_all = True
    for users, processes, each, seconds, exact, total in m["scale"]:
        exact_all = exact_all and exact
        out(f"| {'one' if users == 'one' else 'one each'} | {processes} | {each} | {seconds:.2f} | "
            f"{total / seconds:.0f} | {'yes' if exact else 'NO'} ({total}) |")
    out()
    out("Correct password with other users' records in the state directory:")
    out()
    out("| records on disk | N | median ms | p90 ms | ratio to 1 record |")
    out("|---|---|---|---|---|")
    one = statistics.median(m["per records"][1])
    for count, samples in m["per records"].items():
        out(f"| {count:,} | {len(samples)} | {statistics.median(samples) / 1000:.2f} | {p90(samples) / 1000:.2f} | "
            f"{statistics.median(samples) / one:.2f}× |")
    return exact_all


def report_breakdown(m):
    out()
    out("### Where the time goes")
    out()
    out("One call each under `strace -f -T` (which slows every system call, so read the counts and the long "
        "waits, not the sums): system calls by what they touch, and the time spent inside them.")
    for title, key in (("fingerprint match, ours", "match breakdown"), ("fingerprint match, pam_fprintd",
                       "fprintd breakdown"), ("correct password, ours", "password breakdown"),
                       ("correct password, pam_faillock", "faillock breakdown")):
        elapsed, totals, waits = m[key]
        out()
        out(f"{title} ({elapsed / 1000:.2f} ms under strace):")
        out()
        out("| touches | system calls | ms inside them |")
        out("|---|---|---|")
        for name, (count, seconds) in totals.items():
            if count:
                out(f"| {name} | {count} | {seconds * 1000:.2f} |")
        out(f"| longest | {', '.join(f'{call} {seconds * 1000:.2f} ms ({name})' for seconds, name, call in waits[:4])} | |")


def report_targets(ratios, exact):
    out()
    out("### Targets")
    out()
    out("| target | measured | met |")
    out("|---|---|---|")
    rows = [
        ("correct password ≤ 2.0× pam_faillock at equal durability (the build without sync)",
         f"{ratios['password-nosync']:.2f}×", ratios["password-nosync"] <= 2.0),
        ("correct password, durable, ≤ 3.0× pam_faillock", f"{ratios['password']:.2f}×", ratios["password"] <= 3.0),
        ("fingerprint match within 1.1× of the floor", f"{ratios['floor']:.2f}×", ratios["floor"] <= 1.1),
        ("fingerprint match within 1.1× of the floor under the rules", f"{ratios['floor+rules']:.2f}×",
         ratios["floor+rules"] <= 1.1),
        ("module < 200 KiB", f"{ratios['size'] / 1024:.0f} KiB", ratios["size"] < MODULE_LIMIT),
        ("first load ≤ 1.0× pam_fprintd, warm and cold", f"{ratios['loads']:.2f}× / {ratios['cold']:.2f}×",
         max(ratios["loads"], ratios["cold"]) <= 1.0),
        ("exact counts at 128 concurrent processes", "exact" if exact else "NOT exact", exact),
    ]
    if "instructions" in ratios:
        rows.insert(2, ("instructions, one correct password, ≤ 2.0× pam_faillock", f"{ratios['instructions']:.2f}×",
                        ratios["instructions"] <= 2.0))
    for target, measured, met in rows:
        out(f"| {target} | {measured} | {'yes' if met else 'no'} |")


def summary_row(ratios):
    """One line for the table of runs: the goals' figures of this run."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"

    def spread_of(batches):
        return f"{min(batches):.2f}–{max(batches):.2f}×" if batches else "–"

    def ratio_of(key):
        return f"{ratios[key]:.2f}×" if key in ratios else "–"
    return (f"| {time.strftime('%Y-%m-%d %H:%M')} | {commit} | {ratios['password-nosync']:.2f}× | {ratios['password']:.2f}× "
            f"| {ratios['password-floor']:.2f}× | {ratio_of('instructions')} | {ratios['match']:.2f}× | {ratios['floor']:.2f}× "
            f"| {ratios['floor+enrolled']:.2f}× | {spread_of(ratios['enrolled batches'])} | {ratios['ready']:.2f}× "
            f"| {ratios['size'] / 1024:.0f} | {ratios['loads']:.2f}× / {ratios['cold']:.2f}× "
            f"| {ratios['floor+rules']:.2f}× | {spread_of(ratios['rules batches'])} | {ratios['through helper']:.2f}× "
            f"| {ratio_of('instructions floor')} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30, help="measured runs per side (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured rounds first (default 3)")
    parser.add_argument("--match-n", type=int, default=150,
                        help="measured matches per side (default 150: the rig's own time varies run to run)")
    parser.add_argument("--write", type=Path, help="put the report into this Markdown file between its markers")
    parser.add_argument("--quick", action="store_true", help="skip the 100 000-record and callgrind rows")
    opts = parser.parse_args()
    for need in (MODULE, LINKMAP, HARNESS, PAM_FPRINTD, PAM_FAILLOCK, NOSYNC_MODULE, LOADTIME, MATCH_FLOOR,
                 RELEASE_PROBE):
        if not Path(need).exists():
            sys.exit(f"bench: {need} is missing (run `make bench`)")
    if os.geteuid() != 0:
        sys.exit("bench: run as root (the state directory must be root-owned)")
    if not os.environ.get("LOCALAUTH_ISOLATED"):
        sys.exit("bench: run through tools/isolated (`make bench` does): the worlds hold a setuid helper")
    # The worlds (a setuid copy of the helper among them) live on the disk,
    # where a sync costs what it costs, below a directory only root may
    # enter; the benchmark reaches them through a mount in this namespace's
    # own /tmp, which no process outside it sees. Killed, it leaves the
    # directory, closed to everyone but root.
    disk = Path(tempfile.mkdtemp(prefix="localauth-bench-", dir="/var/tmp"))
    (disk / "base").mkdir(mode=0o755)
    base = Path(tempfile.mkdtemp(prefix="localauth-bench-"))
    base.chmod(0o755)   # the real sudo's test user runs the askpass program below it
    subprocess.run(["mount", "--bind", str(disk / "base"), str(base)], check=True)
    state_fs = subprocess.run(["df", "--output=fstype,source", str(base)], capture_output=True,
                              text=True).stdout.splitlines()[-1].split()
    try:
        m = measure(opts, base, state_fs)
    finally:
        subprocess.run(["umount", "--lazy", str(base)], check=False)
        shutil.rmtree(disk, ignore_errors=True)
    ratios = {}
    report_latency(m, ratios)
    report_footprint(m, ratios)
    exact = report_scale(m)
    report_breakdown(m)
    report_targets(ratios, exact)
    if opts.write:
        write_between_markers(opts.write, summary_row(ratios))
        print(f"\nwritten to {opts.write}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench: {e}")
