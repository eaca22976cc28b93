"""The module's footprint: its file, by what each part of the code costs
in it, loading it (warm and cold), and the instructions of one whole
client process under callgrind."""
import collections
import os
import re
import subprocess

from bench_sides import LOADTIME, MATCH, MATCH_FLOOR, BenchError, run_harness


def ldd(path):
    text = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    libs = []
    for line in text.splitlines():
        match = re.search(r"=> (/\S+)", line)
        if match:
            libs.append(match.group(1))
    return libs


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_once(module, cold):
    if cold:
        for path in [module] + ldd(module):
            drop_cache(path)
    proc = subprocess.run([str(LOADTIME), str(module)], capture_output=True, text=True, check=True)
    fields = dict(line.split(": ") for line in proc.stdout.splitlines())
    return int(fields["load_us"]), int(fields["rss_kb_added"])


def callgrind_instructions(pam, service, answers, env, rig=None):
    """Instructions (Ir) of one whole harness process under callgrind (a
    password unwrapped, as it is timed)."""
    log = pam.base / f"callgrind-{service}.log"
    if rig:
        rig.feed([MATCH])
    run = run_harness(pam, service, answers, env, wrapper=callgrind(log), latency=False, timeout=300, unwrapped=rig is None)
    if rig:
        rig.feed_wait(timeout=60)
        rig.wait_until_claimable()
    if run.code != 0:
        raise BenchError(f"{service} under callgrind: code {run.code} {run.messages}")
    return callgrind_total(log)


def callgrind_command(argv, env, log):
    """Instructions (Ir) of one whole run of `argv` under callgrind."""
    subprocess.run(callgrind(log) + list(argv), env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    return callgrind_total(log)


def callgrind(log):
    """The command prefix that counts a program's instructions into `log`."""
    return ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}"]


def callgrind_total(log):
    """The instruction count callgrind wrote to its log."""
    match = re.search(r"Collected\s*:\s*(\d+)", log.read_text())
    if not match:
        raise BenchError(f"no callgrind total in {log}")
    return int(match.group(1))


def asking_instructions(base, env):
    """What asking fprintd adds to a process, in instructions:
    `matchfloor --ask` (libsystemd loaded, a new bus connection,
    GetDevices) less a process that only starts and exits (/bin/true)."""
    asked = callgrind_command([str(MATCH_FLOOR), "--ask"], env, base / "callgrind-ask.log")
    return asked - callgrind_command(["/bin/true"], env, base / "callgrind-true.log")


# The module's objects and the part of the code each is (docs/DESIGN.md's layout).
OBJECT_PARTS = {
    "LocalAuth.o": "LocalAuth (engine, rules, formats)",
    "LibcSystem.o": "LibcSystem (store, system calls, helper client)",
    "PAMAndBusAdapters.o": "PAMAndBusAdapters (libpam, fprintd, logind)",
    "PAMModule.o": "PAMModule (the entry points)",
    "libc_shim.o": "C shims (CLibc, CPAMAndBus, the exports)",
    "system_shim.o": "C shims (CLibc, CPAMAndBus, the exports)",
    "pam_localauth.o": "C shims (CLibc, CPAMAndBus, the exports)",
}
STDLIB = "Swift standard library (Embedded, specialized)"
RUNTIME = "Swift runtime (Embedded: retain, release, allocation)"
FILE_FORMAT = "ELF: headers, symbols, relocations, PLT, GOT, alignment"
SWIFT_MODULE = re.compile(r"\$e(\d+)([A-Za-z_]\w*)")


def declared_in(section, obj):
    """The part whose code an input section is: the Swift module that
    declares the function (a generic one is compiled where it is
    specialized, so the object alone would charge the engine's code to its
    callers), else the object's part."""
    name = section.split(".", 2)[2] if section.count(".") >= 2 else ""
    if name.startswith("$e"):
        match = SWIFT_MODULE.match(name)
        if match:
            return OBJECT_PARTS.get(match.group(2)[:int(match.group(1))] + ".o", STDLIB)
        return STDLIB
    if name.startswith("swift_") or name.startswith("_swift"):
        return RUNTIME
    return OBJECT_PARTS.get(obj, "C runtime start files" if "crt" in obj else obj)


def module_sizes(linkmap, module):
    """{part: [bytes declared there, of which compiled into another part's
    object]} from lld's link map of the module (-Map), for the sections the
    stripped file holds; what no input section accounts for is the file
    format's own."""
    line_format = re.compile(r"\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (.*)$")
    sizes = collections.defaultdict(lambda: [0, 0])
    output = None
    for line in linkmap.read_text().splitlines():
        match = line_format.match(line)
        if not match:
            continue
        rest = match.group(2)
        if not rest.startswith(" "):
            output = rest.strip()
            continue
        found = re.match(r"\s*(?:\S*/)?([^/\s]+\.o):\((\S+)\)", rest)
        if not found or output in (".bss", ".tbss", ".comment") or not output.startswith("."):
            continue
        obj, section = found.groups()
        size = int(match.group(1), 16)
        part = declared_in(section, obj)
        sizes[part][0] += size
        if OBJECT_PARTS.get(obj) not in (part, None) and part in OBJECT_PARTS.values():
            sizes[part][1] += size
    accounted = sum(total for total, _ in sizes.values())
    sizes[FILE_FORMAT] = [max(0, module.stat().st_size - accounted), 0]
    return dict(sorted(sizes.items(), key=lambda item: -item[1][0]))
