"""The load test's report: what it prints, the memory bounds it holds the
run to, and the processes a run must not leave behind."""
import os
from pathlib import Path


def independence(report):
    """The different-users group's median latency with the one-user group's
    load (fail) over the same with the control group's load (control)."""
    lat = report["latency"]
    try:
        return lat["users/fail"]["median_ms"] / lat["users/control"]["median_ms"]
    except (KeyError, ZeroDivisionError):
        return None


def format_rate(value):
    return "growth not measured" if value is None else f"{value:.1f} bytes per attempt"


def format_report(r):
    lines = []
    add = lines.append
    add(f"load test: {r['rounds']} rounds in {r['runtime_s']:.0f} s (asked {r['seconds']} s; setup {r['setup_s']:.1f} s), "
        f"seed {r['seed']}, {r['group_size']} concurrent per group, configurations {' / '.join(r['configs'])} alternating")
    add(f"module: a copy of {r['module']} (sha256 {r['module_sha256'][:16]}...)")
    add("")
    add(f"{'group':<10} {'transactions':>12} {'successes':>9} {'attempts expected':>17} {'on disk':>8} "
        f"{'exact F,P checks':>16} {'F exp/disk':>11} {'P exp/disk':>11} {'bounded':>7}")
    for group in ("one-user", "users", "control", "reset"):
        add(f"{group:<10} {r['transactions'].get(group, 0):>12} {r['successes'].get(group, 0):>9} "
            f"{r['expected_charges'].get(group, 0):>17} {r['disk_charges'].get(group, 0):>8} "
            f"{r['exact_checks'].get(group, 0):>16} "
            f"{str(r['exact_F'].get(group, 0)) + '/' + str(r['exact_F_disk'].get(group, 0)):>11} "
            f"{str(r['exact_P'].get(group, 0)) + '/' + str(r['exact_P_disk'].get(group, 0)):>11} "
            f"{r['bounded_checks'].get(group, 0):>7}")
    add("")
    add(f"phases: {r['phases']}")
    add(f"reader: fed {r['fed']}; transactions saw {r['reported_verdicts']}; {r['reader']}; "
        f"max prompts holding it at once {r['max_holders']}")
    add(f"refused without a charge: {r['refusals']}")
    add("")
    add(f"{'latency (pam_authenticate)':<28} {'n':>6} {'median ms':>10} {'p90 ms':>9} {'max ms':>9}")
    for key, value in r["latency"].items():
        add(f"{key:<28} {value['n']:>6} {value['median_ms']:>10.1f} {value['p90_ms']:>9.1f} {value['max_ms']:>9.1f}")
    ratio = independence(r)
    add(f"different users' median with the one-user load / with the control load: "
        f"{ratio:.2f}" if ratio is not None else "different users' latency: not measured")
    add("")
    add(f"lock waits seen (and confirmed) in {r['lock_samples']} samples of /proc/locks: {r['lock_waits'] or 'none'} "
        f"({r['lock_waits_unconfirmed']} gone by the second look); "
        f"waits for another user's lock: {r['foreign_lock_waits']}; longest seen (ms): "
        + ", ".join(f"{g} {v:.1f}" for g, v in r["longest_lock_wait_ms"].items()))
    add("lock holders while someone waited: " + (", ".join(f"{k} {v}" for k, v in r["lock_holder_activity"].items()) or "none"))
    m, s = r["memory_kb"], r["soak"]
    add("RSS (KB) after round 1 -> at the end (max): " + "; ".join(
        f"{name} {v['first']} -> {v['end']} ({v['max']})" for name, v in m.items()))
    for process in s.get("processes", []):
        sampled = process.get("sampled_rss_kb", {})
        add(f"soak process, {process.get('threads')} thread(s): {process.get('cycles')} cycles = {process.get('transactions')} "
            f"transactions in {process.get('seconds', 0):.0f} s; its VmRSS {process.get('rss_kb_warm')} KB after the first "
            f"tenth -> {process.get('rss_kb_end')} KB at the end; sampled every 0.1 s, peaks {sampled.get('first')} -> "
            f"{sampled.get('last')} KB (max {sampled.get('max')}, {sampled.get('samples', 0)} samples, "
            f"{format_rate(sampled.get('bytes_per_attempt'))}); {process.get('failures')} failures")
    add(f"soak (own rig): fed {s.get('fed')}; root's attempt number rose by {s.get('attempts_on_disk')} "
        f"(expected {s.get('attempts_expected')}: {s.get('transactions')} transactions + the no-matches)")
    add("")
    if r["mismatches"]:
        add(f"MISMATCHES ({len(r['mismatches'])}):")
        lines.extend(f"  {m}" for m in r["mismatches"][:200])
    else:
        add("no mismatch")
    return "\n".join(lines)


# Bounds on memory, shared with tests/faults/test_load.py. fprintd and dbus-daemon
# are sampled after every round: the growth from after round 1 (everything
# allocated once is in by then) to the end, in KB. The soak processes are
# sampled every 0.1 s; their peaks (of 8 windows, the first two left out)
# may grow SOAK_SAMPLED_GROWTH_KB, and their own figures (after the first
# tenth of their cycles, on the main thread, and at the end) SOAK_GROWTH_KB,
# which includes the threads' stacks and malloc arenas, made after the
# first figure.
FPRINTD_GROWTH_KB = 2048
DBUS_GROWTH_KB = 2048
SOAK_SAMPLED_GROWTH_KB = 1024
SOAK_GROWTH_KB = 4096
# The single-threaded soak's growth (growth_per_attempt), in bytes per
# attempt on root's record (both soaks' attempts: their progress). Measured
# here in 30 s runs: the module from before LogindSeat's names became
# computed properties (234 bytes lost per fingerprint prompt) grew 89 and
# 76; the module after it 1.8 and 6.2. The 4-threaded one is noisier (20-37
# for both) and has no such bound.
SOAK_BYTES_PER_ATTEMPT = 32


def memory_problems(report):
    m, s = report["memory_kb"], report["soak"]
    problems = []
    for name, values, bound in (("fprintd", m.get("fprintd"), FPRINTD_GROWTH_KB),
                                ("fprintd (soak rig)", m.get("fprintd (soak rig)"), FPRINTD_GROWTH_KB),
                                ("dbus-daemon", m.get("dbus-daemon"), DBUS_GROWTH_KB)):
        if not values or values.get("samples", 0) < 2:
            problems.append(f"{name}: RSS not sampled twice")
        elif values["end"] - values["first"] > bound:
            problems.append(f"{name}: RSS grew {values['end'] - values['first']} KB (bound {bound})")
    processes = s.get("processes", [])
    if not processes:
        problems.append("soak: no process ran")
    for process in processes:
        name = f"soak process ({process.get('threads')} thread(s))"
        sampled = process.get("sampled_rss_kb") or {}
        if sampled.get("samples", 0) < 2:
            problems.append(f"{name}: RSS not sampled twice")
        elif sampled["last"] - sampled["first"] > SOAK_SAMPLED_GROWTH_KB:
            problems.append(f"{name}: its peak RSS grew {sampled['last'] - sampled['first']} KB (bound {SOAK_SAMPLED_GROWTH_KB})")
        rate = sampled.get("bytes_per_attempt")
        if process.get("threads") == 1:
            if rate is None:
                problems.append(f"{name}: growth per attempt not measured (too few samples)")
            elif rate > SOAK_BYTES_PER_ATTEMPT:
                problems.append(f"{name}: VmRSS grows {rate:.0f} bytes per attempt (bound {SOAK_BYTES_PER_ATTEMPT})")
        if process.get("rss_kb_warm") is None:
            problems.append(f"{name}: VmRSS not reported")
        elif process["rss_kb_end"] - process["rss_kb_warm"] > SOAK_GROWTH_KB:
            problems.append(f"{name}: VmRSS grew {process['rss_kb_end'] - process['rss_kb_warm']} KB (bound {SOAK_GROWTH_KB})")
    return problems


def leftover_processes(base, pids):
    """Processes still alive that the run started: any of `pids`, or any
    process whose environment or command line names the run's directory."""
    found = []
    marker = str(base).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in "ZX":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            if int(entry.name) in pids or marker in (entry / "environ").read_bytes() or marker in cmdline:
                command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:120]
                found.append(f"{entry.name} {command}")
        except (OSError, IndexError):
            continue
    return found
