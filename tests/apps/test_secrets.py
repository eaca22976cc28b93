"""Secrets behind the finger through `localauth secret`, end to end as
unprivileged users in a private mount namespace (tests/support/private_world.py):
the real setuid helper keeping the store, the rig's fprintd with libfprint's
virtual device, real pam_unix against a private shadow. A load is one
evaluation on the same records as every prompt; the secret reaches the
caller only after the touch or the password its item requires, and nobody
else's request reaches it at all.

A store reads its secret from a pipe while its conversation (a first
store's password, a load's finger) is on the controlling terminal, as a
script run by a person has it: `sh -c 'printf … | localauth secret store'`
in a pseudo-terminal.
"""
import hashlib
import os
import shlex
import socket
import stat
import subprocess

import pytest

from helper_wire import (CLIENT_HELLO_V4, HELLO, PROMPT_OFF, PROMPT_ON, REQUEST, SECRET, SECRET_STATUS, converse, frame,
                         read_frame, request)
from pamenv import ROOT, localauth_command, reseal_record
from private_world import HELPER_PATH
from terminal import TerminalSession
from worlds import shared_rig, shared_world

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces, a setuid helper)")

USER, UID, PASSWORD = "secretuser", 4330, "secret-pw-3"
OTHER, OTHER_UID, OTHER_PASSWORD = "otheruser", 4331, "other-pw-4"
MATCH, MISS = f"SCAN finger-{USER}", "SCAN finger-nobody"
TOKEN = "ghp_example-token-0123456789"

rig = shared_rig(enroll=USER)
world = shared_world("secrets", users={USER: (UID, PASSWORD), OTHER: (OTHER_UID, OTHER_PASSWORD)})


@pytest.fixture
def w(world, rig):
    world.clear_state()
    world.password_entered()  # the first password of this boot: the finger is enough now
    yield world
    rig.wait_until_claimable(USER, timeout=10)


def secret_command(*args):
    return " ".join(shlex.quote(str(part)) for part in (localauth_command(), "secret", *args))


def terminal(w, shell, uid=UID, user=USER):
    """`shell` (a line of sh) as `uid` in a new pseudo-terminal, its controlling terminal."""
    argv = w.argv("/bin/sh", "-c", shell, uid=uid)
    argv[0] = "/usr/bin/unshare"
    return TerminalSession(argv, w.env(user))


def run(w, *args, uid=UID, user=USER, stdin=b""):
    """`localauth secret ARGS` as `uid` without a terminal. -> (code, stdout bytes, stderr text)"""
    proc = subprocess.run(w.argv(localauth_command(), "secret", *args, uid=uid), env=w.env(user), input=stdin,
                          capture_output=True, timeout=60, start_new_session=True)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")


def finished(session, timeout=60):
    try:
        return session.wait(timeout=timeout)
    finally:
        session.close()


def first_store(w, name, value, access="default"):
    """The user's first secret: the key is made with the password, asked on the terminal."""
    session = terminal(w, f"printf %s {shlex.quote(value)} | {secret_command('store', name, '--access', access)}")
    session.expect("Enter Password")
    session.send(PASSWORD + "\r")
    assert finished(session) == 0, session.text
    assert PASSWORD not in session.text


def store(w, name, value, access="default", uid=UID, user=USER):
    code, _, err = run(w, "store", name, "--access", access, uid=uid, user=user, stdin=value.encode())
    return code, err


def load_with(w, rig, name, feed, uid=UID, user=USER):
    """A load at a terminal with the reader fed `feed`. -> (exit code, what the terminal showed)"""
    if feed:
        rig.feed(feed)
    session = terminal(w, secret_command("load", name) + "; code=$?; echo; echo exit=$code", uid=uid, user=user)
    try:
        session.expect("exit=")
        session.wait(timeout=30)
    finally:
        session.close()
        if feed:
            rig.feed_wait(timeout=30)
    text = session.text
    code = int(text.rsplit("exit=", 1)[1].split()[0])
    return code, text


def password_typed(session, code=0):
    """The session asks the password alone; it is typed, and the command
    ends with exit `code` (its shell line echoes exit=CODE). -> what the
    terminal showed, which never holds the password."""
    try:
        session.expect("Enter Password")
        session.send(PASSWORD + "\r")
        session.expect(f"exit={code}")
    finally:
        session.close()
    assert PASSWORD not in session.text
    return session.text


def load_asking_the_password(w, name):
    """A load whose evaluation asks the password alone (no finger can be
    used, or only the password opens the key). -> what the terminal showed."""
    return password_typed(terminal(w, secret_command("load", name) + "; code=$?; echo; echo exit=$code"))


def user_directory(w, uid=UID):
    return w.state / "secrets" / str(uid)


def item_path(w, name, uid=UID):
    return user_directory(w, uid) / (hashlib.sha256(name.encode()).hexdigest() + ".item")


def seed_fingerprint_failures(w, count):
    path = w.state / f"{UID}.rec"
    data = reseal_record(path.read_bytes(), F=count)
    path.write_bytes(data)


def test_a_first_store_asks_the_password_and_keeps_the_secret_root_only(w):
    """The first secret makes the user's key with both its copies (the
    machine's and the password's, so that a new machine key loses
    nothing); every file is root's and private, and the secret is in none
    of them in the clear."""
    first_store(w, "git/example.org", TOKEN)
    directory = user_directory(w)
    # The account it was made for, the item, the key's two copies, and the marker that tells the
    # password's copy current without Argon2id.
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        ["account", "key.machine", "key.password", "key.password.for", item_path(w, "git/example.org").name])
    for path in [w.state / "secrets", directory, *directory.iterdir(), w.state / "secrets" / "machine.key"]:
        info = path.lstat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) & 0o077 == 0, (path, oct(info.st_mode))
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes() and PASSWORD.encode() not in path.read_bytes(), path
    assert w.counts(UID) == (0, 0)
    # The user's own processes cannot read the store's files.
    code = subprocess.run(w.argv("cat", str(item_path(w, "git/example.org")), uid=UID), env=w.env(USER),
                          capture_output=True, timeout=30).returncode
    assert code != 0


def test_store_then_load_with_the_finger(w, rig):
    first_store(w, "git/example.org", TOKEN)
    code, text = load_with(w, rig, "git/example.org", [MATCH])
    assert code == 0 and TOKEN in text, text
    assert 'Your secret "git/example.org" is asked for.' in text, text
    assert w.counts(UID) == (0, 0)


def test_a_miss_then_the_password_releases_a_default_item(w, rig):
    first_store(w, "mail", "imap-pass")
    rig.feed([MISS])
    session = terminal(w, secret_command("load", "mail") + "; code=$?; echo; echo exit=$code")
    try:
        session.expect("Fingerprint not recognized.")
        session.expect("[Enter: Enter Password]")
        assert rig.feed_wait(timeout=30).ok
        session.send("\r")
        session.expect("Enter Password")
        session.send(PASSWORD + "\r")
        session.expect("exit=0")
    finally:
        session.close()
    assert "imap-pass" in session.text and PASSWORD not in session.text, session.text
    assert w.counts(UID) == (0, 0)


def test_a_biometry_item_fails_with_the_lockout_and_a_default_one_asks_the_password(w, rig):
    first_store(w, "finger-only", "f-secret", access="default")
    assert store(w, "finger-only", "f-secret", access="biometry") == (0, "")
    assert store(w, "either", "e-secret", access="default") == (0, "")
    seed_fingerprint_failures(w, 5)
    code, text = load_with(w, rig, "finger-only", [])
    assert code == 13 and "biometryLockout" in text and "f-secret" not in text, text
    text = load_asking_the_password(w, "either")
    assert "e-secret" in text, text
    assert w.counts(UID) == (0, 0), "the password lifts the lockout"


def test_an_enrollment_change_invalidates_a_current_set_item_and_not_a_biometry_one(w, rig):
    first_store(w, "bound", "b-secret", access="default")
    assert store(w, "bound", "b-secret", access="biometry-current-set") == (0, "")
    assert store(w, "any", "a-secret", access="biometry") == (0, "")
    try:
        # Another finger (the rig's prints are outside the digest's print
        # files; on a real system a finger enrolled again changes it too).
        rig.enroll(USER, print_id=f"finger-{USER}-new", finger="left-index-finger")
        code, text = load_with(w, rig, "bound", [])
        assert code == 31 and "deleted" in text and "b-secret" not in text, text
        assert not item_path(w, "bound").exists()
        # The biometry item is kept. A changed enrollment asks the password
        # once before a finger counts again (the rule every prompt keeps);
        # after it, the new finger releases the item.
        code, text = load_with(w, rig, "any", [])
        assert code == 13 and "enrolled fingerprints changed" in text and "a-secret" not in text, text
        assert item_path(w, "any").exists()
        w.password_entered()
        code, text = load_with(w, rig, "any", [f"SCAN finger-{USER}-new"])
        assert code == 0 and "a-secret" in text, text
    finally:
        rig.enroll(USER)
    assert w.counts(UID) == (0, 0), "nothing was asked for the invalidated item"


def test_another_user_and_the_same_user_without_a_touch_get_nothing(w, rig):
    first_store(w, "git/example.org", TOKEN)
    # Another user: their own (empty) store, whatever name they ask for.
    assert run(w, "list", uid=OTHER_UID, user=OTHER)[:2] == (0, b"")
    code, out, err = run(w, "load", "git/example.org", uid=OTHER_UID, user=OTHER)
    assert code == 30 and out == b"" and "no secret under that name" in err, err
    # The user's own process without a person at a terminal: nothing shown, nothing released.
    code, out, err = run(w, "load", "git/example.org")
    assert code == 21 and out == b"" and "notInteractive" in err, err
    # A person who cancels.
    session = terminal(w, secret_command("load", "git/example.org") + "; code=$?; echo; echo exit=$code")
    try:
        session.expect("[Ctrl-C: Cancel]")
        session.send("\x03")
        session.expect("exit=15")
    finally:
        session.close()
    assert TOKEN not in session.text
    # Wrong fingers for a finger-only item: charged, locked, and still nothing.
    assert store(w, "finger-token", TOKEN, access="biometry") == (0, "")
    for _ in range(2):
        code, text = load_with(w, rig, "finger-token", [MISS, MISS, MISS])
        assert code == 14 and TOKEN not in text, text
    assert w.counts(UID)[0] >= 5
    code, text = load_with(w, rig, "finger-token", [])
    assert code == 13 and TOKEN not in text, text


def test_list_delete_and_bad_input(w):
    first_store(w, "b", "2")
    assert store(w, "a", "1") == (0, "")
    assert run(w, "list")[:2] == (0, b"a\nb\n")
    assert run(w, "delete", "a")[:2] == (0, b"")
    assert run(w, "delete", "a")[0] == 30
    assert run(w, "list")[:2] == (0, b"b\n")
    # Bad input changes nothing.
    assert run(w, "store", "x", stdin=b"y" * 4097)[0] == 2
    assert run(w, "store", "bad\x1bname", stdin=b"v")[0] == 2
    assert run(w, "store", "x", "--access", "finger", stdin=b"v")[0] == 2
    assert run(w, "load")[0] == 2 and run(w, "list", "x")[0] == 2 and run(w, "take", "x")[0] == 2
    assert run(w, "list")[:2] == (0, b"b\n")


def test_an_administrator_who_turns_apps_off_turns_secrets_off(w):
    first_store(w, "b", "2")
    w.write_config(["services = sudo"])
    try:
        code, _, err = run(w, "list")
        assert code == 11 and "biometryNotAvailable" in err, err
    finally:
        w.write_config([])


def test_a_machine_key_made_anew_is_mended_by_the_password(w, rig):
    """The machine's copy of the user's key no longer opens (its key made
    anew: a restored system; later, a cleared TPM). A finger-only secret
    waits for the password to come; a secret that takes the password asks
    it alone, and with it the machine's copy is made again (after the
    verdict), so the finger works again for both."""
    first_store(w, "mail", "imap-pass")
    assert store(w, "finger-only", "f-secret", access="biometry") == (0, "")
    (w.state / "secrets" / "machine.key").unlink()
    code, text = load_with(w, rig, "finger-only", [])
    assert code == 33 and "password once" in text and "f-secret" not in text, text
    text = load_asking_the_password(w, "mail")
    assert "imap-pass" in text and "Swipe" not in text, text
    assert (user_directory(w) / "key.password.for").exists()
    code, text = load_with(w, rig, "finger-only", [MATCH])
    assert code == 0 and "f-secret" in text, text
    assert w.counts(UID) == (0, 0)


# ---------------------------------------------------------------- git's credential helper

def git(w, shell, uid=UID, user=USER):
    """A line of sh running the real git as the user at a terminal, with
    the shipped helper and the built tool on PATH, git's own prompts off
    (so that what the helper does not give, git does not ask for)."""
    path = f"{ROOT / 'packaging'}:{localauth_command().parent}:/usr/bin:/bin"
    return terminal(w, f"export PATH={shlex.quote(path)} GIT_TERMINAL_PROMPT=0 HOME={shlex.quote(str(w.home))}; "
                       f"{shell}; code=$?; echo; echo exit=$code", uid=uid, user=user)


CREDENTIAL = "protocol=https\nhost=git.example.org\n"


def test_git_credential_fill_through_the_shipped_helper(w, rig):
    """`git credential approve` keeps what git used (the first secret asks
    the password once); `git credential fill` gets it back after a touch;
    without the touch, or for another user, git gets nothing; `reject`
    deletes it."""
    given = CREDENTIAL + "username=alice\npassword=" + TOKEN + "\n"
    password_typed(git(w, f"printf %s {shlex.quote(given)} | git -c credential.helper=localauth credential approve"))
    assert item_path(w, "git:https://git.example.org").exists()

    rig.feed([MATCH])
    session = git(w, f"printf %s {shlex.quote(CREDENTIAL)} | git -c credential.helper=localauth credential fill")
    try:
        session.expect("exit=0")
    finally:
        session.close()
        rig.feed_wait(timeout=30)
    assert f"username=alice\npassword={TOKEN}\n" in session.text, session.text
    assert 'Your secret "git:https://git.example.org": git needs your credential for https://git.example.org' in session.text

    # Cancelled at the reader: git gets nothing and, its prompts off, fails.
    session = git(w, f"printf %s {shlex.quote(CREDENTIAL)} | git -c credential.helper=localauth credential fill")
    try:
        session.expect("[Ctrl-C: Cancel]")
        session.send("\x03")
        session.expect("exit=128")
    finally:
        session.close()
    assert TOKEN not in session.text
    # Another user's git: their own store, which holds nothing.
    session = git(w, f"printf %s {shlex.quote(CREDENTIAL)} | git -c credential.helper=localauth credential fill",
                  uid=OTHER_UID, user=OTHER)
    try:
        session.expect("exit=128")
    finally:
        session.close()
    assert TOKEN not in session.text

    session = git(w, f"printf %s {shlex.quote(given)} | git -c credential.helper=localauth credential reject")
    try:
        session.expect("exit=0")
    finally:
        session.close()
    assert not item_path(w, "git:https://git.example.org").exists()


# ---------------------------------------------------------------- a store killed mid-way

STORE_CALLS = ("unlinkat", "openat", "write", "fsync", "fdatasync", "rename", "renameat", "renameat2")
KILL_AT = ("unlinkat", "write", "fsync", "fdatasync", "rename", "renameat", "renameat2")


def traced_store(w, value, trace, inject=None):
    """`localauth secret store crash` as the user under strace, which runs
    it as root does with `-u` (so the helper's setuid bit takes effect, as
    in a real exec), follows into the helper, logs the calls in
    STORE_CALLS to `trace`, and with `inject` ("CALL:N") kills the helper
    with SIGKILL as it makes that call for the Nth time. -> exit code"""
    strace = ["strace", "-f", "-qq", "-y", "-u", USER, "-o", str(trace), "-e", "trace=" + ",".join(STORE_CALLS)]
    if inject:
        call, number = inject.split(":")
        strace += ["-e", f"inject={call}:signal=SIGKILL:when={number}"]
    proc = subprocess.run(w.argv(*strace, localauth_command(), "secret", "store", "crash"), env=w.env(USER),
                          input=value.encode(), capture_output=True, timeout=60, start_new_session=True)
    return proc.returncode


def helper_calls(trace):
    """The helper's calls on the secrets' files, in order, each as (call,
    its number among that process's calls of that name): where a kill can
    land. (`-y` names each descriptor's file, so a call on the user's
    directory or a file in it shows "/secrets/".)"""
    seen, calls = {}, []
    for line in trace.read_text().splitlines():
        pid, rest = line.split(" ", 1)
        call = rest.split("(", 1)[0].strip()
        if call not in STORE_CALLS:
            continue
        seen[(pid, call)] = seen.get((pid, call), 0) + 1
        if "/secrets/" in rest and call in KILL_AT:
            calls.append((call, seen[(pid, call)]))
    return calls


def killed_on_the_secrets(trace):
    """Whether the process that touched the secrets' files was the one SIGKILL ended."""
    lines = trace.read_text().splitlines()
    pids = {line.split(" ", 1)[0] for line in lines if "/secrets/" in line}
    return any(line.split(" ", 1)[0] in pids and "+++ killed by SIGKILL" in line for line in lines)


def test_a_store_killed_at_any_of_its_writes_leaves_the_old_or_the_new_secret(w, rig):
    """SIGKILL to the helper at each of the calls a store makes on the
    secrets' files (the temporary file's removal, creation, write, sync,
    rename, the directory's sync): every time, the item loads whole, the
    old secret or the new one, never a torn or lost one."""
    first_store(w, "crash", "old-value")
    trace = w.base / "trace.log"
    assert traced_store(w, "first-new-value", trace) == 0, trace.read_text()[-2000:]
    calls = helper_calls(trace)
    kinds = {call for call, _ in calls}
    assert {"write", "fsync"} <= kinds and kinds & {"rename", "renameat", "renameat2"}, calls
    expected = "first-new-value"
    for index, (call, number) in enumerate(calls):
        value = f"value-{index}"
        injected = w.base / f"trace-{index}.log"
        code = traced_store(w, value, injected, inject=f"{call}:{number}")
        assert code != 0 and killed_on_the_secrets(injected), (call, number, injected.read_text()[-1500:])
        code, text = load_with(w, rig, "crash", [MATCH])
        assert code == 0, (call, number, text)
        assert expected in text or value in text, (call, number, expected, value, text)
        expected = value if value in text else expected
    assert w.counts(UID) == (0, 0)


# ---------------------------------------------------------------- a client of its own

def raw_load(w, item, **fields):
    """A secret-load from a client of its own (the helper's frames, no
    terminal, the presentation it likes): -> (messages, status byte or
    None, whether a SECRET came, the RESULT)."""
    mine, theirs = socket.socketpair()
    proc = subprocess.Popen(w.argv(HELPER_PATH, uid=UID), stdin=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=w.env(USER))
    theirs.close()
    status, secret = None, False

    def seen(kind, payload):
        nonlocal status, secret
        if kind == SECRET_STATUS:
            status = payload[0]
        secret = secret or kind == SECRET

    try:
        mine.sendall(frame(HELLO, CLIENT_HELLO_V4))
        assert read_frame(mine)[0] == HELLO
        mine.sendall(frame(REQUEST, request(service="localauth-app", action="secret-load", item=item, **fields)))
        messages, result = converse(mine, [PASSWORD], timeout=30, on_frame=seen)
    finally:
        mine.close()
        proc.wait(timeout=30)
    return messages, status, secret, result


def test_a_client_of_its_own_gets_apples_sheet_and_the_secrets_name(w, rig):
    """Whatever mode the caller asks (`mode=password`, `keys=client`), a
    load is Apple's sheet: the reader first, so a biometry-then-password
    item is not released by the password while the finger works; and the
    instruction names the secret, whatever reason the caller wrote."""
    first_store(w, "then-pw", "t-secret")
    assert store(w, "then-pw", "t-secret", access="biometry-then-password") == (0, "")
    rig.feed([MATCH])
    messages, status, secret, result = raw_load(w, "then-pw", mode="password", reason="Harmless")
    rig.feed_wait(timeout=30)
    texts = [text for _, text in messages]
    assert not any(kind in (PROMPT_OFF, PROMPT_ON) for kind, _ in messages), messages
    assert any('Your secret "then-pw": Harmless' in text for text in texts), texts
    assert status == 0 and secret and result["method"] == 1, (status, result)


def test_a_thousand_secrets_and_no_more(w):
    """The quota, through the real helper: a user keeps 1,000 secrets of up
    to 4 KiB; the 1,001st is refused (exit 32) with nothing written, while
    a replacement of one kept is still taken, and a deletion makes room."""
    first_store(w, "s0", "v" * 4096)
    tool = shlex.quote(str(localauth_command()))
    script = f"i=1; while [ $i -lt 1000 ]; do printf %s v$i | {tool} secret store s$i || exit 1; i=$((i+1)); done"
    proc = subprocess.run(w.argv("/bin/sh", "-c", script, uid=UID), env=w.env(USER), capture_output=True, timeout=600,
                          start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len([p for p in user_directory(w).iterdir() if p.name.endswith(".item")]) == 1000
    code, err = store(w, "one-more", "x")
    assert code == 32 and "1000 secrets" in err, (code, err)
    assert not item_path(w, "one-more").exists()
    assert store(w, "s7", "replaced") == (0, "")
    assert run(w, "delete", "s8")[0] == 0
    assert store(w, "one-more", "x") == (0, "")
    code, out, _ = run(w, "list")
    assert code == 0 and len(out.splitlines()) == 1000
