"""A program on its own pseudo-terminal (its controlling terminal), driven
by what it prints: `expect` waits for text, `send` types. The program is
killed when the session closes, whatever state the test left it in."""
import os
import pty
import select
import signal
import time


class TerminalSession:
    def __init__(self, argv, env):
        self.pid, self.master = pty.fork()
        if self.pid == 0:
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.output = b""
        self.seen = 0
        self.status = None

    def _read(self, timeout):
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return False
        if not data:
            return False
        self.output += data
        return True

    def expect(self, text, timeout=20.0):
        """Waits until `text` appears after what was already expected."""
        wanted = text.encode()
        deadline = time.monotonic() + timeout
        while True:
            found = self.output.find(wanted, self.seen)
            if found >= 0:
                self.seen = found + len(wanted)
                return
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.5)):
                if self.output.find(wanted, self.seen) >= 0:
                    continue
                raise AssertionError(f"{text!r} not seen; output:\n{self.text}")

    def seconds_to_end(self, started, limit):
        """Reads until the program's side of the terminal closes (it ended),
        for at most `limit` seconds after `started` (time.monotonic());
        -> the seconds from `started` to then, to the millisecond (`wait`
        polls more coarsely)."""
        while self._read(0.5) and time.monotonic() < started + limit:
            pass
        return time.monotonic() - started

    def send(self, data):
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def wait(self, timeout=30.0):
        """Reads to the end; -> exit code (negative: killed by that signal)."""
        deadline = time.monotonic() + timeout
        while self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"did not end; output:\n{self.text}")
            if not self._read(0.2):
                time.sleep(0.05)
        while self._read(0.05) and select.select([self.master], [], [], 0)[0]:
            pass
        return self.status

    @property
    def text(self):
        return self.output.decode(errors="replace").replace("\r\n", "\n")

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
        try:
            os.close(self.master)
        except OSError:
            pass
