#!/usr/bin/env bash
# trapline: the one entry point.
#
#   ./run.sh reproduce-all [--quick]     every experiment, one report
#   ./run.sh test                        the test suite (what .ci/run calls)
#   ./run.sh list | run ID ... | report [RUN] | build [--arch A] | images [--arch A]
#   ./run.sh gem5 build                  trapline's gem5 (gem5 v24.0.0.1 + gem5_configs/changes/), cached
#
# On a fresh Debian 12 machine the first call installs what trapline needs:
# the Debian packages below (when missing) and a virtualenv with the pinned
# Python dependencies (requirements.txt), cached outside the clone by content
# hash. A second call checks both in well under a second and goes straight on.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${TRAPLINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trapline}
PYTHON=${TRAPLINE_PYTHON:-/usr/bin/python3}
# The compilers build every kernel for x86_64, sparc64 and armv6; qemu-user
# runs the cross-built kernels and the timing model; python3-venv holds the
# harness (python3-dev builds pycachesim, the cache oracle of the tests).
# The guest lane builds Linux from linux-source-6.1 (bison, flex, bc, libelf,
# libssl, cpio, xz, perl, rsync) and boots it with Debian's QEMU system emulators.
# The cross C libraries are only "recommended" by the cross compilers (and we
# install without recommends); dpkg-dev unpacks QEMU's source for the plugin
# header (model/fetch-qemu-headers.sh); git feeds the run manifest; valgrind
# (cachegrind) is the second oracle of the timing model (tests/test_82). gem5 is
# the user's (docs/gem5.md) and the tests use the binary in ../shared/gem5/: its
# runtime libraries (ldd gem5.opt: libpython3.11 to zlib1g) are Debian packages too.
APT_PACKAGES=(make gcc libc6-dev binutils git
              gcc-sparc64-linux-gnu binutils-sparc64-linux-gnu libc6-dev-sparc64-cross
              gcc-arm-linux-gnueabi binutils-arm-linux-gnueabi libc6-dev-armel-cross
              qemu-user python3 python3-venv python3-dev
              linux-source-6.1 bison flex bc libelf-dev libssl-dev cpio xz-utils perl rsync
              qemu-system-sparc qemu-system-arm qemu-system-x86
              dpkg-dev valgrind linux-perf
              libpython3.11 libprotobuf32 libhdf5-103-1 libhdf5-cpp-103-1 libpng16-16 libtcmalloc-minimal4
              libcurl4 zlib1g
              chromium)  # the report test renders report.html in headless chromium (tests/test_42)

# `./run.sh gem5 build` (trapline's gem5 from source) needs gem5's build tools too: the
# packages trapline/platforms/gem5/from_source.py checks for (it lists them, standard library only).
if [ "${1:-}" = gem5 ] && [ "${2:-}" = build ]; then
    mapfile -t GEM5_BUILD_PACKAGES < <(PYTHONPATH="$HERE" "$PYTHON" "$HERE/trapline/platforms/gem5/from_source.py" packages)
    APT_PACKAGES+=("${GEM5_BUILD_PACKAGES[@]}")
fi

say() { printf 'trapline: %s\n' "$*" >&2; }

# The packages were all installed when $APT_OK was written, with the same list, and dpkg's
# database has not changed since: nothing to ask (builtins only: no process is started;
# asking dpkg-query once per package cost 0.1-0.9 s of every command: docs/performance.md).
APT_OK="$CACHE/.apt-ok"
apt_known_ok() {
    local line=
    [ -f "$APT_OK" ] && [ "$APT_OK" -nt /var/lib/dpkg/status ] && read -r line <"$APT_OK" &&
        [ "$line" = "${APT_PACKAGES[*]}" ]
}

ensure_apt() {
    apt_known_ok && return 0
    local missing=() p st
    # one dpkg-query for every package; a package dpkg has never heard of prints nothing
    declare -A status=()
    while IFS=' ' read -r p st; do status[$p]=$st; done < <(dpkg-query -W -f='${Package} ${Status}\n' \
        "${APT_PACKAGES[@]}" 2>/dev/null | sed 's/ install ok installed$/ ok/')
    for p in "${APT_PACKAGES[@]}"; do
        [ "${status[$p]:-}" = ok ] || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        { mkdir -p "$CACHE" && printf '%s\n' "${APT_PACKAGES[*]}" >"$APT_OK"; } 2>/dev/null || true
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then sudo=(sudo); else
            say "missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})"
            exit 1
        fi
    fi
    say "installing Debian packages: ${missing[*]}"
    # wait (up to 10 minutes) while another apt holds its locks: on a machine that has
    # just booted, its own package jobs may still be running
    local i out
    for i in $(seq 60); do
        out=$("${sudo[@]}" apt-get update -qq 2>&1) && break
        case $out in *"Could not get lock"*) [ "$i" = 1 ] && say "apt is busy (lock held); waiting"; sleep 10 ;;
                     *) printf '%s\n' "$out" >&2; break ;; esac
    done
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2 ||
        { say "apt-get install failed"; exit 1; }
}

# The venv the last call used, while requirements.txt and the Python it was made for are
# older than this note (builtins only: the key below starts Python and sha256sum).
VENV_OK="$CACHE/.venv-ok${HERE//\//_}"  # one note per clone
ensure_venv() {
    local key line=
    if [ -f "$VENV_OK" ] && [ "$VENV_OK" -nt "$HERE/requirements.txt" ] && [ "$VENV_OK" -nt "$PYTHON" ] &&
        read -r line <"$VENV_OK" && [ "${line%% *}" = "$HERE/requirements.txt:$PYTHON" ] &&
        [ -f "${line#* }/.ok" ]; then
        VENV=${line#* }
        return 0
    fi
    key=$( { cat "$HERE/requirements.txt"; "$PYTHON" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
    VENV="$CACHE/venv-$key"
    if [ -f "$VENV/.ok" ]; then
        { printf '%s %s\n' "$HERE/requirements.txt:$PYTHON" "$VENV" >"$VENV_OK"; } 2>/dev/null || true
        return 0
    fi
    mkdir -p "$CACHE"
    # one creator at a time: a second ./run.sh started meanwhile waits here for the
    # first to finish the venv instead of deleting it half-made (flock from util-linux)
    exec 9>"$VENV.lock"
    if ! flock -n 9; then
        say "another ./run.sh is creating the Python environment; waiting for it"
        flock 9
    fi
    if [ ! -f "$VENV/.ok" ]; then
        say "creating the Python environment in $VENV (pinned: requirements.txt)"
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt" >&2
        touch "$VENV/.ok"
    fi
    exec 9>&-
    { printf '%s %s\n' "$HERE/requirements.txt:$PYTHON" "$VENV" >"$VENV_OK"; } 2>/dev/null || true
}

if [ "${TRAPLINE_SKIP_APT:-0}" != 1 ]; then ensure_apt; fi
ensure_venv
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
cd "$HERE"
if [ "${1:-}" = test ]; then
    shift
    exec "$VENV/bin/python" -m pytest "$@"
fi
if [ "${1:-}" = python ]; then  # the venv's python, for scripts (model/bench-gem5.sh)
    shift
    exec "$VENV/bin/python" "$@"
fi
exec "$VENV/bin/python" -m trapline "$@"
