"""The one factory of a test file's shared private world: the module-scoped
`rig` (fprintd on a private bus with the virtual device) and `world` (a
PrivateWorld over it: users, PAM files, the setuid helper, mount namespace)
fixtures that a file's tests share. A file says only what differs:

    rig = shared_rig(enroll=USER)
    world = shared_world("lockers", users={USER: (UID, PASSWORD)}, prepare=write_stacks)

The PamEnv world of the module's own tests (pam_wrapper, no helper) is
conftest.py's `pam` and `rig`."""
import inspect
import os

import pytest

from desktop import WORKER as GDM_WORKER
from fprint_rig import FprintRig
from private_world import PrivateWorld


def shared_rig(enroll=None, scope="module", **options):
    """A `rig` fixture (module-scoped unless `scope` says otherwise):
    FprintRig(**options), with `enroll`'s finger enrolled when the rig has
    started (None: none; a rig without polkit's stand-in enrolls through
    shared_world, once polkitd runs)."""

    @pytest.fixture(scope=scope)
    def rig():
        with FprintRig(**options) as rig:
            if enroll is not None:
                rig.enroll(enroll)
            yield rig

    return rig


def shared_world(name, users, *, prepare=None, enroll=None, needs_gdm_worker=False, **options):
    """A module-scoped `world` fixture over the file's `rig`: a PrivateWorld
    in a fresh directory named after `name`, with `users` ({name: (uid,
    password)}) and PrivateWorld's `options`. `prepare(world)` then writes
    what the file's tests need (stacks, configuration); when it is a
    generator it runs around the tests (what it starts before its yield, it
    stops after). `enroll`'s finger is enrolled after `prepare` (for a rig
    whose fprintd asks a polkitd that `prepare` starts). The world is closed
    however the file ends."""

    @pytest.fixture(scope="module")
    def world(rig, tmp_path_factory):
        if needs_gdm_worker and not GDM_WORKER.exists():
            pytest.skip("tests/support/programs/gdmworker.c is not built: run make test-artifacts")
        base = tmp_path_factory.mktemp(name)
        os.chmod(base, 0o755)
        world = PrivateWorld(base, rig, users=users, **options)
        around = None
        try:
            around = prepare(world) if prepare is not None else None
            if inspect.isgenerator(around):
                next(around)
            if enroll is not None:
                rig.enroll(enroll)
            yield world
            if inspect.isgenerator(around):
                next(around, None)
        finally:
            if inspect.isgenerator(around):
                around.close()
            world.close()

    return world
