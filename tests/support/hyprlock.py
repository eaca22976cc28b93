"""hyprlock (Debian 14 and later) inside a headless sway, both as the user,
driven as a person would: wtype types through the virtual-keyboard
protocol, Enter submits the input field (an empty one too).

hyprlock runs PAM (service hyprlock) in a thread of its own, as the user,
so the module goes through the setuid helper. Each prompt waits for the
input field; a failed conversation is followed at once by a new one (a new
prompt). Its `--verbose` log carries every prompt ("PAM_PROMPT: ...") and
message ("PAM: ...", shown to no one unless it is pam_faillock's), which
the driver reads to know where the conversation is. hyprlock's own
fingerprint client (auth:fingerprint) stays off, as it is by default: it
would talk to fprintd past PAM and its counts.
"""
import re
import subprocess
import time

from lockers import STEP, Swaylock, wait_for

PROMPT = re.compile(r"PAM_?PROMPT: (.*)$")
COLOURS = re.compile(r"\x1b\[[0-9;]*m")
CONFIG = """general {
    ignore_empty_input = false
    hide_cursor = true
}
animations {
    enabled = false
}
auth {
    pam:enabled = true
    fingerprint:enabled = false
}
input-field {
    monitor =
    size = 300, 50
}
"""


class Hyprlock(Swaylock):
    name = pam_process = "hyprlock"
    precollects = False

    def start(self):
        self.start_sway()
        config = self.runtime / "hyprlock.conf"
        config.write_text(CONFIG)
        self.log_path = self.runtime / "hyprlock.log"
        self.log = open(self.log_path, "w")
        self.launch(["hyprlock", "--verbose", "--no-fade-in", "-c", config], self.wayland_env(), stdout=self.log,
                    stderr=subprocess.STDOUT)
        self.answered = 0
        try:
            wait_for(lambda: self.prompts() or self.proc.poll() is not None, timeout=2 * STEP, what="hyprlock's first prompt")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.report()}") from None
        if self.proc.poll() is not None:
            raise AssertionError(f"hyprlock exited {self.proc.returncode} at start\n{self.report()}")
        time.sleep(0.5)   # the input field takes keys once the lock surface is up
        return self

    def lines(self):
        """Its log's lines, without the terminal colours."""
        self.log.flush()
        return [COLOURS.sub("", line) for line in self.log_path.read_text(errors="replace").splitlines()]

    def prompts(self):
        """The prompts hyprlock was given so far, in order ("PAMPROMPT" in
        0.9.6's log, "PAM_PROMPT" in later ones)."""
        return [match.group(1) for match in map(PROMPT.search, self.lines()) if match]

    @property
    def messages(self):
        return [line.split("PAM: ", 1)[1] for line in self.lines() if "PAM: " in line]

    def submit(self, text):
        """Waits for the next prompt, then types `text` and Enter into it."""
        try:
            wait_for(lambda: len(self.prompts()) > self.answered or self.proc.poll() is not None,
                     what="hyprlock's next prompt")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.report()}") from None
        self.answered = len(self.prompts())
        time.sleep(0.2)
        super().submit(text)

    def settle(self):
        """The attempt over: hyprlock asks again (its next conversation, or
        the password in this one), or it is gone."""
        wait_for(lambda: len(self.prompts()) > self.answered or self.proc.poll() is not None, what="the attempt over")
        time.sleep(0.2)

    def report(self):
        return super().report() + "\n" + "\n".join(self.lines()[-40:])

    def close(self):
        super().close()
        self.log.close()
