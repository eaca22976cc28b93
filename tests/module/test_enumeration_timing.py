"""An unknown user name must not be told apart from a known user without a
fingerprint by how long the module takes (local `login` accepts any name).
The real module through real libpam, with a real fprintd on the rig bus.

The bound: the two medians of 30 interleaved runs within a factor of 2, and
the two ranges overlapping. Measured here, the paths differ by a factor of
about 9 when the unknown name skips the record read and the fprintd queries
(0.5 ms against 4.4 ms to the first prompt), while the same path measured
twice varies by about 15 % between batches and the two fixed paths land
within a few percent of each other; interleaving makes load hit both alike,
so noise does not reach a factor of 2 while the leak it guards against is
far above it. `make bench` prints the same medians."""
import statistics

from pamenv import prompt_timings

FACTOR = 2.0


def test_an_unknown_name_takes_as_long_as_a_known_user_without_a_finger(pam, rig):
    timings = prompt_timings(pam, ["bob", "nosuchuser"], runs=30, env=rig.env())
    for which, label in ((0, "time to the first prompt"), (1, "whole call")):
        known = [pair[which] for pair in timings["bob"]]
        unknown = [pair[which] for pair in timings["nosuchuser"]]
        ratio = statistics.median(unknown) / statistics.median(known)
        assert 1 / FACTOR <= ratio <= FACTOR, f"{label}: medians {statistics.median(known)} vs {statistics.median(unknown)} us"
        assert min(unknown) <= max(known) and min(known) <= max(unknown), f"{label}: ranges apart"
