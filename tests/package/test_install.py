"""make install / uninstall into a DESTDIR, and the pam-auth-update profile.

- The module lands in the system's PAM module directory (asked from
  pkg-config, as the Makefile does), with the localauth command, the
  passcode service, the configuration file (never overwritten), the
  pam-auth-update profile, the man pages and the state directory.
- The profile is run through the real pam-auth-update in a private mount
  namespace: temporary copies of /etc/pam.d, /usr/share/pam-configs,
  /var/lib/pam (pam-auth-update's saved state) and /var/cache/debconf (its
  debconf answers) are bound over the originals, so the host's files are
  never changed (asserted). The common-auth it generates is linted with
  `localauth config --check` and run through real libpam (pam_wrapper).
"""
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pamenv import HELPER_PATH, MODULE, PAM_AUTH_ERR, PAM_MATRIX, PAM_SUCCESS, PASSWORDS, ROOT, localauth_command

PREFIX = Path("/usr/local")
PROFILE = ROOT / "config" / "pam-auth-update.localauth"


MANPAGES = {"man1": "localauth.1", "man5": "localauth.conf.5", "man8": "pam_localauth.8"}
OUR_CONTROL = "[success={} ignore=ignore authinfo_unavail=ignore default=die]"
OWNER_PROMPT = "Enter Password: "
MATRIX_PROMPT = "Password: "
ALICE = PASSWORDS["alice"]


def pkg_config(variable):
    return subprocess.run(["pkg-config", f"--variable={variable}", "pam"], capture_output=True, text=True,
                          check=False).stdout.strip()


def pam_module_directory():
    """As the Makefile asks: pam's securedir, else its libdir + /security."""
    securedir = pkg_config("securedir")
    return Path(securedir) if securedir else Path(pkg_config("libdir")) / "security"


def staged(destdir, path):
    return destdir / Path(path).relative_to("/")


def mode(path):
    return path.stat().st_mode & 0o7777


def make(target, destdir):
    result = subprocess.run(["make", "-s", target, f"DESTDIR={destdir}"], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, f"make {target} failed:\n{result.stdout}\n{result.stderr}"


def swift_toolchain():
    swift = shutil.which("swift")
    return Path(swift).resolve().parents[2] if swift else None  # /opt/swift/usr/bin/swift-driver -> /opt/swift


# ---------------------------------------------------------------------------
# make install / make uninstall

def test_install_and_uninstall_into_destdir(tmp_path):
    destdir = tmp_path / "stage"
    make("install", destdir)

    # The module, in the directory that holds pam_unix.so on this system.
    assert (pam_module_directory() / "pam_unix.so").exists()
    module = staged(destdir, pam_module_directory() / "pam_localauth.so")
    assert module.is_file() and mode(module) == 0o644
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(module)], capture_output=True, text=True,
                             check=True).stdout
    assert "pam_sm_authenticate" in symbols

    # The command: 0755, stripped, self-contained, runnable.
    tool = staged(destdir, PREFIX / "bin" / "localauth")
    assert tool.is_file() and mode(tool) == 0o755
    sections = subprocess.run(["readelf", "-S", "-W", str(tool)], capture_output=True, text=True, check=True).stdout
    assert ".symtab" not in sections, "the installed localauth is not stripped"
    helped = subprocess.run([str(tool), "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "usage: localauth" in helped.stdout
    libraries = subprocess.run(["ldd", str(tool)], capture_output=True, text=True, check=True).stdout
    assert "/opt/swift" not in libraries and "not found" not in libraries, libraries
    toolchain = swift_toolchain()
    if toolchain is not None and toolchain != Path("/"):
        assert str(toolchain) not in libraries, libraries

    # The setuid helper, where the module and the command start it: the
    # path declared once in the C shim is the one installed, the one the
    # Makefile reports, and the one compiled into the module and the tool.
    helper = staged(destdir, HELPER_PATH)
    reported = subprocess.run(["make", "-s", "--no-print-directory", "helper-path"], cwd=ROOT, capture_output=True, text=True)
    assert reported.stdout.strip() == HELPER_PATH, reported
    for binary in (staged(destdir, PREFIX / "bin/localauth"), MODULE):
        assert HELPER_PATH.encode() in Path(binary).read_bytes(), binary
    assert helper.is_file() and mode(helper) == 0o4755 and helper.stat().st_uid == 0
    direct = subprocess.run([str(helper)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert direct.returncode == 2 and "over a socket on its standard input" in direct.stderr, direct
    # The example stacks, beside (never over) the distribution's own files.
    for name in ("sudo", "i3lock", "swaylock", "xscreensaver", "xsecurelock", "hyprlock", "vlock"):
        example = staged(destdir, PREFIX / "share/localauth/pam.d" / name)
        assert example.read_text() == (ROOT / "pam.d" / name).read_text()
    assert not staged(destdir, "/etc/pam.d/i3lock").exists()

    # The passcode service.
    passcode = staged(destdir, "/etc/pam.d/localauth-passcode")
    assert passcode.read_text() == (ROOT / "pam.d/localauth-passcode").read_text() and mode(passcode) == 0o644

    # The configuration: all commented out, 0644 (the module reads only a
    # root-owned file that group and others cannot write).
    config = staged(destdir, "/etc/security/localauth.conf")
    assert config.read_text() == (ROOT / "config/localauth.conf").read_text() and mode(config) == 0o644
    assert config.stat().st_uid == os.geteuid()
    assert all(line.startswith("#") for line in config.read_text().splitlines() if line.strip())

    # The pam-auth-update profile and the man pages.
    profile = staged(destdir, "/usr/share/pam-configs/localauth")
    assert profile.read_text() == PROFILE.read_text() and mode(profile) == 0o644
    pages = [staged(destdir, PREFIX / "share/man" / section / name) for section, name in MANPAGES.items()]
    for page, name in zip(pages, MANPAGES.values()):
        assert page.read_text() == (ROOT / "man" / name).read_text() and mode(page) == 0o644

    # The state directory.
    state = staged(destdir, "/var/lib/localauth")
    assert state.is_dir() and mode(state) == 0o700

    # A second install keeps the administrator's configuration.
    config.write_text("# edited by the administrator\nmax_tries = 2\n")
    make("install", destdir)
    assert config.read_text() == "# edited by the administrator\nmax_tries = 2\n"

    # Uninstall removes everything but the configuration and the state.
    make("uninstall", destdir)
    for path in [module, tool, helper, passcode, profile, *pages,
                 staged(destdir, PREFIX / "share/localauth")]:
        assert not path.exists(), path
    assert config.read_text().startswith("# edited by the administrator")
    assert state.is_dir() and mode(state) == 0o700


# ---------------------------------------------------------------------------
# The pam-auth-update profile, through the real pam-auth-update

PRIVATE_BINDS = {  # host path -> name of its private copy
    "/etc/pam.d": "etc-pam.d",
    "/usr/share/pam-configs": "pam-configs",
    "/var/lib/pam": "var-lib-pam",
    "/var/cache/debconf": "debconf",
}


def host_fingerprint():
    """Digests of every file pam-auth-update could change on the host."""
    digests = {}
    for directory in PRIVATE_BINDS:
        for path in sorted(Path(directory).rglob("*")):
            if path.is_file() and not path.is_symlink():
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                digests[str(path)] = "link" if path.is_symlink() else "dir"
    return digests


class PrivatePam:
    """Private copies of the files pam-auth-update reads and writes; each
    run binds them over the originals in a new private mount namespace."""

    def __init__(self, base: Path):
        self.base = base
        for host, name in PRIVATE_BINDS.items():
            subprocess.run(["cp", "-a", host, str(base / name)], check=True)
        self.pam_d = base / "etc-pam.d"
        self.configs = base / "pam-configs"

    def run(self, *arguments):
        lines = ["set -e", "mount --make-rprivate /"]
        lines += [f"mount --bind '{self.base / name}' '{host}'" for host, name in PRIVATE_BINDS.items()]
        lines.append("exec pam-auth-update " + " ".join(arguments))
        result = subprocess.run(["unshare", "--mount", "bash", "-c", "\n".join(lines)], capture_output=True, text=True,
                                timeout=120, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C",
                                                  "DEBIAN_FRONTEND": "noninteractive"})
        assert result.returncode == 0, result.stdout + result.stderr
        if "Local modifications" in result.stdout + result.stderr:
            pytest.skip("this host's /etc/pam.d/common-* are locally modified: pam-auth-update leaves them alone")
        return result

    def common_auth(self):
        return (self.pam_d / "common-auth").read_text()

    def snapshot(self, name):
        copy = self.base / name
        shutil.copytree(self.pam_d, copy, symlinks=True)
        return copy


def auth_rules(text):
    """(control, module, arguments) of each auth line; brackets kept whole."""
    rules = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"^-?auth\s+(\[[^\]]*\]|\S+)\s+(\S+)\s*(.*)$", line)
        if match:
            rules.append((match.group(1), match.group(2), match.group(3).split()))
    return rules


@pytest.fixture(scope="module")
def profile_runs(tmp_path_factory):
    """Runs the profile through pam-auth-update: registered as a package
    would (--package), enabled, then disabled; snapshots of the private
    /etc/pam.d after each step."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a private mount namespace")
    for program in ("pam-auth-update", "unshare"):
        if not shutil.which(program, path="/usr/sbin:/usr/bin:/sbin:/bin"):
            pytest.skip(f"{program} is not installed")
    before = host_fingerprint()
    private = PrivatePam(tmp_path_factory.mktemp("pam-auth-update"))
    original = private.common_auth()
    shutil.copy(PROFILE, private.configs / "localauth")
    # Our passcode service, as make install puts it next to common-auth.
    shutil.copy(ROOT / "pam.d/localauth-passcode", private.pam_d / "localauth-passcode")
    runs = {"original": original}
    private.run("--package")
    runs["package"] = private.common_auth()
    runs["enable"] = private.run("--enable", "localauth").stdout
    runs["enabled"] = private.common_auth()
    runs["enabled_dir"] = private.snapshot("enabled-pam.d")
    private.run("--disable", "localauth")
    runs["disabled"] = private.common_auth()
    # Conflicts: fprintd. Enabling ours while pam_fprintd is on drops it.
    private.run("--enable", "fprintd")
    runs["fprintd"] = private.common_auth()
    runs["both_output"] = private.run("--enable", "localauth").stdout
    runs["both"] = private.common_auth()
    # The documented switch, in one command, and its undo.
    private.run("--disable", "localauth")
    private.run("--enable", "fprintd")
    runs["switch_output"] = private.run("--disable", "fprintd", "--enable", "localauth").stdout
    runs["switched"] = private.common_auth()
    runs["undo_output"] = private.run("--disable", "localauth", "--enable", "fprintd").stdout
    runs["undone"] = private.common_auth()
    private.run("--disable", "localauth", "fprintd")
    assert host_fingerprint() == before, "pam-auth-update changed the host's files"
    return runs


def test_installing_the_profile_does_not_enable_it(profile_runs):
    assert "pam_localauth.so" not in profile_runs["package"]
    assert auth_rules(profile_runs["package"]) == auth_rules(profile_runs["original"])


def test_enabled_profile_puts_our_line_first_jumping_past_pam_unix(profile_runs):
    rules = auth_rules(profile_runs["enabled"])
    control, module, arguments = rules[0]
    assert module == "pam_localauth.so" and arguments == []
    # pam-auth-update turned success=end into a count and kept the other keys.
    match = re.fullmatch(re.escape(OUR_CONTROL).replace(r"\{\}", r"(\d+)"), control)
    assert match, control
    landing = 1 + int(match.group(1))
    modules = [rule[1] for rule in rules]
    unix = modules.index("pam_unix.so")
    assert 0 < unix < landing < len(rules)
    assert modules[landing] == "pam_permit.so"
    assert "pam_deny.so" in modules[unix + 1:landing]
    assert not any(word in control for word in ("done", "end")) and "sufficient" not in control
    # pam_unix's own jump is unchanged in meaning: past pam_deny.
    assert rules[unix][0] == f"[success={landing - unix - 1} default=ignore]"


def test_enabled_stack_passes_the_lint(profile_runs, tmp_path):
    cli = localauth_binary()
    conf = tmp_path / "localauth.conf"
    shutil.copy(ROOT / "config/localauth.conf", conf)
    os.chmod(conf, 0o644)
    result = subprocess.run([str(cli), "config", "--check", str(conf), "--pam-dir", str(profile_runs["enabled_dir"])],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 error(s)" in result.stdout, result.stdout


def test_disable_removes_our_line(profile_runs):
    assert "pam_localauth.so" not in profile_runs["disabled"]
    assert auth_rules(profile_runs["disabled"]) == auth_rules(profile_runs["original"])


def test_profile_conflicts_with_pam_fprintd(profile_runs):
    assert "pam_fprintd.so" in profile_runs["fprintd"]
    both = [rule[1] for rule in auth_rules(profile_runs["both"])]
    assert both[0] == "pam_localauth.so" and "pam_fprintd.so" not in both
    # Enabling ours alone says so, in pam-auth-update's words.
    assert "Incompatible PAM profiles selected" in profile_runs["both_output"]


def test_the_documented_switch_from_pam_fprintd_is_clean_and_undone_in_one_command(profile_runs):
    """README's command: pam_fprintd's profile off and ours on, with no
    complaint; and back."""
    assert "Incompatible" not in profile_runs["switch_output"], profile_runs["switch_output"]
    assert auth_rules(profile_runs["switched"]) == auth_rules(profile_runs["both"])
    assert "Incompatible" not in profile_runs["undo_output"], profile_runs["undo_output"]
    assert auth_rules(profile_runs["undone"]) == auth_rules(profile_runs["fprintd"])
    for command in ("pam-auth-update --disable fprintd --enable localauth",
                    "pam-auth-update --disable localauth --enable fprintd"):
        assert command in (ROOT / "README.md").read_text(), command


def localauth_binary():
    return localauth_command()


def install_common_auth(pam, text, service="sudo"):
    """The generated common-auth as a pam_wrapper service: our module by
    absolute path with the test's state and configuration, pam_matrix for
    pam_unix (as test_shipped_stacks does); every other line as generated."""
    lines = []
    for line in text.splitlines():
        if not re.match(r"^-?auth\s", line):
            continue
        line = re.sub(r"\bpam_localauth\.so\b", f"{MODULE} state_dir={pam.state} conf={pam.conf}", line)
        line = re.sub(r"\bpam_unix\.so\b.*$", f"{PAM_MATRIX} passdb={pam.passdb}", line)
        lines.append(line)
    pam.write_service(service, lines)
    return lines


def test_enabled_common_auth_through_real_libpam(profile_runs, pam):
    lines = install_common_auth(pam, profile_runs["enabled"])
    assert str(MODULE) in lines[0] and str(PAM_MATRIX) in lines[1]
    good = pam.run(service="sudo", answers=[ALICE])
    assert good.code == PAM_SUCCESS, good.stdout + good.stderr
    assert good.prompts() == [OWNER_PROMPT]  # our prompt only: pam_unix was jumped over
    bad = pam.run(service="sudo", answers=["wrong", ALICE])
    assert bad.code == PAM_AUTH_ERR
    assert bad.prompts() == [OWNER_PROMPT]  # default=die: no second prompt from pam_unix
    assert pam.record().P == 1


def test_enabled_common_auth_out_of_scope_meets_pam_unix(profile_runs, pam):
    install_common_auth(pam, profile_runs["enabled"])
    # bob asking for alice: our module ignores, pam_unix (pam_matrix) decides.
    good = pam.run(service="sudo", user="alice", ruser="bob", answers=[ALICE])
    assert good.code == PAM_SUCCESS and good.prompts() == [MATRIX_PROMPT]
    bad = pam.run(service="sudo", user="alice", ruser="bob", answers=["wrong"])
    assert bad.code == PAM_AUTH_ERR and bad.prompts() == [MATRIX_PROMPT]
    assert pam.state_files() == []


# ---------------------------------------------------------------------------
# GDM's fingerprint stack: put in place and back, never over gdm3's silently

GDM3_FINGERPRINT = "#%PAM-1.0\nauth required pam_fprintd.so\n"   # as gdm3 ships it, in short


def run_gdm_script(script, pam_d, *arguments):
    """The installed script, with a private directory bound over /etc/pam.d."""
    command = f"mount --make-rprivate / && mount --bind '{pam_d}' /etc/pam.d && exec '{script}' " + " ".join(arguments)
    return subprocess.run(["unshare", "--mount", "sh", "-c", command], capture_output=True, text=True, timeout=60)


def test_the_gdm_fingerprint_stack_is_put_in_place_and_back(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for a private mount namespace")
    destdir = tmp_path / "stage"
    make("install", destdir)
    script = staged(destdir, PREFIX / "share/localauth/gdm-fingerprint")
    ours = (ROOT / "pam.d/gdm-fingerprint").read_text()
    assert staged(destdir, PREFIX / "share/localauth/pam.d/gdm-fingerprint").read_text() == ours
    assert mode(script) == 0o755
    pam_d = tmp_path / "pam.d"
    pam_d.mkdir()
    target = pam_d / "gdm-fingerprint"

    missing = run_gdm_script(script, pam_d, "enable")
    assert missing.returncode == 1 and "gdm3 is not installed" in missing.stderr, missing
    assert sorted(os.listdir(pam_d)) == []

    target.write_text(GDM3_FINGERPRINT)
    enabled = run_gdm_script(script, pam_d, "enable")
    assert enabled.returncode == 0, enabled
    assert target.read_text() == ours and mode(target) == 0o644
    assert (pam_d / "gdm-fingerprint.localauth-saved").read_text() == GDM3_FINGERPRINT
    assert "already" in run_gdm_script(script, pam_d, "enable").stdout
    assert run_gdm_script(script, pam_d, "status").stdout.startswith("enabled: ")

    # An edit of ours is kept aside when gdm3's comes back.
    target.write_text(ours + "# edited\n")
    assert run_gdm_script(script, pam_d, "status").stdout.startswith("enabled, then edited")
    disabled = run_gdm_script(script, pam_d, "disable")
    assert disabled.returncode == 0, disabled
    assert target.read_text() == GDM3_FINGERPRINT
    assert (pam_d / "gdm-fingerprint.localauth-edited").read_text() == ours + "# edited\n"
    assert not (pam_d / "gdm-fingerprint.localauth-saved").exists()
    assert run_gdm_script(script, pam_d, "status").stdout.startswith("disabled: ")
    again = run_gdm_script(script, pam_d, "disable")
    assert again.returncode == 1 and "nothing to undo" in again.stderr, again
    assert target.read_text() == GDM3_FINGERPRINT

    # Enabled twice over an edit: refused, nothing changed.
    assert run_gdm_script(script, pam_d, "enable").returncode == 0
    target.write_text(GDM3_FINGERPRINT + "# gdm3 changed it\n")
    refused = run_gdm_script(script, pam_d, "enable")
    assert refused.returncode == 1 and "run disable first" in refused.stderr, refused
    assert target.read_text() == GDM3_FINGERPRINT + "# gdm3 changed it\n"
    assert run_gdm_script(script, pam_d, "bogus").returncode == 2


def test_the_kde_fingerprint_stack_is_put_in_place_and_back(tmp_path):
    """Plasma 6's kde-fingerprint: the same script under the other name.
    Where the distribution ships no such file, enable creates ours (with a
    marker) and disable removes it; one it ships is kept and put back."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a private mount namespace")
    destdir = tmp_path / "stage"
    make("install", destdir)
    script = staged(destdir, PREFIX / "share/localauth/kde-fingerprint")
    ours = (ROOT / "pam.d/kde-fingerprint").read_text()
    assert staged(destdir, PREFIX / "share/localauth/pam.d/kde-fingerprint").read_text() == ours
    assert mode(script) == 0o755
    pam_d = tmp_path / "pam.d"
    pam_d.mkdir()
    target = pam_d / "kde-fingerprint"

    enabled = run_gdm_script(script, pam_d, "enable")
    assert enabled.returncode == 0, enabled
    assert "password_services = gdm-password, kde" in enabled.stdout
    assert target.read_text() == ours and mode(target) == 0o644
    assert sorted(os.listdir(pam_d)) == ["kde-fingerprint", "kde-fingerprint.localauth-none"]
    assert run_gdm_script(script, pam_d, "status").stdout.startswith("enabled: ")
    disabled = run_gdm_script(script, pam_d, "disable")
    assert disabled.returncode == 0 and "removed" in disabled.stdout, disabled
    assert sorted(os.listdir(pam_d)) == []
    assert run_gdm_script(script, pam_d, "disable").returncode == 1

    shipped = "#%PAM-1.0\nauth required pam_fprintd.so\n"
    target.write_text(shipped)
    assert run_gdm_script(script, pam_d, "enable").returncode == 0
    assert (pam_d / "kde-fingerprint.localauth-saved").read_text() == shipped
    assert run_gdm_script(script, pam_d, "disable").returncode == 0
    assert target.read_text() == shipped and sorted(os.listdir(pam_d)) == ["kde-fingerprint"]

    # Nothing is written through a symbolic link, and an earlier edited
    # copy is never overwritten.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not PAM's\n")
    (pam_d / "kde-fingerprint.localauth-saved").symlink_to(elsewhere)
    refused = run_gdm_script(script, pam_d, "enable")
    assert refused.returncode == 1 and "symbolic link" in refused.stderr, refused
    assert elsewhere.read_text() == "not PAM's\n" and target.read_text() == shipped
    (pam_d / "kde-fingerprint.localauth-saved").unlink()
    assert run_gdm_script(script, pam_d, "enable").returncode == 0
    target.write_text(ours + "# edited\n")
    (pam_d / "kde-fingerprint.localauth-edited").write_text("an earlier edit\n")
    refused = run_gdm_script(script, pam_d, "disable")
    assert refused.returncode == 1 and "move it away first" in refused.stderr, refused
    assert (pam_d / "kde-fingerprint.localauth-edited").read_text() == "an earlier edit\n"
    assert target.read_text() == ours + "# edited\n"
