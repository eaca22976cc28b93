"""Shared fixtures for the integration tests (see pamenv.py)."""
import pytest

from pamenv import *  # noqa: F401,F403 (tests import these names from conftest)
from pamenv import PamEnv, build


@pytest.fixture(scope="session", autouse=True)
def built():
    build()


@pytest.fixture
def pam(tmp_path):
    env = PamEnv(tmp_path)
    env.write_owner_stack("sudo")
    return env
