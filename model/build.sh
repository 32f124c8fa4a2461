#!/bin/sh
# build.sh - build the timing-model plugin (or QEMU's contrib cache plugin, for
# the benchmark) against the plugin header of the installed QEMU.
#
#   model/build.sh           builds model/plugin/*.c (trapline-model.c and the
#                            files it is split into; options.def is their option table)
#   model/build.sh cache     builds contrib/plugins/cache.c of the same QEMU source
#
# The .so lands in ${TRAPLINE_CACHE:-$HOME/.cache/trapline}/model/<key>/, where
# <key> is the sha256 of the plugin sources (every file in model/plugin/), qemu-plugin.h, the compiler's
# version and the flags: a cached build is reused at once. Builds go to a
# temporary directory that is renamed into place (a concurrent or interrupted
# build never leaves a half-written plugin). Prints the .so path on stdout;
# everything else goes to stderr.
set -eu

say() { printf 'model/build: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${TRAPLINE_CACHE:-$HOME/.cache/trapline}
CC=${CC:-gcc}
what=${1:-model}

QSRC=$("$HERE/fetch-qemu-headers.sh") || die "cannot get qemu-plugin.h (see above)"
HDR="$QSRC/include/qemu/qemu-plugin.h"

case "$what" in
model)
    SRC=$(ls "$HERE"/plugin/*.c)
    KEYED=$(ls "$HERE"/plugin/*)
    SO=libtrapline-model.so
    CFLAGS="-O2 -g -flto -std=gnu11 -fPIC -shared -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden"
    LIBS="-lm -lpthread"
    ;;
cache)
    SRC="$QSRC/contrib/plugins/cache.c"
    KEYED=$SRC
    SO=libcache.so
    if ! pkg-config --exists glib-2.0 2>/dev/null; then
        say "QEMU's contrib cache plugin needs glib's headers: installing libglib2.0-dev"
        SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get install -y -qq libglib2.0-dev pkg-config >&2 || die "cannot install libglib2.0-dev"
    fi
    CFLAGS="-O2 -g -fPIC -shared -Wall $(pkg-config --cflags glib-2.0)"
    LIBS=$(pkg-config --libs glib-2.0)
    ;;
*)
    die "unknown target '$what'; choose one of: model cache"
    ;;
esac
for f in $SRC; do [ -f "$f" ] || die "no source $f"; done

# shellcheck disable=SC2086
key=$( { printf '%s\n' "$what" "$CFLAGS" "$LIBS"; for f in $KEYED; do basename "$f"; done; cat $KEYED "$HDR"; "$CC" --version | head -1; } |
    sha256sum | cut -c1-64)
OUT="$CACHE/model/$key"
if [ -f "$OUT/$SO" ]; then
    echo "$OUT/$SO"
    exit 0
fi

# shellcheck disable=SC2086
say "building $SO from $(for f in $SRC; do basename "$f"; done | tr '\n' ' ')($("$CC" --version | head -1)) into $OUT"
mkdir -p "$CACHE/model"
tmp=$(mktemp -d "$CACHE/model/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# shellcheck disable=SC2086
nice "$CC" $CFLAGS -I"$QSRC/include/qemu" -o "$tmp/$SO" $SRC $LIBS >&2 || die "compile failed"
# shellcheck disable=SC2086
cp $KEYED "$tmp/"
printf 'source %s\nheader %s\ncompiler %s\nflags %s\n' "$SRC" "$HDR" "$("$CC" --version | head -1)" \
    "$CFLAGS $LIBS" >"$tmp/BUILDINFO"
chmod 755 "$tmp"
if ! mv -T "$tmp" "$OUT" 2>/dev/null; then
    [ -f "$OUT/$SO" ] || die "cannot move the build into $OUT"
    say "a concurrent build finished first; using it"
fi
echo "$OUT/$SO"
