"""`make test` from a clone anywhere: under /tmp, which the suite's private
/tmp covers; under a directory the unprivileged test users cannot enter
(`mktemp -d`, root's home); under a path with a space in it.

Each row puts this checkout at such a path (a bind mount in a mount
namespace of the test's own, so nothing is cloned or built again) and runs
what `make test` runs there: tools/isolated with LOCALAUTH_ISOLATED cleared
(the suite sets it, and it would make tools/isolated skip the isolation
under test), first to list the private /tmp (it holds the way to the clone
and nothing of the /tmp the suite was started with), then a subset of the
suite that needs both: pam_wrapper's /tmp/pam.X directories, and the
module and the setuid helper run from the clone's build directory by an
unprivileged user. The artifacts are this checkout's: the run is told they
are built (LOCALAUTH_TESTS_BUILT), since SwiftPM, which records absolute
paths, cannot build again at another path of the same checkout."""
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pamenv import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces)")

# The module and the setuid helper as an unprivileged locker user uses them,
# with pam_wrapper's directories in /tmp.
SUBSET = ["tests/programs/test_helper_client.py::test_locker_password_unlocks_through_the_helper"]
MARKER = "localauth-clone-test-marker"

# (where the clone is, the directory above it that others cannot enter)
ROWS = {
    "under /tmp": ("/tmp/localauth", None),
    "under a mktemp -d directory": ("/tmp/tmp.Clone0700/localauth", "/tmp/tmp.Clone0700"),
    "under root's home": ("/root/localauth", "/root"),
    "under a path with a space": ("/tmp/tmp.Space 0700/local auth", "/tmp/tmp.Space 0700"),
}


def _clone_at(clone: str, closed: str | None, command: list[str]) -> subprocess.CompletedProcess:
    """Runs `command` from this checkout seen at `clone`, with `closed`
    (if any) of mode 0700, in a mount namespace that goes when it ends.
    Root's home is made a fresh 0700 tmpfs there, so the machine's is
    neither used nor changed."""
    script = """
        clone=$1 closed=$2 root=$3; shift 3
        if [ "$closed" = /root ]; then mount -t tmpfs -o mode=0700,size=1m clone-test-home /root
        elif [ -n "$closed" ]; then mkdir -p "$closed"; chmod 0700 "$closed"; fi
        mkdir -p "$clone"
        mount --bind "$root" "$clone"
        cd "$clone"
        exec "$@"
    """
    environment = {key: value for key, value in os.environ.items() if key != "LOCALAUTH_ISOLATED"}
    environment["LOCALAUTH_TESTS_BUILT"] = "1"
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-euc", script, "sh",
                               clone, closed or "", str(ROOT), *command],
                              capture_output=True, text=True, env=environment, timeout=240, stdin=subprocess.DEVNULL)
    finally:
        top = Path("/tmp") / Path(clone).relative_to("/").parts[1] if clone.startswith("/tmp/") else None
        if top is not None:
            shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def marker():
    """An entry in the /tmp the suite runs with, which a run through
    tools/isolated must not meet."""
    path = Path("/tmp") / MARKER
    path.write_text("not the suite's\n")
    yield path
    path.unlink()


@pytest.mark.parametrize("row", ROWS)
def test_the_private_tmp_holds_only_the_way_to_the_clone(row, marker):
    clone, closed = ROWS[row]
    listing = "find /tmp -mindepth 1 -maxdepth 2 -not -path \"$0/*\" -print; stat -c '%a %n' \"$0\"/.. \"$0\"/tools"
    run = _clone_at(clone, closed, ["tools/isolated", "sh", "-c", listing, clone])
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    parts = Path(clone).parts
    expected_tmp = {str(Path(*parts[:depth])) for depth in range(3, min(len(parts), 4) + 1)} if clone.startswith("/tmp/") else set()
    found_tmp = set(lines[:-2])
    assert MARKER not in run.stdout
    assert found_tmp == expected_tmp, f"the private /tmp holds {sorted(found_tmp)}"
    parent_mode, tools_mode = (int(line.split()[0], 8) for line in lines[-2:])
    assert parent_mode & 0o001, f"others cannot enter the directory above the clone: {lines[-2]}"
    assert tools_mode & 0o005 == 0o005, lines[-1]


@pytest.mark.parametrize("row", ROWS)
def test_the_suite_runs_from_a_clone(row, marker):
    clone, closed = ROWS[row]
    run = _clone_at(clone, closed, ["tools/isolated", "/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET])
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"from {shlex.quote(clone)}:\n{output[-3000:]}"
    assert f"{len(SUBSET)} passed" in run.stdout, output[-3000:]
    assert "left behind" not in output
