"""A software TPM 2.0 (swtpm, the real one QEMU uses) on 127.0.0.1 for the
secrets' machine key: the helper reaches it by the configuration's
`tpm = swtpm:PORT`, never by anything in its caller's environment.

A fresh state directory is a TPM that has never seen the store: another
machine's. `clear()` is TPM2_Clear from tpm2-tools, as an owner who clears
the TPM in the firmware does: the owner seed changes, and every object
sealed under it stops loading."""
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port_pair():
    """A port P below 1023 with P and P+1 free on 127.0.0.1 (swtpm's server
    and its control channel): the helper takes only ports where no user but
    root may listen."""
    for port in random.sample(range(600, 1022), 60):
        try:
            with socket.socket() as first, socket.socket() as second:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no two free ports next to each other below 1023 on 127.0.0.1")


class SoftwareTPM:
    def __init__(self):
        self.port = free_port_pair()
        self.proc = None
        self.state = None

    @property
    def tcti(self):
        return f"swtpm:host=127.0.0.1,port={self.port}"

    def start(self):
        """swtpm with a new, empty state: a TPM that has never seen anything."""
        self.stop()
        self.state = Path(tempfile.mkdtemp(prefix="localauth-swtpm-"))
        self.proc = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={self.state}",
             "--server", f"type=tcp,port={self.port},bindaddr=127.0.0.1",
             "--ctrl", f"type=tcp,port={self.port + 1},bindaddr=127.0.0.1",
             "--flags", "not-need-init,startup-clear"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"swtpm did not start: {self.proc.stderr.read().decode(errors='replace')}")
                time.sleep(0.02)

    def clear(self):
        """TPM2_Clear with the (empty) lockout authorization."""
        subprocess.run(["tpm2_clear", "-T", self.tcti], check=True, capture_output=True, timeout=30)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc.stderr.close()
            self.proc = None
        if self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)
            self.state = None
