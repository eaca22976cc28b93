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
        "kscreenlocker": "Plasma 5's greeter is gone after Debian 12; Plasma 6's runs in the release tier "
                         "outside CI (make test-releases)",
    },
}
CANNOT_RUN["forky"] = CANNOT_RUN["trixie"]


def cannot_run(program):
    """Why `program` does not run on this release (None: it runs)."""
    return CANNOT_RUN.get(RELEASE, {}).get(program)
