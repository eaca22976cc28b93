"""Fixtures of the integration tests; the helpers they use live in
pamenv.py (the PAM world) and fprint_rig.py (fprintd)."""
import pytest

from pamenv import PamEnv, build


@pytest.fixture(scope="session", autouse=True)
def built():
    build()


@pytest.fixture
def pam(tmp_path):
    env = PamEnv(tmp_path)
    env.write_owner_stack("sudo")
    return env
