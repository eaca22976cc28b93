"""Which Debian release the suite runs on (tools/in-release names it in
LOCALAUTH_RELEASE; otherwise this machine, Debian 12), and what the tests
meet differently there. Each fact was measured in that release's root."""
import os

RELEASE = os.environ.get("LOCALAUTH_RELEASE") or "bookworm"

# Programs a release's archive holds but that cannot run as the tests run
# them there, with the reason a skip reports.
CANNOT_RUN = {
    "trixie": {
        "cinnamon-screensaver": "Debian 13's archive has no Cinnamon (cinnamon-common), whose settings schema "
                                "org.cinnamon.keyboard cinnamon-screensaver 6.4 needs to start",
        "kscreenlocker": "Plasma 6's lock screen runs two conversations side by side: "
                         "tests/programs/test_plasma6_lockscreen.py",
    },
}
CANNOT_RUN["forky"] = CANNOT_RUN["trixie"]


def cannot_run(program):
    """Why `program` does not run on this release (None: it runs)."""
    return CANNOT_RUN.get(RELEASE, {}).get(program)


# Plasma's major version in the archive: 5.27 in Debian 12, 6 after it.
# Plasma 6's lock screen runs a kde-fingerprint conversation beside kde.
PLASMA = 5 if RELEASE == "bookworm" else 6
