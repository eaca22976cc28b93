"""The module binary itself : exports, dependencies,
loading without the Swift toolchain, and repeated load/unload cycles."""
import re
import subprocess

from pamenv import BUILD, MODULE, PASSWORDS

TOOLCHAIN = "/opt/swift"


def test_exports_only_the_three_entry_points():
    out = subprocess.run(["nm", "-D", "--defined-only", str(MODULE)], capture_output=True, text=True, check=True).stdout
    symbols = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert symbols == ["pam_sm_acct_mgmt", "pam_sm_authenticate", "pam_sm_setcred"]


def test_needs_nothing_from_the_swift_toolchain():
    out = subprocess.run(["ldd", str(MODULE)], capture_output=True, text=True, check=True).stdout
    assert "swift" not in out.lower()
    assert "not found" not in out
    needed = subprocess.run(["readelf", "-d", str(MODULE)], capture_output=True, text=True, check=True).stdout
    libraries = re.findall(r"Shared library: \[(.+?)\]", needed)
    assert set(libraries) <= {"libpam.so.0", "libsystemd.so.0", "libc.so.6", "ld-linux-x86-64.so.2"}
    assert "RPATH" not in needed and "RUNPATH" not in needed


def load_segments(binary):
    """(offset, file size, flags) of each LOAD segment, in file order."""
    out = subprocess.run(["readelf", "-lW", str(binary)], capture_output=True, text=True, check=True).stdout
    return [(int(m.group(1), 16), int(m.group(2), 16), m.group(3).replace(" ", ""))
            for m in re.finditer(r"^\s*LOAD\s+0x([0-9a-f]+)\s+\S+\s+\S+\s+0x([0-9a-f]+)\s+\S+\s+([RWE ]+?)\s+0x", out, re.M)]


def test_code_has_pages_of_its_own_and_relocations_are_read_only_after_start():
    """The module and the setuid helper: one executable segment, which starts
    and ends on page boundaries (no data is mapped executable), nothing both
    writable and executable, BIND_NOW and RELRO."""
    for binary in (MODULE, BUILD / "localauth-helper"):
        segments = load_segments(binary)
        executable = [index for index, (_, _, flags) in enumerate(segments) if "E" in flags]
        assert len(executable) == 1, (binary, segments)
        offset, size, flags = segments[executable[0]]
        assert "W" not in flags and offset % 4096 == 0, (binary, segments)
        following = segments[executable[0] + 1][0]
        assert following % 4096 == 0 and following >= offset + size, (binary, segments)
        headers = subprocess.run(["readelf", "-lWd", str(binary)], capture_output=True, text=True, check=True).stdout
        assert "GNU_RELRO" in headers and "BIND_NOW" in headers, binary
        stack = re.search(r"GNU_STACK(?:\s+0x[0-9a-f]+){5}\s+([RWE]+)", headers)
        assert stack and "E" not in stack.group(1), binary


def test_loads_and_authenticates_with_the_toolchain_hidden(pam):
    script = (f"mount --make-rprivate / && mount -t tmpfs none {TOOLCHAIN} && "
              f"test -z \"$(ls -A {TOOLCHAIN})\" && exec " +
              " ".join(f"'{a}'" for a in pam.harness_args("sudo", "alice", [PASSWORDS["alice"]])))
    proc = subprocess.run(["unshare", "--mount", "bash", "-c", script], env=pam.env(), capture_output=True, text=True,
                          timeout=60)
    assert "result: 0 " in proc.stdout, proc.stdout + proc.stderr
    assert pam.record().P == 0


def cycles(pam, count, threads):
    """Runs pam_start/pam_authenticate/pam_end `count` times per thread with
    the correct passcode, for root: nss_wrapper is not thread-safe, and root
    comes from the host's passwd (read only). The test's service files are
    bound over /etc/pam.d in a private mount namespace."""
    script = ("mount --make-rprivate / && " + f"mount --bind {pam.services} /etc/pam.d && exec " +
              " ".join(f"'{a}'" for a in pam.harness_args("sudo", "root", [PASSWORDS["root"]]))
              + f" -n {count} -T {threads}")
    env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={pam.base}/no-system-bus"}
    proc = subprocess.run(["unshare", "--mount", "bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    values = dict(line.split(": ") for line in proc.stdout.splitlines())
    return int(values["rss_kb_warm"]), int(values["rss_kb_end"]), int(values["failures"])


def test_1000_cycles_on_the_main_thread_neither_crash_nor_grow(pam):
    warm, end, failures = cycles(pam, 1000, 1)
    assert failures == 0
    # A leak of 1 KB per cycle (say, globals re-created on every load of the
    # module) would add about 900 KB here.
    assert end - warm < 512, f"RSS grew {end - warm} KB over 900 cycles"
    assert pam.record("root").P == 0


def test_1000_cycles_on_8_threads_neither_crash_nor_grow(pam):
    warm, end, failures = cycles(pam, 1000, 8)
    assert failures == 0
    # Thread stacks and per-thread malloc arenas are allocated once (about
    # 8 MB here); a leak of 1 KB per cycle would add about 7 MB more.
    assert end - warm < 8192 + 1024, f"RSS grew {end - warm} KB"
    assert pam.record("root").P == 0
