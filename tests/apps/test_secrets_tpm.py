"""The secrets' machine key sealed to a TPM 2.0: the real setuid helper,
tpm2-tss, and a real software TPM (swtpm) the root-only configuration names
(`tpm = swtpm:PORT`), in the secrets' world (test_secrets.py). The machine
key is then never on disk in the clear; a store moved to another TPM, or a
TPM cleared, opens nothing with a finger alone, and the user's password
heals it; a TPM out of reach changes nothing."""
import json
import os
import subprocess

import pytest

from pamenv import localauth_command
from software_tpm import SoftwareTPM
from test_secrets import (MATCH, UID, USER, first_store, load_asking_the_password, load_with, password_typed, rig,
                          secret_command, store, terminal, user_directory, w, world)

__all__ = ["rig", "w", "world"]   # the secrets' world and rig, shared with test_secrets.py


@pytest.fixture
def tpm(w):
    software = SoftwareTPM().start()
    w.write_config([f"tpm = swtpm:{software.port}"])
    try:
        yield software
    finally:
        w.write_config([])
        software.stop()


def sealed_key(w):
    return w.state / "secrets" / "machine.key.tpm"


def file_key(w):
    return w.state / "secrets" / "machine.key"


def status(w, as_root=False):
    """`localauth status --json`'s secrets key, as the user or (`as_root`)
    as root for the user: only root can look into the state directory."""
    argv = w.argv(localauth_command(), "status", "--json", *(["--user", USER] if as_root else []), uid=None if as_root else UID)
    proc = subprocess.run(argv, env=w.env(None if as_root else USER), capture_output=True, timeout=60, check=True)
    return json.loads(proc.stdout)["secrets_key"]


def test_the_machine_key_is_sealed_and_a_fresh_tpm_opens_nothing(w, rig, tpm):
    """The first store seals the machine key to the TPM (no key file in the
    clear); a finger loads the secret. The same store before a TPM with a
    fresh state (another machine's) gives a finger nothing: the finger-only
    item waits for the password, the other asks it alone, and the log says
    why."""
    first_store(w, "mail", "imap-pass")
    assert store(w, "finger-only", "f-secret", access="biometry") == (0, "")
    assert sealed_key(w).exists() and not file_key(w).exists()
    assert status(w) == {"protection": "tpm", "text": f"sealed to the software TPM at 127.0.0.1:{tpm.port} (for tests)"}
    code, text = load_with(w, rig, "finger-only", [MATCH])
    assert code == 0 and "f-secret" in text, text
    before = sealed_key(w).read_bytes()

    tpm.start()   # another machine's TPM: the same port, a state that never saw this store
    mark = w.syslog.mark()
    code, text = load_with(w, rig, "finger-only", [])
    assert code == 33 and "f-secret" not in text, text
    assert any("the TPM no longer opens the sealed machine key" in line for line in w.syslog.since(mark)), w.syslog.since(mark)
    assert sealed_key(w).read_bytes() != before and not file_key(w).exists()
    text = load_asking_the_password(w, "mail")
    assert "imap-pass" in text and "Swipe" not in text, text
    assert w.counts(UID) == (0, 0)


def test_a_cleared_tpm_is_healed_by_the_password(w, rig, tpm):
    """TPM2_Clear: the sealed key no longer loads. The password, asked once,
    opens the user's key from its password copy and seals a new machine
    copy; after it the finger alone opens both items again."""
    first_store(w, "mail", "imap-pass")
    assert store(w, "finger-only", "f-secret", access="biometry") == (0, "")
    tpm.clear()
    code, text = load_with(w, rig, "finger-only", [])
    assert code == 33 and "f-secret" not in text, text
    text = load_asking_the_password(w, "mail")
    assert "imap-pass" in text, text
    code, text = load_with(w, rig, "finger-only", [MATCH])
    assert code == 0 and "f-secret" in text, text
    code, text = load_with(w, rig, "mail", [MATCH])
    assert code == 0 and "imap-pass" in text, text


def test_a_root_only_key_is_sealed_once_a_tpm_is_named(w, rig, tpm):
    """Secrets kept before the TPM was configured: their root-only machine
    key is sealed as it is (nothing to heal), and its file removed."""
    w.write_config(["tpm = off"])
    first_store(w, "mail", "imap-pass")
    assert file_key(w).exists() and not sealed_key(w).exists()
    w.write_config([f"tpm = swtpm:{tpm.port}"])
    mark = w.syslog.mark()
    code, text = load_with(w, rig, "mail", [MATCH])
    assert code == 0 and "imap-pass" in text, text
    assert sealed_key(w).exists() and not file_key(w).exists()
    assert any("now sealed to the TPM" in line for line in w.syslog.since(mark)), w.syslog.since(mark)


def test_a_tpm_out_of_reach_changes_nothing(w, rig, tpm):
    """The TPM that sealed the key does not answer: the load fails without
    a prompt or a charge, the sealed key stays as it was, no key is made in
    its place, and the log names the cause and the way out."""
    first_store(w, "mail", "imap-pass")
    before = sealed_key(w).read_bytes()
    items = sorted(p.name for p in user_directory(w).iterdir())
    tpm.stop()
    mark = w.syslog.mark()
    code, text = load_with(w, rig, "mail", [])
    assert code == 34 and "imap-pass" not in text and "Swipe" not in text, text
    assert sealed_key(w).read_bytes() == before and not file_key(w).exists()
    assert sorted(p.name for p in user_directory(w).iterdir()) == items
    assert any("cannot be reached" in line for line in w.syslog.since(mark)), w.syslog.since(mark)
    assert w.counts(UID) == (0, 0)


def test_a_key_file_left_beside_its_sealed_copy_is_removed_only_if_it_is_the_same_key(w, rig, tpm):
    """A crash between sealing a root-only key and removing its file leaves
    both: the next request removes the file (the key must not stay on the
    disk in the clear). A file with another key (made while `tpm = off`)
    is kept: it still opens the copies made under it; the log says so."""
    w.write_config(["tpm = off"])
    first_store(w, "mail", "imap-pass")
    leftover = file_key(w).read_bytes()
    w.write_config([f"tpm = swtpm:{tpm.port}"])
    code, text = load_with(w, rig, "mail", [MATCH])
    assert code == 0 and not file_key(w).exists() and sealed_key(w).exists(), text
    file_key(w).write_bytes(leftover)          # as a crash before its removal leaves it
    file_key(w).chmod(0o600)
    code, text = load_with(w, rig, "mail", [MATCH])
    assert code == 0 and "imap-pass" in text, text
    assert not file_key(w).exists()
    assert "lies beside it" not in status(w, as_root=True)["text"]

    other = os.urandom(32)
    file_key(w).write_bytes(other)
    file_key(w).chmod(0o600)
    mark = w.syslog.mark()
    code, text = load_with(w, rig, "mail", [MATCH])
    assert code == 0 and "imap-pass" in text, text
    assert file_key(w).read_bytes() == other
    assert any("made while tpm = off" in line for line in w.syslog.since(mark)), w.syslog.since(mark)
    # Root's status says so; the user's cannot look.
    assert "a root-only key file made while tpm = off lies beside it" in status(w, as_root=True)["text"]
    assert "lies beside it" not in status(w)["text"]
    # A file of that name that is no key (cut short, or others may read it) is not called one.
    for content, mode in ((other[:5], 0o600), (other, 0o644)):
        file_key(w).write_bytes(content)
        file_key(w).chmod(mode)
        assert "lies beside it" not in status(w, as_root=True)["text"]
    file_key(w).write_bytes(other)
    file_key(w).chmod(0o600)
    # Nor is a key in a secrets directory others may read, which the secrets refuse.
    file_key(w).parent.chmod(0o755)
    try:
        assert "lies beside it" not in status(w, as_root=True)["text"]
    finally:
        file_key(w).parent.chmod(0o700)
    assert "a root-only key file made while tpm = off lies beside it" in status(w, as_root=True)["text"]


def test_a_device_that_is_no_device_is_never_used(w, rig):
    """`tpm = PATH` names a TPM's character device; a regular file there
    (or a socket someone made) is not talked to: the first store, its
    password typed, fails; nothing is written, no key is made."""
    fake = w.state.parent / "not-a-tpm"
    fake.write_bytes(b"")
    w.write_config([f"tpm = {fake}"])
    try:
        password_typed(terminal(w, f"printf %s imap-pass | {secret_command('store', 'mail')}; code=$?; echo; echo exit=$code"),
                       code=34)
        assert not (w.state / "secrets" / "machine.key").exists() and not sealed_key(w).exists()
        assert fake.read_bytes() == b""
    finally:
        w.write_config([])
        fake.unlink()
