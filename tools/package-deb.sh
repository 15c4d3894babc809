#!/usr/bin/env bash
# Builds the Debian package of `mirror`: usr/bin/mirror, its man page (docs/mirror.1), its bash completion
# (tools/completion/mirror.bash) and a postinst that grants the binary CAP_NET_RAW and CAP_NET_ADMIN with setcap.
# Usage: tools/package-deb.sh [BINARY [OUTDIR]]   (default: a fresh release build, the current directory)
# Prints the path of OUTDIR/mirror_VERSION_ARCH.deb. The version is the binary's own (`mirror --version`, from
# MirrorMain.version); Depends comes from its NEEDED libraries (dpkg-shlibdeps), Recommends from the libraries it
# dlopens (the sonames in the binary that are not NEEDED: libmicrohttpd, libcrypto, libedit), each found with dpkg -S.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-.}
if [ -n "${1:-}" ]; then
    binary=$1
else
    (cd "$root" && swift build -c release --product mirror >&2)
    binary="$root/.build/release/mirror"
fi
[ -x "$binary" ] || { echo "package-deb: $binary is not an executable (build it: swift build -c release --product mirror)" >&2; exit 2; }
[ -d "$out" ] || { echo "package-deb: no directory $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
for tool in dpkg-deb dpkg-shlibdeps readelf gzip strip; do
    command -v "$tool" >/dev/null || { echo "package-deb: $tool is missing (tools/setup.sh installs it)" >&2; exit 2; }
done

version=$("$binary" --version)
version=${version#mirror }
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants a source package's layout: debian/control, and the package's tree under debian/PACKAGE.
mkdir -p "$work/debian"
printf 'Source: mirror\n\nPackage: mirror\nArchitecture: any\n' >"$work/debian/control"
stage="$work/debian/mirror"
umask 022
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/share/man/man1" "$stage/usr/share/bash-completion/completions" \
    "$stage/usr/share/doc/mirror"
strip --strip-unneeded -o "$stage/usr/bin/mirror" "$binary"
chmod 0755 "$stage/usr/bin/mirror"
gzip -9n <"$root/docs/mirror.1" >"$stage/usr/share/man/man1/mirror.1.gz"
install -m 0644 "$root/tools/completion/mirror.bash" "$stage/usr/share/bash-completion/completions/mirror"
install -m 0644 "$root/README.md" "$stage/usr/share/doc/mirror/README.md"

# The forms of a library's path dpkg may know it by: the path its package gave it, /lib/... or /usr/lib/...
# (merged /usr makes them one file).
path_forms() {
    local real
    real=$(readlink -f "$1") || real=$1
    printf '%s\n' "$1" "$real" "${real#/usr}" "/usr${1#/usr}" | sort -u
}
# Every "PACKAGE:ARCH: PATH" dpkg knows for the paths on stdin, in one dpkg -S (each call reads dpkg's database).
owners() { xargs -r dpkg -S 2>/dev/null || true; }
# The package (without its architecture) that `owned` lists for one of the forms of path $1, or nothing.
owner_in() {
    local form
    for form in $(path_forms "$1"); do
        awk -v f="$form" '{ i = index($0, ": "); if (i && substr($0, i + 2) == f) { p = substr($0, 1, i - 1); sub(/[:,].*/, "", p); print p; exit } }' <<<"$2" | grep . && return 0
    done
    return 0
}
needed=$(readelf -d "$binary" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
# A library no Debian package provides (the toolchain's Swift runtime in a debug build) is named, not depended on.
resolved=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
owned=$(while read -r _ path; do path_forms "$path"; done <<<"$resolved" | owners)
outside=()
for name in $needed; do
    path=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$resolved")
    [ -n "$path" ] && [ -z "$(owner_in "$path" "$owned")" ] && outside+=("$name")
done
shlibdeps_flags=()
if [ "${#outside[@]}" -gt 0 ]; then
    echo "package-deb: warning: $binary needs libraries no Debian package provides (${outside[*]}); the package runs only where they are installed (a release build links the Swift runtime statically)" >&2
    shlibdeps_flags+=(--ignore-missing-info)
fi
shlibs=$(cd "$work" && dpkg-shlibdeps -O "${shlibdeps_flags[@]}" -e debian/mirror/usr/bin/mirror 2>"$work/shlibdeps.log") || {
    cat "$work/shlibdeps.log" >&2; echo "package-deb: dpkg-shlibdeps failed" >&2; exit 1; }
depends=${shlibs#shlibs:Depends=}
# setcap, which the postinst runs.
depends="$depends, libcap2-bin"

recommends=()
# Read whole, then searched: an awk that stops at its match would end ldconfig with SIGPIPE (a failure under pipefail).
cache=$(ldconfig -p)
for soname in $(grep -aoE 'lib[a-z0-9_+-]+\.so\.[0-9]+' "$binary" | sort -u); do
    grep -qxF "$soname" <<<"$needed" && continue
    path=$(awk -v n="$soname" '$1 == n { print $NF; exit }' <<<"$cache")
    package=""
    [ -z "$path" ] || package=$(owner_in "$path" "$(path_forms "$path" | owners)")
    if [ -z "$package" ]; then
        echo "package-deb: warning: $soname (loaded with dlopen) is not installed here: it is not among Recommends" >&2
        continue
    fi
    recommends+=("$package")
done

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
{
    echo "Package: mirror"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: mirror maintainers <maintainers@users.noreply.a-seed-49067288.example>"
    echo "Installed-Size: $size"
    echo "Depends: $depends"
    [ "${#recommends[@]}" -eq 0 ] || echo "Recommends: $(printf '%s\n' "${recommends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')"
    echo "Section: net"
    echo "Priority: optional"
    echo "Description: raw-ATT Bluetooth Low Energy host tool"
    echo " mirror speaks the Attribute Protocol itself over a raw L2CAP socket on the LE"
    echo " fixed channel (CID 4), with no bluetoothd and no D-Bus in the path: a GATT"
    echo " client, exact ATT errors, notifications with timestamps, write throughput"
    echo " benchmarks, an interactive shell on one connection, and a body-scanning"
    echo " mirror's scan and Wi-Fi procedures. See mirror(1)."
} >"$stage/DEBIAN/control"

cat >"$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# Grants /usr/bin/mirror the capabilities raw HCI work needs (discover, link's HCI values, advertising); an ATT
# connection needs none. A file system without extended attributes refuses: the install goes on, and says so.
set -e
if [ "$1" = configure ]; then
    if ! setcap cap_net_raw,cap_net_admin+ep /usr/bin/mirror; then
        echo "mirror: setcap cap_net_raw,cap_net_admin+ep /usr/bin/mirror failed: discover and the link's HCI values need CAP_NET_RAW and CAP_NET_ADMIN; run that setcap line as root where the file system allows it (mirror doctor says what is missing)" >&2
    fi
fi
exit 0
EOF
chmod 0755 "$stage/DEBIAN/postinst"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

deb="$out/mirror_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$stage" "$deb" >/dev/null
echo "$deb"
