"""Apple's LARight, LARightStore and LASecret end to end: la-app-probe (an
app over the LocalAuthentication library with a scripted GUI presenter)
through the real setuid helper, the rig's fprintd on libfprint's virtual
device and real pam_unix, in the secrets' world (test_secrets.py). A
right's secret is the same item `localauth secret` keeps: saved by the
app, released to it only by the authorization its requirement asks, gone
from it after deauthorize, and never another user's."""
import subprocess

from pamenv import swift_bin
from test_secrets import (MATCH, MISS, OTHER, OTHER_UID, PASSWORD, UID, USER, item_path, rig, run, seed_fingerprint_failures,
                          w, world)

__all__ = ["rig", "w", "world"]   # the secrets' world and rig, shared with test_secrets.py


def probe(w, *args, uid=UID, user=USER):
    """la-app-probe --right ... as the user, to its end. -> (exit code, its lines)"""
    proc = subprocess.run(w.argv(str(swift_bin() / "la-app-probe"), *args, uid=uid), env=w.env(user), capture_output=True,
                          text=True, timeout=90, start_new_session=True)
    return proc.returncode, proc.stdout.splitlines()


def save(w, name, value, access="default", answers=()):
    args = ["--right", "save", name, "--secret", value, "--access", access]
    for answer in answers:
        args += ["--answer", answer]
    return probe(w, *args)


def load(w, rig, name, feed, answers=(), uid=UID, user=USER):
    if feed:
        rig.feed(feed)
    args = ["--right", "load", name, "--reason", "Open the vault"]
    for answer in answers:
        args += ["--answer", answer]
    try:
        return probe(w, *args, uid=uid, user=user)
    finally:
        if feed:
            rig.feed_wait(timeout=30)


def test_a_saved_secret_is_released_by_the_finger_and_gone_after_deauthorize(w, rig):
    """The app's first save asks the account's password through its own
    presenter (the user's key is made with it); the item is the store's.
    `right(forIdentifier:)` then `authorize` is one load: the finger, the
    secret, the state authorized; after `deauthorize` the secret cannot be
    read. Nothing is charged."""
    code, lines = save(w, "vault", "v-secret-1", answers=[PASSWORD])
    assert code == 0 and lines[-1] == "result: success", lines
    assert item_path(w, "vault").exists()
    assert run(w, "list")[1] == b"vault\n"
    code, lines = load(w, rig, "vault", [MATCH])
    assert code == 0, lines
    # The sheet names the secret before the app's reason (the helper's doing).
    assert lines[:3] == ["begin: Open the vault",
                         'info: Your secret "vault": Open the vault. Swipe your finger across the fingerprint reader.',
                         "dismiss"], lines
    assert "state: authorized" in lines and "secret: v-secret-1" in lines, lines
    assert "after deauthorize: notInteractive -1004" in lines, lines
    assert w.counts(UID) == (0, 0)


def test_a_finger_only_right_is_locked_out_and_a_default_one_asks_the_password(w, rig):
    """With the finger locked out, a `.biometry` right fails with
    biometryLockout and releases nothing; a `.default` one asks the
    password, which releases its secret."""
    assert save(w, "mail", "m-secret", answers=[PASSWORD])[0] == 0
    assert save(w, "finger", "f-secret", access="biometry")[0] == 0
    seed_fingerprint_failures(w, 5)
    code, lines = load(w, rig, "finger", [])
    assert code == 1 and lines[-1] == "result: biometryLockout -8", lines
    assert not any("f-secret" in line for line in lines), lines
    code, lines = load(w, rig, "mail", [], answers=[PASSWORD])
    assert code == 0 and "secret: m-secret" in lines, lines


def test_a_miss_is_counted_and_another_user_finds_no_right(w, rig):
    """A finger not recognized is charged; another user asking for the
    same identifier finds nothing (their own store has no such right), and
    nothing of the secret reaches them."""
    assert save(w, "vault", "v-secret-2", answers=[PASSWORD])[0] == 0
    code, lines = load(w, rig, "vault", [MISS, MISS, MISS], answers=["<cancel>"])
    assert code == 1 and not any("v-secret-2" in line for line in lines), lines
    assert w.counts(UID)[0] == 3
    code, lines = load(w, rig, "vault", [], uid=OTHER_UID, user=OTHER)
    assert code == 1 and lines[-1] == "result: invalidContext -10", lines


def test_removing_rights(w, rig):
    """`removeRight(forIdentifier:)` deletes one item; removing it again is
    an error; `removeAllRights` deletes the rest, the command line's too."""
    assert save(w, "one", "1", answers=[PASSWORD])[0] == 0
    assert save(w, "two", "2")[0] == 0
    assert run(w, "store", "three", stdin=b"3")[0] == 0
    assert probe(w, "--right", "remove", "one")[1][-1] == "result: success"
    assert not item_path(w, "one").exists() and item_path(w, "two").exists()
    assert probe(w, "--right", "remove", "one")[1][-1] == "result: invalidContext -10"
    assert probe(w, "--right", "remove-all")[1][-1] == "result: success"
    assert run(w, "list")[1] == b""
