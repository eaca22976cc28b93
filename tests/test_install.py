"""make install / uninstall into a DESTDIR: the module lands in the system's
PAM module directory (asked from pkg-config), with the passcode service."""
import subprocess
from pathlib import Path

from conftest import ROOT


def pam_module_directory():
    libdir = subprocess.run(["pkg-config", "--variable=libdir", "pam"], capture_output=True, text=True,
                            check=True).stdout.strip()
    return Path(libdir) / "security"


def test_install_and_uninstall_into_destdir(tmp_path):
    destdir = tmp_path / "stage"
    subprocess.run(["make", "-s", "install", f"DESTDIR={destdir}"], cwd=ROOT, check=True, capture_output=True)
    module = destdir / pam_module_directory().relative_to("/") / "pam_localauth.so"
    assert module.is_file() and (module.stat().st_mode & 0o777) == 0o644
    # The directory that holds pam_unix.so on this system.
    assert (pam_module_directory() / "pam_unix.so").exists()
    passcode = destdir / "etc/pam.d/localauth-passcode"
    assert passcode.read_text() == (ROOT / "pam.d/localauth-passcode").read_text()
    state = destdir / "var/lib/localauth"
    assert state.is_dir() and (state.stat().st_mode & 0o777) == 0o700
    subprocess.run(["make", "-s", "uninstall", f"DESTDIR={destdir}"], cwd=ROOT, check=True, capture_output=True)
    assert not module.exists() and not passcode.exists()
