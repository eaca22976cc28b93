"""The state store at scale (concurrent charging processes, other users'
records on disk) and where one call's time goes (its system calls under
strace, by what they touch)."""
import os
import re
import shutil
import struct
import subprocess
import time

from bench_sides import MATCH, RELEASE_PROBE, BenchError, run_harness
from pamenv import OFFSET_CHECKSUM, OFFSET_NAME, OFFSET_NAME_LENGTH, OFFSET_UID, SLOT_SIZE, current_slot, fnv1a64, sync_mark


def charge_processes(state, processes, each, users):
    """`processes` store probes at once, each charging `each` wrong passwords;
    one user for all, or one user each. -> (seconds, exact?)"""
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(mode=0o700)
    start = time.perf_counter()
    procs = []
    for i in range(processes):
        uid, name = (50000, "scaleuser") if users == "one" else (50000 + i, f"scaleuser{i}")
        procs.append(subprocess.Popen([str(RELEASE_PROBE), "charge", str(state), str(uid), name, str(each)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise BenchError(f"store probe failed: {err.decode()}")
    finally:  # a failure leaves no probe writing into a directory about to go
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    seconds = time.perf_counter() - start
    if users == "one":
        counts = [probe_count(state, 50000, "scaleuser")]
        exact = counts == [processes * each]
    else:
        counts = [probe_count(state, 50000 + i, f"scaleuser{i}") for i in range(processes)]
        exact = counts == [each] * processes
    return seconds, exact, sum(counts)


def probe_count(state, uid, name):
    proc = subprocess.run([str(RELEASE_PROBE), "inspect", str(state), str(uid), name], capture_output=True, text=True)
    match = re.search(r"P=(\d+)", proc.stdout)
    return int(match.group(1)) if match else -1


def populate_records(pam, count):
    """`count` other users' records beside alice's: copies of hers with
    another uid and name, resealed (and no lock files: users who are not
    prompting hold none)."""
    template = bytearray(current_slot(pam.record_path().read_bytes()))
    existing = len(list(pam.state.glob("6*.rec")))
    for i in range(existing, count):
        uid = 600000 + i
        name = f"u{i}".encode()
        slot = bytearray(template)
        struct.pack_into("<I", slot, OFFSET_UID, uid)
        struct.pack_into("<H", slot, OFFSET_NAME_LENGTH, len(name))
        slot[OFFSET_NAME:OFFSET_NAME + 255] = name + bytes(255 - len(name))
        struct.pack_into("<Q", slot, OFFSET_CHECKSUM, fnv1a64(bytes(slot[:OFFSET_CHECKSUM])))
        path = pam.state / f"{uid}.rec"
        path.write_bytes(bytes(slot) + bytes(SLOT_SIZE) + sync_mark(struct.unpack_from("<Q", slot, 1760)[0]))
        os.chmod(path, 0o600)



CATEGORIES = [
    ("state store", lambda s, state, conf: str(state) in s),
    ("configuration", lambda s, state, conf: str(conf) in s or "localauth.conf" in s),
    ("D-Bus (fprintd, logind)", lambda s, state, conf: "system_bus_socket" in s or "no-system-bus" in s),
    ("passcode stack (PAM files, pam_matrix)", lambda s, state, conf: "/pam.d/" in s or "passdb" in s
     or "pam_matrix" in s),
]


def breakdown(pam, service, answers, env, rig=None):
    """Syscalls of one call under strace, by what they touch: count, and
    time spent inside them (-T). strace slows every syscall; read the counts
    and the long waits, not the sum."""
    trace = pam.base / f"strace-{service}.txt"
    wrapper = ["strace", "-f", "-T", "-yy", "-qq", "-o", str(trace)]
    if rig:
        rig.feed([MATCH])
    run = run_harness(pam, service, answers, env, wrapper=wrapper, unwrapped=rig is None)
    if rig:
        rig.feed_wait(timeout=30)
        rig.wait_until_claimable()
    if run.code != 0:
        raise BenchError(f"{service} under strace: code {run.code}")
    totals = {name: [0, 0.0] for name, _ in CATEGORIES}
    totals["other"] = [0, 0.0]
    waits = []
    bus_sockets = set()   # descriptors connected to the bus: strace names the path only at connect
    for line in trace.read_text().splitlines():
        match = re.search(r"<(\d+\.\d+)>$", line)
        if not match:
            continue
        seconds = float(match.group(1))
        call = re.match(r"^\d+\s+(\w+)\((\d+)?", line)
        fd = call.group(2) if call else None
        if call and call.group(1) == "connect" and ("system_bus_socket" in line or "no-system-bus" in line):
            bus_sockets.add(fd)
        name = "D-Bus (fprintd, logind)" if fd in bus_sockets else next(
            (n for n, test in CATEGORIES if test(line, pam.state, pam.conf)), "other")
        if call and call.group(1) == "close":
            bus_sockets.discard(fd)
        totals[name][0] += 1
        totals[name][1] += seconds
        call = re.sub(r"^\d+\s+", "", line).split("(")[0]
        waits.append((seconds, name, call))
    waits.sort(reverse=True)
    return run.elapsed_us, totals, waits[:6]


