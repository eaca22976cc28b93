"""The Debian package: `make deb`, lintian, and the package's whole life in
a throwaway root.

The throwaway root is the host's own packages: /usr, /etc and /var are
overlays whose lower layer is the host's and whose upper layer is a
directory of this test, mounted in a private mount namespace and entered
with chroot. dpkg there sees the host's package database, so the
package's dependencies are met as they would be on this machine, and
every change (dpkg's database, /etc/pam.d, the state directory, a user
made for the test) lands in the upper layers only. The host's /etc and
package database are hashed before and after: unchanged.

In the root: install (nothing enabled), enable the profile, a wrong and a
correct password through the installed module with real sudo's stack and
pam_unix, an upgrade to a later version (the configuration, the state
and a dpkg-statoverride kept), a removal refused while a hand-written
stack still names the module, then remove and purge: afterwards no
/etc/pam.d file names it.
"""
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pamenv import HELPER_PATH, MULTIARCH, ROOT, parse_record

# The changelog's top entry (read here: a release root has no dpkg-dev).
VERSION = re.match(r"localauth \(([^)]+)\)", (ROOT / "packaging/debian/changelog").read_text()).group(1)
UPGRADE = VERSION + "+upgrade1"
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
HELPER = HELPER_PATH
# Under /usr on every release (tools/mkdeb.sh): Debian 12's libpam asks for
# /lib/<triplet>/security, the same directory on its merged /usr.
MODULE_PATH = f"/usr/lib/{MULTIARCH}/security/pam_localauth.so"
PASSWORD = "package-test-secret"
# Files of ours that a host may hold from `make install`: hidden in the root.
OURS_ON_HOST = ["/etc/security/localauth.conf", "/etc/pam.d/localauth-passcode", "/usr/share/pam-configs/localauth",
                "/var/lib/localauth", MODULE_PATH, "/usr/bin/localauth", os.path.dirname(HELPER_PATH)]
# A stack line naming the module (not a comment).
NAMES_MODULE = r"^[[:space:]]*[^#[:space:]].*pam_localauth\.so"


def build(out):
    env = dict(os.environ, DEB_OUT=str(out))
    result = subprocess.run(["make", "-s", "deb"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, f"make deb failed:\n{result.stdout}\n{result.stderr}"
    deb = out / f"localauth_{VERSION}_{ARCH}.deb"
    assert deb.is_file(), result.stdout
    return deb


UPGRADE_MARK = "# changed by the upgrade"


def the_upgrade(deb, work):
    """The package repacked as a later release with new files would be: its
    version is UPGRADE, its profile gains a module argument and its
    passcode service a line, so the upgrade shows what the maintainer
    scripts and dpkg do with them."""
    tree = work / "tree"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
    control = tree / "DEBIAN/control"
    control.write_text(re.sub(r"^Version: .*$", f"Version: {UPGRADE}", control.read_text(), flags=re.M))
    profile = tree / "usr/share/pam-configs/localauth"
    profile.write_text(profile.read_text().replace("pam_localauth.so", "pam_localauth.so silent"))
    passcode = tree / "etc/pam.d/localauth-passcode"
    passcode.write_text(passcode.read_text() + UPGRADE_MARK + "\n")
    sums = subprocess.run("find . -path ./DEBIAN -prune -o -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 md5sum",
                          shell=True, cwd=tree, capture_output=True, text=True, check=True).stdout
    (tree / "DEBIAN/md5sums").write_text(sums)
    upgrade = work / f"localauth_{UPGRADE}_{ARCH}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(upgrade)], check=True, capture_output=True)
    return upgrade


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """The package as `make deb` builds it (in a release root, which cannot
    build, the one tools/in-release's caller built: LOCALAUTH_DEB), and its
    upgrade."""
    base = tmp_path_factory.mktemp("debs")
    first = Path(os.environ["LOCALAUTH_DEB"]) if os.environ.get("LOCALAUTH_DEB") else build(base / "first")
    return {"first": first, "upgrade": the_upgrade(first, base)}


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def test_the_package_holds_what_an_administrator_needs(debs):
    deb = debs["first"]
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    entries = {line.split()[-1].lstrip("."): line.split()[0] for line in listing.splitlines()}
    assert entries[HELPER] == "-rwsr-xr-x"
    assert entries["/var/lib/localauth/"] == "drwx------"
    for path in [MODULE_PATH, "/usr/bin/localauth", "/etc/pam.d/localauth-passcode", "/etc/security/localauth.conf",
                 "/usr/share/pam-configs/localauth", "/usr/share/man/man8/pam_localauth.8.gz",
                 "/usr/share/man/man1/localauth.1.gz", "/usr/share/man/man5/localauth.conf.5.gz",
                 "/usr/share/doc/localauth/copyright", "/usr/share/doc/localauth/changelog.gz",
                 "/usr/share/localauth/pam.d/sudo"]:
        assert path in entries, path
    assert all(owner == "root/root" for owner in (line.split()[1] for line in listing.splitlines()))
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True).stdout
    assert b"/etc/security/localauth.conf" in conffiles and b"/etc/pam.d/localauth-passcode" in conffiles
    depends = field(deb, "Depends")
    # From the binaries: the C library, libpam, libsystemd (sd-bus), and
    # the C++ runtime the command's static Swift runtime needs.
    for package in ["libc6", "libpam0g", "libsystemd0", "libpam-runtime"]:
        assert package + " (>=" in depends, depends
    # The TPM's libraries are loaded by the helper when it seals (never
    # linked): recommended under each release's name.
    assert field(deb, "Recommends") == ("fprintd, libtss2-esys-3.0.2-0 | libtss2-esys-3.0.2-0t64, "
                                        "libtss2-tcti-device0 | libtss2-tcti-device0t64")
    assert "Default: no" in (ROOT / "config/pam-auth-update.localauth").read_text()


def test_the_binaries_need_no_toolchain(debs, tmp_path):
    """Nothing from the Swift toolchain is needed where the package goes:
    every library a binary asks for comes from a package in Depends, and
    none has a search path of its own."""
    subprocess.run(["dpkg-deb", "-x", str(debs["first"]), str(tmp_path)], check=True)
    depends = field(debs["first"], "Depends")
    for binary in [MODULE_PATH, "/usr/bin/localauth", HELPER]:
        dynamic = subprocess.run(["readelf", "-d", str(tmp_path / binary.lstrip("/"))], capture_output=True, text=True,
                                 check=True).stdout
        assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, binary
        for line in dynamic.splitlines():
            if "(NEEDED)" in line:
                library = line.split("[")[1].rstrip("]")
                owner = subprocess.run(["dpkg", "-S", f"*/{library}"], capture_output=True, text=True).stdout
                packages = {entry.split(":")[0] for entry in owner.splitlines()}
                assert any(package + " " in depends + " " or package + "," in depends for package in packages), \
                    (binary, library, packages, depends)


def test_lintian_finds_nothing_that_is_not_explained(debs, tmp_path):
    lintian = shutil.which("lintian")
    assert lintian, "lintian is missing: run make deps"
    # lintian leaves its own scratch files in TMPDIR; keep them in the test's.
    result = subprocess.run([lintian, "--pedantic", "--display-info", "--show-overrides", str(debs["first"])],
                            capture_output=True, text=True, timeout=600, env=dict(os.environ, TMPDIR=str(tmp_path)))
    # The toolchain's cut-short words in the command's static data come and go,
    # and change case, with the binary's layout: one listed in the overrides
    # is explained in any case, and its override may find no match in a build.
    listed = {line.split()[2].upper() for line in (ROOT / "packaging/debian/lintian-overrides").read_text().splitlines()
              if line.startswith("localauth: spelling-error-in-binary ")}

    def explained(line):
        words = line.split()
        if line.startswith("I: localauth: spelling-error-in-binary ") and words[-1] == "[usr/bin/localauth]":
            return words[3].upper() in listed
        if line.startswith("W: localauth: mismatched-override spelling-error-in-binary ") and "[usr/bin/localauth]" in words:
            return words[4].upper() in listed
        return False
    tags = [line for line in result.stdout.splitlines() if line[:2] in ("E:", "W:", "I:", "P:", "X:") and not explained(line)]
    assert tags == [], result.stdout
    overridden = [line for line in result.stdout.splitlines() if line.startswith("O:")]
    assert overridden, "the overrides are in use"
    overrides = (ROOT / "packaging/debian/lintian-overrides").read_text().splitlines()
    for index, line in enumerate(overrides):
        if line.startswith("localauth:"):
            # Each override, or group of them, comes after a comment saying why.
            above = [earlier for earlier in overrides[:index] if not earlier.startswith("localauth:")]
            assert above and above[-1].startswith("#"), f"override without its reason: {line}"


def tree_digest(paths):
    """Names, modes, owners, link targets and contents."""
    digest = hashlib.sha256()
    for top in paths:
        for path in [Path(top)] + (sorted(Path(top).rglob("*")) if Path(top).is_dir() else []):
            if not os.path.lexists(path):
                digest.update(b"missing " + str(path).encode())
                continue
            info = os.lstat(path)
            digest.update(f"{path} {info.st_mode:o} {info.st_uid} {info.st_gid}".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


HOST_FILES = ["/etc/pam.d", "/etc/security", "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/subuid",
              "/etc/subgid", "/var/lib/dpkg/status", "/var/lib/dpkg/statoverride", "/var/lib/dpkg/info", "/var/lib/pam",
              "/usr/share/pam-configs"]


class ThrowawayRoot:
    """The host's /usr, /etc and /var under overlays whose upper layers are
    this test's; each `run` is a new private mount namespace and chroot."""

    def __init__(self, base, debs):
        self.base = base
        self.root = base / "root"
        self.debs = debs
        for layer in ("usr", "etc", "var"):
            (base / f"{layer}.upper").mkdir(parents=True)
            (base / f"{layer}.work").mkdir()
            (self.root / layer).mkdir(parents=True)
        for name in ("proc", "dev", "tmp", "run", "root", "debs"):
            (self.root / name).mkdir()
        for name in ("bin", "sbin", "lib", "lib64"):
            (self.root / name).symlink_to(f"usr/{name}")
        self.fresh = True

    def upper(self, path):
        """Where a file the root changed lies on the host (its upper layer)."""
        layer, rest = Path(path).relative_to("/").parts[0], Path(path).relative_to("/").parts[1:]
        return self.base / f"{layer}.upper" / Path(*rest)

    def run(self, script, check=True):
        mounts = [f"mount -t overlay overlay -o lowerdir=/{layer},upperdir={self.base}/{layer}.upper,"
                  f"workdir={self.base}/{layer}.work {self.root}/{layer}" for layer in ("usr", "etc", "var")]
        mounts += [f"mount -t proc proc {self.root}/proc", f"mount --bind /dev {self.root}/dev",
                   f"mount -t tmpfs tmpfs {self.root}/tmp", f"mount -t tmpfs tmpfs {self.root}/run",
                   f"mount --bind -o ro {self.debs} {self.root}/debs"]
        if self.fresh:
            # What `make install` may have left on the host stays out of the root.
            mounts.append("rm -rf " + " ".join(f"{self.root}{path}" for path in OURS_ON_HOST))
            self.fresh = False
        setup = "set -e\n" + "\n".join(mounts) + f'\nexec chroot {self.root} /bin/sh -ec "$1"'
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
               "LC_ALL": "C.UTF-8", "HOME": "/root"}
        result = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", setup, "bash", script],
                                capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
        if check:
            assert result.returncode == 0, f"{script}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        return result

    def stacks_naming_the_module(self):
        """Every file under /etc/pam.d with a line that names the module
        once comments are cut (read here, not with the package's own code)."""
        dump = self.run("find /etc/pam.d -xtype f | sort | while read -r f; do echo \"=== $f\"; cat \"$f\"; done").stdout
        naming, current = [], None
        for line in dump.splitlines():
            if line.startswith("=== /etc/pam.d/"):
                current = line[4:]
            elif current and "pam_localauth.so" in line.split("#")[0] and current not in naming:
                naming.append(current)
        return naming

    def status(self):
        return self.run("dpkg-query -W -f='${Status} ${Version}' localauth 2>/dev/null || true").stdout.strip()


def sudo_stack_password(root, password):
    """One `sudo` authentication (the host's own sudo stack, which includes
    common-auth) through pamtester, answering the prompt with `password`."""
    return root.run(f"printf '%s\\n' '{password}' | pamtester sudo pkguser authenticate", check=False)


@pytest.fixture
def root(tmp_path, debs):
    deb_dir = tmp_path / "debs"
    deb_dir.mkdir()
    for name, deb in debs.items():
        shutil.copy(deb, deb_dir / f"{name}.deb")
    before = tree_digest(HOST_FILES)
    yield ThrowawayRoot(tmp_path / "throwaway", deb_dir)
    assert tree_digest(HOST_FILES) == before, "the host's /etc or package database changed"
    subprocess.run(["rm", "-rf", str(tmp_path / "throwaway")], check=False)


def record_of(root, uid):
    return parse_record(root.upper(f"/var/lib/localauth/{uid}.rec").read_bytes(), uid)


def test_install_enable_authenticate_upgrade_remove_purge(root):
    # The root has the host's packages and nothing else: no Swift toolchain.
    assert root.run("command -v swift swiftc || echo none").stdout.strip() == "none"
    # Install: everything in place, nothing enabled.
    installed = root.run("dpkg -i /debs/first.deb")
    assert root.status() == f"install ok installed {VERSION}", installed.stdout
    assert root.stacks_naming_the_module() == []
    modes = root.run(f"stat -c '%a %U %G %n' {HELPER} /var/lib/localauth {MODULE_PATH} /etc/security/localauth.conf")
    assert modes.stdout.split("\n")[:4] == [f"4755 root root {HELPER}", "700 root root /var/lib/localauth",
                                            f"644 root root {MODULE_PATH}", "644 root root /etc/security/localauth.conf"]
    assert "Default: no" in root.run("cat /usr/share/pam-configs/localauth").stdout

    # Enable as README says, on a laptop where pam_fprintd's profile is on:
    # in its place. The profile's line in common-auth, which the lint accepts.
    root.run("pam-auth-update --enable fprintd")
    assert "pam_fprintd.so" in root.run("cat /etc/pam.d/common-auth").stdout
    root.run("pam-auth-update --disable fprintd --enable localauth")
    assert "pam_fprintd.so" not in root.run("cat /etc/pam.d/common-auth").stdout
    assert root.stacks_naming_the_module() == ["/etc/pam.d/common-auth"]
    common_auth = root.run("cat /etc/pam.d/common-auth").stdout
    assert "pam_localauth.so" in common_auth and "default=die" in common_auth
    root.run("localauth config --check")

    # A PAM transaction through the installed module: sudo's stack, pam_unix
    # behind the passcode service, a user made in the root.
    root.run(f"useradd -M -u 4242 pkguser && echo 'pkguser:{PASSWORD}' | chpasswd")
    wrong = sudo_stack_password(root, "not-the-password")
    assert wrong.returncode != 0 and "Authentication failure" in wrong.stderr + wrong.stdout, wrong
    assert "Enter Password:" in wrong.stdout + wrong.stderr
    assert record_of(root, 4242).P == 1, "the installed module charged the attempt"
    right = sudo_stack_password(root, PASSWORD)
    assert right.returncode == 0 and "successfully authenticated" in right.stdout + right.stderr, right
    assert record_of(root, 4242).P == 0
    assert sudo_stack_password(root, "wrong-again").returncode != 0
    assert record_of(root, 4242).P == 1

    # Upgrade: the administrator's configuration, the state and a
    # statoverride on the helper all stay; the changed profile is applied
    # to the enabled stack, and the changed passcode service (not edited
    # here) replaces the old one.
    root.run("echo 'max_tries = 2' >> /etc/security/localauth.conf && "
             f"dpkg-statoverride --update --add root root 4750 {HELPER}")
    upgraded = root.run("dpkg -i /debs/upgrade.deb")
    assert root.status() == f"install ok installed {UPGRADE}", upgraded.stdout
    assert root.run("tail -n 1 /etc/security/localauth.conf").stdout.strip() == "max_tries = 2"
    assert root.run("ls /etc/security /etc/pam.d | grep -c dpkg- || true").stdout.strip() == "0"
    assert root.run(f"stat -c %a {HELPER}").stdout.strip() == "4750"
    assert record_of(root, 4242).P == 1
    assert root.stacks_naming_the_module() == ["/etc/pam.d/common-auth"]
    assert "pam_localauth.so silent" in root.run("cat /etc/pam.d/common-auth").stdout
    assert root.run("tail -n 1 /etc/pam.d/localauth-passcode").stdout.strip() == UPGRADE_MARK
    assert sudo_stack_password(root, PASSWORD).returncode == 0
    assert record_of(root, 4242).P == 0

    # Removal is refused while a stack written by hand still uses the
    # module (a default=die line pointing at a missing module would refuse
    # every login): named directly, through an include of the package's
    # example stack, in a substack below /etc/pam.d, or added by hand to
    # common-auth. Each refusal changes nothing: the profile stays enabled.
    for setup, named, undo in [
        ("cp /usr/share/localauth/pam.d/sudo /etc/pam.d/sudo-by-hand", "/etc/pam.d/sudo-by-hand",
         "rm /etc/pam.d/sudo-by-hand"),
        ("echo '@include /usr/share/localauth/pam.d/sudo' > /etc/pam.d/sudo-include", "/etc/pam.d/sudo-include",
         "rm /etc/pam.d/sudo-include"),
        ("mkdir /etc/pam.d/local && echo 'auth required pam_localauth.so' > /etc/pam.d/local/fp && "
         "echo 'auth substack local/fp' > /etc/pam.d/login-sub", "/etc/pam.d/local/fp",
         "rm -r /etc/pam.d/local /etc/pam.d/login-sub"),
        ("sed -i '1i auth optional pam_localauth.so authsucc' /etc/pam.d/common-auth", "/etc/pam.d/common-auth",
         "sed -i '1d' /etc/pam.d/common-auth"),
        # Two levels of absolute includes outside /etc/pam.d, the second
        # keyword in capitals, a line continued.
        ("mkdir /etc/pam-local && echo 'auth [success=1 default=die] pam_localauth.so' > /etc/pam-local/fp && "
         "printf 'auth Include \\\\\\n  /etc/pam-local/fp\\n' > /etc/pam-local/sudo && "
         "echo '@include /etc/pam-local/sudo' > /etc/pam.d/probe", "/etc/pam.d/probe",
         "rm -r /etc/pam-local /etc/pam.d/probe"),
    ]:
        before = root.run("cat /etc/pam.d/common-auth /var/lib/pam/auth").stdout
        root.run(setup)
        refused = root.run("dpkg -r localauth", check=False)
        assert refused.returncode != 0, setup
        assert named in refused.stderr and "still use pam_localauth.so" in refused.stderr, refused.stderr
        assert root.status().endswith(f"ok installed {UPGRADE}"), refused.stderr
        assert root.run(f"test -e {MODULE_PATH} && echo present").stdout.strip() == "present"
        root.run(undo)
        assert root.run("cat /etc/pam.d/common-auth /var/lib/pam/auth").stdout == before, \
            f"a refused removal changes nothing ({setup})"

    # Backups, comments and an include of common-auth itself do not hold
    # a removal up.
    root.run("cp /usr/share/localauth/pam.d/sudo /etc/pam.d/sudo~ && cp /usr/share/localauth/pam.d/sudo /etc/pam.d/sudo.orig && "
             "echo 'auth optional pam_permit.so # not pam_localauth.so' > /etc/pam.d/commented && "
             "echo '@include /etc/pam.d/common-auth' > /etc/pam.d/abs-common")

    # Remove: no stack names the module; configuration and state stay.
    # pam_fprintd's profile stays off (the administrator turned it off),
    # and the removal says so once, with the way back.
    removed = root.run("dpkg -r localauth")
    assert removed.stdout.count("pam-auth-update --enable fprintd") == 1, removed.stdout
    assert "pam_fprintd.so" not in root.run("cat /etc/pam.d/common-auth").stdout
    root.run("rm /etc/pam.d/sudo~ /etc/pam.d/sudo.orig /etc/pam.d/commented /etc/pam.d/abs-common")
    assert root.stacks_naming_the_module() == [], removed.stdout
    assert root.run(f"test -e {MODULE_PATH} || echo gone").stdout.strip() == "gone"
    assert root.status().startswith("deinstall ok config-files"), root.status()
    assert root.run("test -f /etc/security/localauth.conf && test -d /var/lib/localauth && echo kept").stdout.strip() == "kept"
    assert sudo_stack_password(root, PASSWORD).returncode == 0, "sudo works without the module"

    # Purge: the configuration and the state go too.
    root.run("dpkg -P localauth")
    assert root.status() == ""
    gone = root.run("for p in /etc/security/localauth.conf /etc/pam.d/localauth-passcode /var/lib/localauth "
                    "/usr/share/pam-configs/localauth; do test -e $p && echo $p; done; true")
    assert gone.stdout.split() == []
    assert root.stacks_naming_the_module() == []
    assert root.run(f"grep -r -l -E '{NAMES_MODULE}' /etc || true").stdout.split() == []
    assert root.run("grep -r -l /usr/share/localauth /etc/pam.d || true").stdout.split() == []


POLKIT_HELPER_UNIT = Path("/usr/lib/systemd/system/polkit-agent-helper@.service")


def test_the_polkit_drop_in_keeps_the_state_directory_writable(tmp_path):
    """polkit 127 and later run their agent helper in a read-only sandbox:
    the package's drop-in for that unit keeps the module's default state
    directory writable (declared in Options.swift), and the directory in
    /run where it counts while that one is read-only (RuntimeCounting.swift),
    which the package's tmpfiles entry makes at boot; where the unit ships
    (Debian 14's polkitd), systemd reads the drop-in without a complaint (a
    misspelled copy is reported, so the check reads it)."""
    default = re.search(r'public var stateDir: \[UInt8\] = literalBytes\("([^"]+)"\)',
                        (ROOT / "Sources/LocalAuth/Options.swift").read_text()).group(1)
    runtime = re.search(r'public static let directory: StaticString = "([^"]+)"',
                        (ROOT / "Sources/LocalAuth/RuntimeCounting.swift").read_text()).group(1)
    drop_in = (ROOT / "packaging/polkit-agent-helper-localauth.conf").read_text()
    writable = re.search(r"^ReadWritePaths=(.*)$", drop_in, re.M).group(1).split()
    assert [path.lstrip("-") for path in writable] == [default, runtime], drop_in
    assert re.search(rf"^d {re.escape(runtime)} 0700 root root -$", (ROOT / "packaging/localauth.tmpfiles").read_text(), re.M)
    if not POLKIT_HELPER_UNIT.exists():
        return   # polkit 126 and earlier: a setuid helper, no unit to check against
    units = tmp_path / "units"
    (units / f"{POLKIT_HELPER_UNIT.name}.d").mkdir(parents=True)
    shutil.copy(POLKIT_HELPER_UNIT, units)

    def verify(text):
        (units / f"{POLKIT_HELPER_UNIT.name}.d/50-localauth.conf").write_text(text)
        result = subprocess.run(["systemd-analyze", "verify", "polkit-agent-helper@1.service"], capture_output=True,
                                text=True, env=dict(os.environ, SYSTEMD_UNIT_PATH=f"{units}:"))
        return result.returncode, result.stdout + result.stderr
    assert verify(drop_in) == (0, "")
    code, said = verify(drop_in.replace("ReadWritePaths=", "ReadWritePath="))
    assert "Unknown key 'ReadWritePath'" in said, said
