"""A caller that starts the setuid helper again and again and never reaps
it, as the attack review's opening flood did: run as the user (by
test_helper_attacks.py), it prints one JSON line of what each start came to,
then keeps every unreaped helper until its standard input closes, and
reaps them then.

    helper_flood.py HELPER COUNT NPROC HELLO_HEX [--one-at-a-time]

A HELPER with "{}" in it names each start's path (the start's number put
in): a program started under many names. NPROC (0: unchanged) is the
process limit it sets on itself first. Each
helper gets the client's HELLO and then the end of the conversation, so it
ends at once; with --one-at-a-time the next start waits until the previous
helper has exited (so no slot of the four it may run refuses it).
"""
import errno
import json
import os
import resource
import socket
import sys
import time


def exited(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def main():
    helper, count, nproc, hello = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    one_at_a_time = "--one-at-a-time" in sys.argv[5:]
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    outcomes, pids = [], []
    for number in range(count):
        path = helper.format(number) if "{}" in helper else helper
        mine, theirs = socket.socketpair()
        try:
            pid = os.posix_spawn(path, [path], {}, file_actions=[(os.POSIX_SPAWN_DUP2, theirs.fileno(), 0)])
        except OSError as error:
            outcomes.append("cannot start: " + errno.errorcode.get(error.errno, str(error.errno)))
            mine.close()
            theirs.close()
            continue
        theirs.close()
        pids.append(pid)
        mine.settimeout(30)
        heard = b""
        try:
            mine.sendall(hello)
            mine.shutdown(socket.SHUT_WR)
            while True:
                chunk = mine.recv(4096)
                if not chunk:
                    break
                heard += chunk
        except OSError:
            pass
        mine.close()
        outcomes.append("refused" if b"too many prompts" in heard else "ended")
        if one_at_a_time:
            deadline = time.monotonic() + 30
            while not exited(pid) and time.monotonic() < deadline:
                time.sleep(0.005)
    print(json.dumps({"outcomes": outcomes, "pids": pids}), flush=True)
    sys.stdin.read()   # the unreaped helpers stay until the test is done with them
    for pid in pids:   # then reaped, so that none outlives the test
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
