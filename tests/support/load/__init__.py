"""The load test's library (tools/loadtest.py is its command; `make load`
runs it for minutes, tests/faults/test_load.py for about 30 seconds). The load test: many PAM transactions at once through the real module and
real libpam, against a real fprintd with libfprint's virtual device on a
private bus (tests/support/fprint_rig.py), for minutes, checking that every attempt
is counted exactly once, that nothing deadlocks, that no prompt waits on
another user's lock, that the single reader is held by one prompt at a time,
and that memory stays flat.

    make load                      # LOAD_SECONDS=300 by default
    tools/loadtest.py --seconds 300 [--seed N] [--json FILE]   (as root)

The world. A PamEnv-like private world (tests/support/pamenv.py) with 65 users:
alice (the one-user group), u01..u32 (the different-users group) and
c01..c32 (a control group), every one enrolled with the same virtual print,
so that `SCAN finger-load` is a match for whoever holds the reader and
`SCAN finger-nobody` a no-match. Every one starts from "password entered
this boot" (the finger is enough). Transactions are tests/support/programs/pamharness.c
processes (one transaction each, `-L` for the latency) started at once in a
private mount namespace that binds the world's service files over
/etc/pam.d, as PamEnv.run_parallel does; the host's /etc is never changed.
The module and the harness run from private copies of the built ones (a
rebuild of the shared build directory during the run changes nothing), and
the service files are replaced atomically (a prompt starting while the
stack changes reads the old or the new one, never a cut one).

The stack is the owner stack, and rounds alternate two configurations:
"defaults" (lockout 5, back-off from the 5th wrong password), where every
fail phase of the one user crosses both limits, so that what they refuse
(uncharged) must be accounted for; and "wide" (`lockout=20
passcode_backoff=1000:1s`, documented options), where the limits are out of
reach and every attempt of 32 concurrent prompts is charged. Nothing weakens
the module.

Exact counting: rounds of phases. Every attempt is charged on disk before it
is verified (R3), and a success then resets F and P, so concurrent successes
make the final F and P of a user depend on an order nobody can see. Hence:

  fail     alice x32 and u01..u32 (one transaction each) at once; the reader
           answers only no-match and every typed password is wrong (some
           transactions cancel at the password prompt). No success can
           happen, so for every user F and P on disk must be exactly their
           value before the phase plus what its transactions report:
           F += the "Fingerprint not recognized" verdicts, P += the
           passwords typed and not refused by the back-off.
  mixed    the same groups; the reader answers a random mix of match and
           no-match (with retry hints, never charged) and the passwords are a
           random mix of right and wrong. For u01..u32, one transaction each,
           F and P are still exact (0 after a success, else as above). For
           alice, 32 at once, the exact check is the record's attempt
           number (offset 392), which every charge raises by one and
           nothing lowers: it must rise by exactly the attempts the
           transactions report (a success's own charge included). F and P
           are then bounded by what was charged, and the record's recent
           failures must agree with them: the entries not settled by a
           success are exactly the newest F+P attempt numbers, F of them
           fingerprint and P of them password entries.
  control  c01..c32 and u01..u32 at once, shaped as `fail`: the same number
           of processes, the same reader and fprintd traffic, but no
           shared user. u01..u32's latency here against `fail` is the
           measure of whether a prompt waits on another user's lock.
  solo     u01..u32 alone: the baseline latency.
  reset    after every phase, each user with a count or a wait left types
           the right password (one transaction each, at once); a user in
           the back-off (alice) does so in a time namespace whose boot clock
           is past the wait (pamenv.later_boot_clock), never by sleeping.
           Each must succeed and leave F = P = 0 and no wait.

In every phase the attempt number of every user must rise by exactly the
attempts its transactions report. The limits: F never exceeds the lockout
and P never exceeds the back-off threshold in a phase without a success,
and when a transaction was refused by one (the lockout sentence, or "Too
many wrong passwords") the count is then exactly at the limit.

Independent witnesses. The rig's feeder (ScanFeeder below: a continuous
form of fprint_rig's feeder, on the same VerifyFingerSelected cue) reports
every command it sent; per phase its matches must equal the transactions'
fingerprint successes and its no-matches their "not recognized" verdicts.
A dbus-monitor on the rig's bus sees every Claim (with the user name), its
reply or AlreadyInUse error, every Release and disconnect, and every
VerifyStatus: per user, successful claims must equal the transactions
that showed the fingerprint instruction, AlreadyInUse errors the
transactions told "The fingerprint reader is in use by another prompt.",
and the verdicts fprintd sent while that user held the reader the verdicts
the transactions report. No Claim may succeed while another prompt holds
the reader. A sampler (every 2 ms) records every transaction seen waiting
for a lock file of the state directory (asleep between two tries of the
lock, the file open, its flock held by another process in /proc/locks),
whose transaction it is (its command line) and, confirmed by a second look
that it still waits, whose lock: a waiter on a lock that is not its own user's is a failure
(alice's transactions waiting on alice's lock is the expected queue, and
shows the sampler sees waits at all).

Deadlock: every phase has a bound (--bound, 120 s by default; the
fingerprint phase's own timeout is 30 s); a transaction still running then is
killed and reported. Latency is pam_authenticate's own (`-L`), per group.

What a lock holder does while someone waits for its lock is sampled too
(its system call, confirmed by a second look at /proc/locks): file work and
the processor are expected; a wait on anything else under the lock would
be a finding.

Memory: the VmRSS of both rigs' fprintd and of dbus-daemon after every
round (the growth from after round 1 to the end is bounded), and of two
long-running soak processes, `pamharness -n CYCLES -T 4 -q` and `-T 1`, root
on the `login` service, with a rig of their own (a second bus, fprintd and
virtual reader, root enrolled, its own feeder answering half match, half
no-match). Every cycle presses Enter for the finger and gets a match, or
no-matches or a busy reader and then types the right password: whole
fingerprint prompts side by side in one process (4 threads), and in one
malloc arena (1 thread), whose growth per attempt is the clean measure of a
leak. A short soak alongside round 1 measures a cycle under load; the long
ones are then sized to the time left. Each prints its VmRSS after the first
tenth of its cycles and at the end, and is sampled every 0.1 s once its
threads run. All cycles must succeed, and root's attempt number must
rise by exactly one per cycle plus one per no-match the soak's feeder sent.
Rounds run until --seconds have passed and the soaks have ended.
tools/loadharness.c runs such a workload on threads and prints every
transaction that does not succeed, to diagnose a soak failure.

Processes: both rigs (fprintd, dbus-daemon, the polkit stand-in), the
dbus-monitor, the soaks and every phase's process group are stopped by PID
on the way out (SIGTERM included), and a scan of /proc for anything still
running with the run's directory in its environment or command line fails
the run.

Exit status 0 when everything matched, 1 on any mismatch (each one printed).
"""
from .report import format_report, independence, memory_problems
from .run import run_load

__all__ = ["format_report", "independence", "memory_problems", "run_load"]
