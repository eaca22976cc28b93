"""The package's prerm on its own, run as dpkg runs it (/bin/sh, "remove")
against a throwaway root named by DPKG_ROOT: its etc/pam.d and
usr/lib/pam.d trees, and a stand-in pam-auth-update first on PATH that
records its call and takes the profile's lines out of the common-* files,
as the real one does.

prerm must read the stacks as libpam 1.5 reads them: the stacks of
/usr/lib/pam.d that no file of /etc/pam.d hides, lines joined and cut where
libpam joins and cuts them, includes however deep and substacks as deep as
libpam follows them, and each file of an include loop read once. Nothing
here needs a build.
"""
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRERM = ROOT / "packaging/debian/prerm"
MODULE_LINE = "auth [success=end ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so"
# A stack outside /etc/pam.d that uses the module: found only through an include.
FP = "/etc/pam-local/fp"
# common-auth as pam-auth-update writes it with the profile enabled.
COMMON_AUTH = f"""# here are the per-package modules (the "Primary" block)
{MODULE_LINE}
auth\t[success=1 default=ignore]\tpam_unix.so nullok
# here's the fallback if no module succeeds
auth\trequisite\t\t\tpam_deny.so
auth\trequired\t\t\tpam_permit.so
# and here are more per-package modules (the "Additional" block)
# end of pam-auth-update config
"""
# Longer than the scripts take with a few files; far shorter than a walk
# that follows every path through an include loop.
TIMEOUT = 20


@pytest.fixture(scope="session", autouse=True)
def built():
    """prerm is a shell script: nothing is built for these tests."""


class FakeRoot:
    def __init__(self, base):
        self.root = base / "root"
        for tree in ("etc/pam.d", "usr/lib/pam.d"):
            (self.root / tree).mkdir(parents=True)
        self.calls = base / "pam-auth-update.calls"
        self.bin = base / "bin"
        self.bin.mkdir()
        stand_in = self.bin / "pam-auth-update"
        stand_in.write_text(f"""#!/bin/sh
echo "$*" >> '{self.calls}'
for file in '{self.root}'/etc/pam.d/common-*; do
    [ ! -f "$file" ] || sed -i '/pam_localauth\\.so/d' "$file"
done
""")
        stand_in.chmod(0o755)

    def write(self, path, text):
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def append(self, path, text):
        with open(self.root / path.lstrip("/"), "a") as file:
            file.write(text)

    def contents(self):
        return {path: path.read_bytes() for path in sorted(self.root.rglob("*")) if path.is_file()}

    def remove(self):
        """prerm remove, in a session of its own: on a timeout the whole of
        it is stopped, subshells too."""
        process = subprocess.Popen(["/bin/sh", str(PRERM), "remove"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True,
                                   env={"DPKG_ROOT": str(self.root), "PATH": f"{self.bin}:/usr/sbin:/usr/bin:/sbin:/bin",
                                        "LC_ALL": "C.UTF-8"})
        try:
            out, err = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"prerm still ran after {TIMEOUT} s")
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture
def fake(tmp_path):
    return FakeRoot(tmp_path)


def assert_refused(fake, named):
    """Refused before pam-auth-update runs, with exactly these files named
    and nothing changed."""
    before = fake.contents()
    result = fake.remove()
    assert result.returncode != 0, result.stderr
    assert "still use pam_localauth.so" in result.stderr, result.stderr
    listed = [line.strip() for line in result.stderr.splitlines() if line.startswith("  ")]
    assert listed == [f"{fake.root}{path}" for path in named], result.stderr
    assert not fake.calls.exists(), "pam-auth-update ran"
    assert fake.contents() == before, "a refused removal changes nothing"


def assert_allowed(fake):
    result = fake.remove()
    assert result.returncode == 0, result.stderr
    assert fake.calls.read_text() == f"--root {fake.root} --package --remove localauth\n"
    fake.calls.unlink()


def test_a_stack_in_usr_lib_pam_d_holds_removal_up_unless_etc_pam_d_hides_it(fake):
    fake.write("/etc/pam.d/common-auth", COMMON_AUTH)
    fake.write("/etc/pam.d/sudo", "@include common-auth\n")
    # A vendor stack that only includes common-auth is looked at as one of
    # /etc/pam.d is: the profile's line there goes with pam-auth-update.
    fake.write("/usr/lib/pam.d/vendor-sudo", "@include common-auth\n")
    fake.write("/usr/lib/pam.d/polkit-1", f"#%PAM-1.0\n{MODULE_LINE}\n@include common-auth\n")
    assert_refused(fake, ["/usr/lib/pam.d/polkit-1"])

    # Through a substack of /usr/lib/pam.d, which no file of /etc/pam.d hides.
    fake.write("/usr/lib/pam.d/polkit-1", "auth substack polkit-fp\n")
    fake.write("/usr/lib/pam.d/polkit-fp", f"{MODULE_LINE}\n")
    assert_refused(fake, ["/usr/lib/pam.d/polkit-1", "/usr/lib/pam.d/polkit-fp"])

    # A file of the same name in /etc/pam.d is what libpam reads instead.
    fake.write("/etc/pam.d/polkit-1", "@include common-auth\n")
    fake.write("/etc/pam.d/polkit-fp", "auth required pam_permit.so\n")
    assert_allowed(fake)


def test_common_files_count_for_what_is_outside_their_block(fake):
    """Outside the block pam-auth-update writes, a common-* file is read as
    libpam reads it, includes and continued lines too, before anything is
    changed."""
    fake.write(FP, f"{MODULE_LINE}\n")
    fake.write("/etc/pam.d/common-auth", f"@include \\ \n\t{FP}\n" + COMMON_AUTH)
    fake.write("/etc/pam.d/sudo", "@include common-auth\n")
    assert_refused(fake, ["/etc/pam.d/common-auth"])
    fake.write("/etc/pam.d/common-auth", COMMON_AUTH)
    assert_allowed(fake)


# libpam 1.5 reads a line in pieces of at most 1023 bytes; a piece that is
# blank or starts with "#" is passed over, even inside a continued line; a
# "#" elsewhere ends the line; a "\" with nothing but spaces and tabs after
# it joins the next piece; a line still continued at the end of the file
# is dropped.
CONTINUED = {
    "the module after a backslash and spaces": ("auth [default=die] \\  \n   pam_localauth.so\n", True),
    "an include after a backslash and spaces": (f"@include \\   \n    {FP}\n", True),
    "an include after a backslash and a tab": (f"auth include \\\t\n\t{FP}\n", True),
    "an include after a backslash, spaces and tabs": (f"auth substack \\ \t \n{FP}\n", True),
    "a blank line inside a continued line": (f"@include \\\n\n   \n{FP}\n", True),
    "a comment line inside a continued line": (f"auth include \\\n# the reader's stack:\n{FP}\n", True),
    "a comment ending in a backslash inside a continued line": (f"@include \\\n  # next: \\\n{FP}\n", True),
    "a comment line longer than libpam reads at once": ("#" + "-" * 1022 + MODULE_LINE + "\n", True),
    "an include after 1023 bytes of a line": ("auth optional pam_permit.so " + "x" * 995 + f"@include {FP}\n", True),
    "a backslash before a comment joins nothing": (f"@include \\# not continued\n{FP}\n", False),
    "a line continued into nothing but comments is dropped": (
        f"auth required pam_permit.so\n{MODULE_LINE} \\\n# end of the file\n\n", False),
}


@pytest.mark.parametrize("text, used", CONTINUED.values(), ids=CONTINUED.keys())
def test_lines_are_joined_and_cut_where_libpam_joins_and_cuts_them(fake, text, used):
    fake.write(FP, f"{MODULE_LINE}\n")
    fake.write("/etc/pam.d/login-fp", text)
    if used:
        assert_refused(fake, ["/etc/pam.d/login-fp"])
    else:
        assert_allowed(fake)


INCLUDE_FIELDS = {
    "-@include": f"-@include {FP}\n",
    "a bracketed include keyword": f"auth [include] {FP}\n",
    "a bracketed target": f"@INCLUDE [{FP}]\n",
}


@pytest.mark.parametrize("text", INCLUDE_FIELDS.values(), ids=INCLUDE_FIELDS.keys())
def test_include_fields_are_split_as_libpam_splits_them(fake, text):
    fake.write(FP, f"{MODULE_LINE}\n")
    fake.write("/etc/pam.d/login-fp", text)
    assert_refused(fake, ["/etc/pam.d/login-fp"])


LOOPS = {
    "a file including itself twice": ({"/etc/pam.d/loop": "@include loop\n@include loop\n"}, "/etc/pam.d/loop",
                                      ["/etc/pam.d/loop"]),
    "two files including each other": ({"/etc/pam.d/login-fp": "@include /etc/pam-local/a\n",
                                        "/etc/pam-local/a": "auth include /etc/pam-local/b\naccount include /etc/pam-local/b\n",
                                        "/etc/pam-local/b": "auth include /etc/pam-local/a\naccount include /etc/pam-local/a\n"},
                                       "/etc/pam-local/b", ["/etc/pam.d/login-fp"]),
    "a file taking itself as a substack": ({"/etc/pam.d/loop": "auth substack loop\naccount substack loop\n"},
                                           "/etc/pam.d/loop", ["/etc/pam.d/loop"]),
}


@pytest.mark.parametrize("files, user, named", LOOPS.values(), ids=LOOPS.keys())
def test_include_loops_are_walked_once(fake, files, user, named):
    for path, text in files.items():
        fake.write(path, text)
    assert_allowed(fake)
    fake.append(user, f"{MODULE_LINE}\n")
    assert_refused(fake, named)


def chain(fake, keyword, length):
    """/etc/pam.d/login-fp, then `length` files each taking the next with
    `keyword`; the last uses the module."""
    fake.write("/etc/pam.d/login-fp", f"{keyword} /etc/pam-local/s1\n")
    for index in range(1, length + 1):
        last = index == length
        fake.write(f"/etc/pam-local/s{index}", f"{MODULE_LINE}\n" if last else f"{keyword} /etc/pam-local/s{index + 1}\n")


def test_includes_are_followed_however_deep_and_substacks_as_deep_as_libpam_goes(fake):
    # An include adds no level: libpam 1.5 follows a chain of them to its end.
    chain(fake, "@include", 24)
    assert_refused(fake, ["/etc/pam.d/login-fp"])
    chain(fake, "auth include", 24)
    assert_refused(fake, ["/etc/pam.d/login-fp"])
    # A substack adds one; libpam loads nothing 16 below the stack.
    for path in (fake.root / "etc/pam-local").iterdir():
        path.unlink()
    chain(fake, "auth substack", 15)
    assert_refused(fake, ["/etc/pam.d/login-fp"])
    chain(fake, "auth substack", 16)
    assert_allowed(fake)


@pytest.mark.parametrize("fprintd_profile, enabled, said", [
    (True, False, True),     # turned off for localauth (or never on): said, with the way back
    (True, True, False),     # still on: nothing to say
    (False, False, False),   # libpam-fprintd not installed: nothing to say
])
def test_removal_says_once_when_pam_fprintds_profile_is_still_off(fake, fprintd_profile, enabled, said):
    """The removal never turns pam_fprintd's profile back on behind an
    administrator's --disable; it says that the fingerprint now works
    nowhere and how to turn the profile back on, once."""
    fake.write("/etc/pam.d/common-auth", COMMON_AUTH)
    if fprintd_profile:
        fake.write("/usr/share/pam-configs/fprintd", "Name: Fingerprint authentication\nDefault: yes\n")
    fake.write("/var/lib/pam/auth", "Module: unix\n" + ("Module: fprintd\n" if enabled else ""))
    result = fake.remove()
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("pam-auth-update --enable fprintd") == (1 if said else 0), result.stdout
    assert fake.calls.read_text() == f"--root {fake.root} --package --remove localauth\n"
