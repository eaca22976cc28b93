#!/usr/bin/env bash
# Builds the Debian binary package localauth_<version>_<arch>.deb from the
# module, the helper and the localauth command already built (make deb
# builds them first), with the files of packaging/debian.
#   DEB_VERSION   the package version (default: the top of the changelog)
#   DEB_OUT       where the .deb goes (default: .build/deb)
# Depends is computed from the binaries by dpkg-shlibdeps. Files in the
# package carry the changelog's date, so two builds of one tree are alike.
set -euo pipefail
umask 022
cd "$(dirname "$0")/.."
meta=packaging/debian
version=${DEB_VERSION:-$(dpkg-parsechangelog -l "$meta/changelog" -S Version)}
out=${DEB_OUT:-.build/deb}
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
epoch=$(dpkg-parsechangelog -l "$meta/changelog" -S Timestamp)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The tree dpkg-shlibdeps expects: a source directory, the package in debian/<name>.
root=$work/src/debian/localauth
# libpam's module directory, under /usr (merged /usr): Debian 13 and later
# install there and lintian calls /lib/… an aliased location; Debian 12,
# whose systems are all merged (/lib is a link to usr/lib), asks libpam for
# /lib/<triplet>/security, the same directory. One package serves 12, 13
# and 14.
pamdir=/usr/lib/$multiarch/security

make -s install DESTDIR="$root" PREFIX=/usr PAMDIR="$pamdir" >/dev/null
helper=$(make -s --no-print-directory helper-path)   # declared once, in the C shim
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root$pamdir/pam_localauth.so"
strip --remove-section=.comment --remove-section=.note "$root$helper" "$root/usr/bin/localauth"
chmod 4755 "$root$helper"   # strip keeps the mode; said again for the reader
gzip -9n "$root"/usr/share/man/man*/*

doc=$root/usr/share/doc/localauth
install -d "$doc" "$root/usr/share/lintian/overrides"
install -m 0644 "$meta/copyright" "$doc/copyright"
gzip -9nc "$meta/changelog" > "$doc/changelog.gz"
sed "s|@PAMDIR@|${pamdir#/}|" "$meta/lintian-overrides" > "$root/usr/share/lintian/overrides/localauth"
chmod 0644 "$root/usr/share/lintian/overrides/localauth"

# Depends from the binaries' libraries.
printf 'Source: localauth\n\nPackage: localauth\nArchitecture: any\n' > "$work/src/debian/control"
install -d "$root/DEBIAN"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O -e"$root$pamdir/pam_localauth.so" \
    -e"$root$helper" -e"$root/usr/bin/localauth" | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "mkdeb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

# Installed-Size as dpkg-gencontrol counts it: each file's KiB rounded up,
# one for each directory or link, whatever filesystem this is built on.
size=$(find "$root" -path "$root/DEBIAN" -prune -o -printf '%y %s\n' |
    awk '$1 == "f" { total += int(($2 + 1023) / 1024) } $1 != "f" { total += 1 } END { print total }')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@SHLIBS@/$shlibs/" \
    "$meta/control.in" > "$root/DEBIAN/control"
install -m 0644 "$meta/conffiles" "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "$meta/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -exec touch -h -d "@$epoch" {} +

mkdir -p "$out"
deb=$out/localauth_${version}_${arch}.deb
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
