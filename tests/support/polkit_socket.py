"""polkit 127 and later (Debian 14's polkitd 128): the agent helper is no
longer setuid. systemd starts `polkit-agent-helper-1 --socket-activated`
as root for each connection to /run/polkit/agent-helper.socket (its socket
unit, Accept=yes), with the connection as standard input and output, in
the sandbox its service unit declares; the agent library connects there
whenever the socket exists.

No systemd runs here, so the listener is reproduced as the socket unit
does it: `systemd-socket-activate --accept --inetd` on the same path, as
root inside the world. Each instance enters the sandbox first
(polkit-sandbox.sh, written by AgentHelperSocket): a mount namespace of its
own where every filesystem is read-only but /dev, /proc and /sys
(ProtectSystem=strict), a private /tmp (PrivateTmp=yes), the environment
cleared but PATH and LANG, standard error on the connection (the unit
leaves it to inherit the socket), and writable only what localauth's drop-in
(packaging/polkit-agent-helper-localauth.conf) lists in ReadWritePaths:
the state directory, which is this world's own in the tests (the
/var/lib/localauth of the drop-in is translated to it). The helper has no
PAM_TTY and no PAM_RHOST there, as under systemd. logind is the suite's
mock (tests/support/logind_mock.py), with the agents in session cgroups of
its making. Not reproduced: the network, device and system-call filters
(the module needs none of what they allow it; its one call outside
@system-service, syslog(2), is made only for a disk gone read-only, which
a sandbox's view is not; the drop-in is checked with systemd-analyze verify
in tests/package)."""
import os
import re
import shutil
import stat
import subprocess

from fprint_rig import stop_process
from lockers import wait_for
from pamenv import ROOT

SOCKET = "/run/polkit/agent-helper.socket"
HELPER = "/usr/lib/polkit-1/polkit-agent-helper-1"
SOCKET_UNIT = "/usr/lib/systemd/system/polkit-agent-helper.socket"
DROP_IN = ROOT / "packaging/polkit-agent-helper-localauth.conf"
# The state directory the drop-in names: the module's default.
DEFAULT_STATE = "/var/lib/localauth"


def socket_activated():
    """Whether this system's polkit runs its agent helper from the socket
    (127 and later: the helper is not setuid, and the socket unit ships)."""
    return (os.path.exists(HELPER) and not os.stat(HELPER).st_mode & stat.S_ISUID
            and os.path.exists(SOCKET_UNIT))


def writable_paths():
    """ReadWritePaths of localauth's drop-in (a leading "-": may be missing)."""
    paths = []
    for line in DROP_IN.read_text().splitlines():
        match = re.match(r"\s*ReadWritePaths\s*=\s*(.*)$", line)
        if match:
            paths += [path.lstrip("-") for path in match.group(1).split()]
    return paths


class AgentHelperSocket:
    """The socket unit's listener in `world`, with the sandbox per instance."""

    def __init__(self, world):
        self.world = world
        self.log = open(world.base / "agent-helper.log", "w")
        writable = [str(world.state) if path == DEFAULT_STATE else path for path in writable_paths()]
        assert str(world.state) in writable, f"the drop-in does not keep {DEFAULT_STATE} writable: {writable_paths()}"
        sandbox = world.base / "polkit-sandbox.sh"
        # Handles on the writable paths first: the private /tmp would hide
        # the world's state directory, which lies under the suite's /tmp.
        sandbox.write_text(
            "set -e\n"
            "mount --make-rprivate /\n"
            + "".join(f"exec {3 + index}<'{path}'\n" for index, path in enumerate(writable))
            # Every mount read-only, but /dev, /proc and /sys.
            + "awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r point; do\n"
            "    case $point in /dev|/dev/*|/proc|/proc/*|/sys|/sys/*) continue ;; esac\n"
            "    mount -o remount,bind,ro \"$point\" 2>/dev/null || true\n"
            "done\n"
            "mount -t tmpfs -o mode=1777,size=16m polkit-private-tmp /tmp\n"
            # Then the writable paths, bound back read-write.
            + "".join(f"mkdir -p '{path}'\nmount --bind --no-canonicalize /proc/$$/fd/{3 + index} '{path}'\n"
                      f"mount -o remount,bind,rw '{path}'\nexec {3 + index}<&-\n" for index, path in enumerate(writable))
            # StandardError is not set in the unit: it inherits the
            # socket, so anything written there reaches the agent.
            + "umask 077\nexec 2>&1\n"
            'exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C "$@"\n')
        os.makedirs(os.path.dirname(SOCKET), exist_ok=True)
        activate = shutil.which("systemd-socket-activate")
        assert activate, "systemd-socket-activate is missing (package systemd)"
        self.proc = subprocess.Popen(
            world.argv(activate, "--accept", "--inetd", "-l", SOCKET,
                       "unshare", "--mount", "/bin/sh", str(sandbox), HELPER, "--socket-activated"),
            env=world.env(), stdout=subprocess.DEVNULL, stderr=self.log, stdin=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(SOCKET) or self.proc.poll() is not None, what="the agent helper's socket")
        assert self.proc.poll() is None, (world.base / "agent-helper.log").read_text()
        # The socket unit's SocketMode, 0666: any local agent connects
        # (systemd-socket-activate makes it by its own umask).
        os.chmod(SOCKET, 0o666)

    def close(self):
        stop_process(self.proc, term_timeout=10)
        self.log.close()
        if os.path.exists(SOCKET):
            os.unlink(SOCKET)
