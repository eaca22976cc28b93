"""Plasma 6's real lock screen (kscreenlocker 6, Debian 13 and later):
`kscreenlocker_greet --testing` with plasma-desktop's lock screen on the
Xvfb display, driven as a person would (tests/support/lockers.py drives
Plasma 5.27's).

Plasma 6 runs two PAM conversations side by side, each in a thread of the
greeter as the user, so each goes through the setuid helper:

- `kde`, the password box (here with `kde` in password_services: the
  password only). A key press shows the lock screen and starts both; Enter
  answers the password prompt. A failed password conversation (a wrong or
  empty password) makes the greeter wait out a 3-second grace lock, then
  start both conversations again.
- `kde-fingerprint`, started beside it, answered nothing (the shipped stack,
  scan mode). When it fails the greeter shows nothing and does not start it
  again until the password conversation fails; when it answers
  PAM_AUTHINFO_UNAVAIL (a locked finger, a timeout) the greeter never starts
  it again.

After a success the greeter prints "Unlocked" and quits. Plasma 6.3 (Debian
13) then waits for the other conversation's thread: a fingerprint
conversation still scanning holds the exit (and the real screen) until it
ends; Plasma 6.7 (Debian 14) leaves with _exit at once.
"""
from lockers import STEP, KScreenLocker, helper_pids, helper_waiting_for_answer, wait_for


class Plasma6LockScreen(KScreenLocker):
    name = "kscreenlocker6"

    def greeter_log(self):
        self.log.flush()
        return (self.home / "greeter.log").read_text(errors="replace")

    def said_unlocked(self):
        """The greeter decided to unlock (it then quits)."""
        return "\nUnlocked\n" in "\n" + self.greeter_log()

    def fingerprint_conversations(self):
        """How many times the fingerprint conversation started."""
        return self.greeter_log().count("[PAM worker kde-fingerprint] Authenticate: Starting authentication")

    def fingerprint_results(self):
        """The PAM codes the fingerprint conversation ended with, in order."""
        marker = "[PAM worker kde-fingerprint] Authenticate: Authentication done, result code: "
        return [int(line.split(marker, 1)[1].split()[0]) for line in self.greeter_log().splitlines() if marker in line]

    def scanning(self):
        """A helper other than the one waiting for the password: the
        fingerprint conversation's, at the reader."""
        waiting = helper_waiting_for_answer()
        return any(pid != waiting for pid in helper_pids())

    def wake(self):
        """A key press shows the lock screen, which starts both conversations
        (again, after a failed password once the grace lock is over): until
        the password prompt is up. `submit` types into it as on Plasma 5."""
        def prompt_up():
            if helper_waiting_for_answer():
                return True
            if self.proc.poll() is not None:
                return True
            self.x.xdotool("key", "shift")
            return False
        try:
            wait_for(prompt_up, timeout=2 * STEP, what="the greeter's password prompt")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.report()}") from None

    wait_for_prompt = wake

    def rounds(self):
        """How many times the greeter started its conversations."""
        return self.greeter_log().count("PamAuthenticators: starting authenticators")

    def next_round(self, after):
        """After a failed password: the grace lock over and both
        conversations started again (round `after` + 1), the password
        prompt up; or the greeter gone."""
        wait_for(lambda: self.proc.poll() is not None or (self.rounds() > after and helper_waiting_for_answer()),
                 what="the conversations started again after the grace lock")

    def fail_round(self, text):
        """Submits `text`, which fails the password conversation (wrong, or
        empty: cancelled), and waits for the next round."""
        round_ = self.rounds()
        self.submit(text)
        self.next_round(round_)
