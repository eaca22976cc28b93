#!/usr/bin/env python3
"""The demonstration: the real pam_localauth.so in real libpam (pam_wrapper),
for the test user alice, printing each conversation as a terminal user sees
it. No fingerprint reader is connected yet (the fprintd adapter is the next
step), so this shows the passcode path: a correct passcode, a wrong one, the
back-off after five, its end, and an unknown user."""
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pamenv import PASSWORDS, PamEnv, build  # noqa: E402


def show(title, run, answers):
    print(f"\n$ {title}")
    typed = iter(answers)
    for style, text in run.messages:
        if style.startswith("prompt"):
            answer = next(typed, None)
            shown = "" if answer is None else ("*" * len(answer) if style == "prompt-off" else answer)
            print(f"  {text}{shown}" + ("   [Enter]" if answer == "" else "") + ("   [Ctrl-D]" if answer is None else ""))
        elif style in ("info", "error"):
            print(f"  {text}")
    names = {0: "PAM_SUCCESS", 7: "PAM_AUTH_ERR", 19: "PAM_CONV_ERR", 9: "PAM_AUTHINFO_UNAVAIL", 25: "PAM_IGNORE"}
    print(f"  -> {names.get(run.code, run.code)}")


def main():
    build()
    with tempfile.TemporaryDirectory(prefix="localauth-demo-") as base:
        pam = PamEnv(Path(base))
        pam.write_owner_stack("sudo", args="passcode_backoff=5:3s,6:1m")
        print("localauth demonstration: service sudo, user alice, policy owner, no fingerprint reader")
        print("(back-off shortened to 3 s after 5 wrong passwords for the demonstration)")
        good = PASSWORDS["alice"]
        run = pam.run(answers=[good])
        show("sudo -v   # the right password", run, [good])
        for attempt in range(5):
            wrong = f"guess{attempt}"
            show(f"sudo -v   # wrong password {attempt + 1}", pam.run(answers=[wrong]), [wrong])
        record = pam.record()
        print(f"\n  on disk: F={record.F} P={record.P} wait={record.backoff_ms / 1000:.0f} s")
        show("sudo -v   # refused without asking", pam.run(answers=[good]), [])
        print("\n  ... waiting for the back-off to end ...")
        deadline = time.monotonic() + 15
        while not (run := pam.run(answers=[good])).prompts() and time.monotonic() < deadline:
            time.sleep(0.25)
        show("sudo -v   # the right password after the wait", run, [good])
        record = pam.record()
        print(f"\n  on disk: F={record.F} P={record.P}")
        show("sudo -v   # Enter on an empty line cancels, nothing counted", pam.run(answers=[""]), [""])
        show("login nosuchuser   # unknown users look like users without a fingerprint",
             pam.run(user="nosuchuser", answers=["guess"]), ["guess"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
