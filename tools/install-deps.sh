#!/usr/bin/env bash
# Installs what building, the demonstration and the tests need on a fresh
# Debian 12 machine that has only the Swift toolchain. Run as root.
#   install-deps.sh          everything (make deps: the demonstration and the tests)
#   install-deps.sh build    only what building the module, the tool and the
#                            package needs (make build-deps)
#   install-deps.sh --list RELEASE
#                            the packages a root of that release holds for
#                            the release tiers (tools/in-release: trixie,
#                            forky), one per line: the test packages below,
#                            under the names that release gives them
set -euo pipefail
build=(
    make gcc binutils pkg-config util-linux
    libpam0g-dev libsystemd-dev          # the module's C libraries
    libsodium-dev                        # the stored secrets' seal (the helper's, never the module's)
    libtss2-dev                          # the TPM's headers (the helper loads tpm2-tss when it seals)
    dpkg-dev                             # make deb: dpkg-shlibdeps, dpkg-parsechangelog
)
packages=(
    "${build[@]}"
    libpam-modules libpam-runtime        # pam_unix, pam_deny, pam_exec, ...
    libpam-wrapper libnss-wrapper        # real libpam with private service files and users
    pamtester python3 python3-pytest openssl dbus-bin  # test drivers
    valgrind strace                      # the benchmark's instruction counts and breakdown
    libfaketime                          # a wall clock moved for one prompt (it must decide nothing)
    swtpm tpm2-tools                     # a software TPM the secrets' machine key is sealed to, and its clear
    sudo login passwd git                # the real programs of the end-to-end tests (git: the credential helper)
    fprintd libfprint-2-2 dbus-daemon python3-dbusmock python3-gi python3-dbus  # the virtual-sensor rig
    libpam-fprintd                       # the reference the tests and benchmark compare with
    i3lock swaylock sway wtype xscreensaver xsecurelock vlock mate-screensaver  # the real screen lockers of the end-to-end tests
    # Plasma 5.27's real greeter with its Breeze lock screen, and the real
    # cinnamon-screensaver with the introspection data and schema it imports.
    libkscreenlocker5 plasma-workspace qml-module-org-kde-kquickcontrolsaddons
    cinnamon-screensaver cinnamon-common gir1.2-cvc-1.0 gir1.2-caribou-1.0 gir1.2-accountsservice-1.0
    polkitd pkexec                       # the real polkit end to end (polkitd, its agent helper, pkttyagent)
    lxpolkit libpolkit-agent-1-dev       # a real graphical agent, and the library of the GNOME-like stand-in agent
    opendoas                             # the real doas end to end
    xvfb xdotool x11-utils tmux          # driving them headless
    lintian                              # the package's check
    mmdebstrap                           # the roots of the other releases (tools/in-release)
)
# A root of a later release: what the tiers run there need, not what
# building needs (the artifacts are built on this machine).
release_packages() {
    local release=$1 package
    case "$release" in
    trixie|forky) ;;
    *) echo "install-deps.sh: no package list for the release '$release' (trixie, forky)" >&2; return 2 ;;
    esac
    for package in "${packages[@]}"; do
        case "$package" in
        # Building, and the tools that run on the host only.
        gcc|binutils|pkg-config|libpam0g-dev|libsystemd-dev|libsodium-dev|libtss2-dev|dpkg-dev|libpolkit-agent-1-dev|valgrind|mmdebstrap) ;;
        # Plasma 5's greeter is gone after Debian 12 (Plasma 6's below).
        libkscreenlocker5|qml-module-org-kde-kquickcontrolsaddons) ;;
        # Debian 13's archive has no Cinnamon, whose settings
        # cinnamon-screensaver needs to start (tests/support/releases.py).
        cinnamon-screensaver|cinnamon-common|gir1.2-cvc-1.0) ;;
        *) echo "$package" ;;
        esac
    done
    # Plasma 6's greeter and the lock screen it loads (plasma-desktop's
    # shell package, with the QML modules that imports beyond
    # plasma-workspace's); the release's own login-screen stack files
    # (gdm-password, gdm-fingerprint); what every root needs to run the suite.
    # (libsodium is linked into the helper statically: the roots need none.)
    printf '%s\n' libkscreenlocker6 plasma-desktop-data qml6-module-qt5compat-graphicaleffects \
        qml6-module-org-kde-kcmutils gdm3 procps
    # hyprlock is in the archive from Debian 14 on.
    if [ "$release" = forky ]; then echo hyprlock; fi
}
case "${1:-all}" in
build) packages=("${build[@]}") ;;
all) ;;
--list) release_packages "${2:-}"; exit ;;
*) echo "usage: install-deps.sh [build | --list RELEASE]" >&2; exit 2 ;;
esac
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "dependencies present: ${#packages[@]} packages"
