#!/bin/sh
# fetch-qemu-headers.sh - put the QEMU plugin header (and QEMU's contrib
# plugins, for the benchmark) of the *installed* QEMU version into the cache:
#
#   ${TRAPLINE_CACHE:-$HOME/.cache/trapline}/qemu-src-<source version>/
#       include/qemu/qemu-plugin.h
#       contrib/plugins/*.c
#       VERSION  (the Debian source version these came from)
#
# Debian ships no qemu-plugin.h in any binary package, so it comes from
# Debian's qemu source package, pinned to the exact source version of the
# installed qemu-user (dpkg's ${source:Version}, e.g. 1:7.2+dfsg-7+deb12u18).
# If apt has no deb-src entry, one is added in
# /etc/apt/sources.list.d/trapline-deb-src.sources, built from the deb
# stanzas this machine already uses (same URIs, suites, components and
# keyring; no mirror host name is written here).
#
# Idempotent: when the header is already in the cache it prints the directory
# and exits at once. Prints the cache directory on stdout; progress on stderr.
set -eu

say() { printf 'fetch-qemu-headers: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
# apt-get update, waiting (up to 10 minutes) while another apt holds the lists lock:
# on a machine that has just booted, its own package jobs may still be running
apt_update() {
    local i out
    for i in $(seq 60); do
        if out=$($SUDO apt-get update -qq 2>&1); then return 0; fi
        case $out in *"Could not get lock"*) [ "$i" = 1 ] && say "apt is busy (lock held); waiting";
                                              sleep 10 ;;
                     *) printf '%s\n' "$out" >&2; return 1 ;; esac
    done
    printf '%s\n' "$out" >&2; return 1
}

CACHE=${TRAPLINE_CACHE:-$HOME/.cache/trapline}

srcver=$(dpkg-query -W -f='${source:Version}' qemu-user 2>/dev/null || true)
[ -n "$srcver" ] || srcver=$(dpkg-query -W -f='${source:Version}' qemu-system-common 2>/dev/null || true)
[ -n "$srcver" ] || die "no Debian QEMU installed (qemu-user or qemu-system-*); install qemu-user first"
# directory name: the version without the epoch, ':' is awkward in paths
dirver=${srcver#*:}
DEST="$CACHE/qemu-src-$dirver"

if [ -f "$DEST/include/qemu/qemu-plugin.h" ] && [ -f "$DEST/VERSION" ] &&
    [ "$(cat "$DEST/VERSION")" = "$srcver" ]; then
    echo "$DEST"
    exit 0
fi

say "QEMU plugin header for qemu $srcver not cached; fetching Debian's qemu source package"
SUDO=
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to add a deb-src entry and run apt-get update"
    SUDO=sudo
fi

# 1. a deb-src entry, derived from the deb entries already configured
has_src() {
    grep -rqsE '^[[:space:]]*(Types:.*deb-src|deb-src[[:space:]])' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}
if ! has_src; then
    list=/etc/apt/sources.list.d/trapline-deb-src.sources
    tmp=$(mktemp)
    # deb822 files: copy every enabled stanza whose Types has "deb", as deb-src
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN { RS = ""; ORS = "" }
             {
                 n = split($0, L, "\n"); isdeb = 0; off = 0; out = ""
                 for (i = 1; i <= n; i++) {
                     if (L[i] ~ /^#/) continue
                     if (L[i] ~ /^Types:/) {
                         t = " " substr(L[i], 7) " "
                         gsub(/[ \t]+/, " ", t)
                         if (index(t, " deb ")) isdeb = 1
                         L[i] = "Types: deb-src"
                     }
                     if (L[i] ~ /^Enabled:[ \t]*no/) off = 1
                     out = out L[i] "\n"
                 }
                 if (isdeb && !off) print out "\n"
             }' "$f" >>"$tmp"
    done
    # one-line sources.list format
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^[[:space:]]*deb[[:space:]]\{1,\}/deb-src /p' /etc/apt/sources.list >"$tmp.list"
    fi
    if [ -s "$tmp" ]; then
        say "adding deb-src entries (same mirrors as the deb entries) to $list"
        $SUDO install -m 644 "$tmp" "$list"
    elif [ -s "$tmp.list" ]; then
        list=/etc/apt/sources.list.d/trapline-deb-src.list
        say "adding deb-src entries (same mirrors as the deb entries) to $list"
        $SUDO install -m 644 "$tmp.list" "$list"
    else
        rm -f "$tmp" "$tmp.list"
        die "found no deb entries in /etc/apt to derive a deb-src entry from"
    fi
    rm -f "$tmp" "$tmp.list"
    say "apt-get update (to read the source indexes)"
    apt_update || die "apt-get update failed"
elif ! apt-cache showsrc qemu >/dev/null 2>&1 || [ -z "$(apt-cache showsrc qemu 2>/dev/null)" ]; then
    say "apt-get update (deb-src present but no source index for qemu yet)"
    apt_update || die "apt-get update failed"
fi

if ! apt-cache showsrc qemu 2>/dev/null | grep -qFx "Version: $srcver"; then
    die "the archive has no source package qemu=$srcver (the installed version); \
upgrade or downgrade qemu-user to a version the configured mirror still carries"
fi

# 2. download (signed indexes verify the .dsc) and unpack with Debian's patches
mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.qemu-src.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
say "downloading the qemu source package $srcver (about 24 MB) into $work"
# apt checks the files against the signed Sources index. As root it cannot
# hand the download to its _apt sandbox user in our private directory: say so.
sandbox=
[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
# shellcheck disable=SC2086
(cd "$work" && apt-get source -qq $sandbox --download-only "qemu=$srcver" >&2) || die "apt-get source failed"
dsc=$(ls "$work"/*.dsc)
say "unpacking $(basename "$dsc") with dpkg-source (applies Debian's patches)"
# (dpkg-source cannot check the .dsc signature without debian-keyring and says
# so; the files were already verified by apt: keep its output for failures only)
(cd "$work" && dpkg-source -q -x "$dsc" src >"$work/dpkg-source.log" 2>&1) ||
    { cat "$work/dpkg-source.log" >&2; die "dpkg-source -x failed"; }

hdr="$work/src/include/qemu/qemu-plugin.h"
[ -f "$hdr" ] || die "the source package has no include/qemu/qemu-plugin.h"
api=$(sed -n 's/^#define QEMU_PLUGIN_VERSION[[:space:]]\{1,\}\([0-9]*\).*/\1/p' "$hdr")
say "qemu-plugin.h: QEMU_PLUGIN_VERSION $api"

# 3. keep only what the model needs; the rest of the tree is dropped
stage="$work/out"
mkdir -p "$stage/include/qemu" "$stage/contrib/plugins"
cp "$hdr" "$stage/include/qemu/"
cp "$work"/src/contrib/plugins/*.c "$work"/src/contrib/plugins/Makefile "$stage/contrib/plugins/" 2>/dev/null || true
cp "$work/src/COPYING" "$work/src/LICENSE" "$stage/" 2>/dev/null || true
cp "$work/src/VERSION" "$stage/UPSTREAM_VERSION"
printf '%s\n' "$srcver" >"$stage/VERSION"
(cd "$stage" && sha256sum include/qemu/qemu-plugin.h contrib/plugins/*.c >SHA256SUMS)

# 4. atomic publish: a concurrent run that got there first wins
if mv -T "$stage" "$DEST" 2>/dev/null; then
    say "cached in $DEST"
elif [ -f "$DEST/include/qemu/qemu-plugin.h" ]; then
    say "another run cached it first: $DEST"
else
    rm -rf "$DEST"
    mv -T "$stage" "$DEST"
    say "cached in $DEST"
fi
echo "$DEST"
