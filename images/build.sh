#!/usr/bin/env bash
# Build a trapline guest image: a Linux kernel (Debian's linux-source-6.1, tinyconfig
# plus images/<arch>/config.fragment) and an initramfs (our static /init, the trap
# tests in images/tests, and a directory of benchmark binaries).
#
#   images/build.sh ARCH [OUTDIR] [BINDIR]
#
#   ARCH    sparc64 (QEMU -M sun4u) | armv6 (QEMU -M raspi0) | x86_64 (QEMU pc, 2 NUMA nodes);
#           its cross prefix, flags and Linux targets come from trapline/arch.py
#   OUTDIR  optional ('' to skip): copy the artifacts there (kernel, dtb,
#           initramfs-ARCH.cpio, boot-ARCH.env)
#   BINDIR  optional (or $TRAPLINE_BINDIR): directory copied to /trapline/bin in the
#           initramfs, subdirectories kept (e.g. the output of `make -C kernels O=...`).
#           If it holds a file run.list, that becomes /trapline/run.list (one command
#           per line with guest paths, e.g. /trapline/bin/<id>/<name> key=value);
#           otherwise a default list runs the tests in images/tests for ARCH.
#           Dynamically linked programs get their ELF interpreter and libraries.
#
# Prints on stdout shell-style lines ARCH=, KERNEL=, INITRD=, DTB= (armv6 only),
# LINUX_SHA256=, INITRD_SHA256=, LINUX_CACHE=, INITRD_CACHE=, and INIT_SNAPSHOT_SPIN= where
# init has that symbol (sparc64). Progress goes to stderr.
#
# The work is split in two sourced halves with separate cache keys:
#   lib/linux.sh      kernel:    ${CACHE}/<arch>-linux-<key>/
#                     key = sha256 of: this script, lib/linux.sh, the arch table's
#                     Linux values (cross prefix, ARCH=, targets), the config fragment,
#                     linux-source-6.1 package version, (cross-)gcc and binutils
#                     versions, SOURCE_DATE_EPOCH
#   lib/initramfs.sh  initramfs: ${CACHE}/<arch>-initramfs-<key>/
#                     key = sha256 of: this script, lib/initramfs.sh, the arch table's
#                     cross prefix, flags and library dirs, init/init.c,
#                     tests/*.c, gcc version, linux-source version (gen_init_cpio comes
#                     from it), SOURCE_DATE_EPOCH, names/modes/sha256 of BINDIR's files
# with CACHE=${TRAPLINE_CACHE:-$HOME/.cache/trapline}/images. New benchmark binaries
# only rebuild the initramfs (seconds); a second call with the same inputs is
# instant. Entries are built in a temporary directory and renamed into place; locks
# (CACHE/.lock-linux, CACHE/.lock-initramfs-ARCH) let only one kernel compile at a
# time and keep concurrent calls from building the same entry twice.
#
# Reproducible: SOURCE_DATE_EPOCH (default: the date of the linux-source package's
# newest changelog entry), KBUILD_BUILD_TIMESTAMP derived from it,
# KBUILD_BUILD_USER/HOST=trapline, KBUILD_BUILD_VERSION=1, in-tree builds (relative
# paths), LC_ALL=C, TZ=UTC, umask 022; initramfs from a sorted list, all mtimes =
# SOURCE_DATE_EPOCH, uid/gid 0.
# TRAPLINE_REPRO_CHECK=1 builds the kernel a second time in another directory and
# compares the sha256 of the kernel image and vmlinux (result in the kernel's
# manifest.txt; exit 3 on a mismatch). If the kernel is cached, only the second
# build runs; if the manifest already has a result, nothing runs.
#
# Environment: TL_* (the arch table's values, trapline/arch.py), TRAPLINE_CACHE, TRAPLINE_BINDIR, TRAPLINE_JOBS (default 2),
# TRAPLINE_NICE (default 19), TRAPLINE_REPRO_CHECK, SOURCE_DATE_EPOCH,
# TRAPLINE_LINUX_TARBALL (default /usr/src/linux-source-6.1.tar.xz).
set -euo pipefail
umask 022
export LC_ALL=C TZ=UTC

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/build.sh"

die() { echo "build.sh: $*" >&2; exit 2; }
log() { echo "build.sh: $*" >&2; }
sha() { sha256sum "$@" | cut -d' ' -f1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[[ $# -ge 1 && $# -le 3 ]] || die "usage: images/build.sh ARCH [OUTDIR] [BINDIR]  (ARCH: trapline/arch.py)"
ARCH=$1
OUTDIR=${2:-}
BINDIR=${3:-${TRAPLINE_BINDIR:-}}
JOBS=${TRAPLINE_JOBS:-2}
NICE=${TRAPLINE_NICE:-19}
TARBALL=${TRAPLINE_LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
LINUX_PKG=linux-source-6.1

# The architecture's values come from the one table, trapline/arch.py: the harness
# (trapline/images.py) passes them as TL_* variables; run by hand, the script asks
# the table itself (python3 -m trapline.arch build ARCH; unknown ARCH: exit 2).
if [[ ${TL_ARCH:-} != "$ARCH" ]]; then
	table=$(cd "$HERE/.." && python3 -m trapline.arch build "$ARCH") || exit 2
	eval "$table"
fi
CROSS=$TL_CROSS GCC_PKG=$TL_GCC_PKG
# the kernel: make ARCH=, targets, the image QEMU boots (stored as KNAME), device tree
KARCH=$TL_KARCH KTARGETS=$TL_KTARGETS KIMAGE=$TL_KIMAGE KNAME=$TL_KNAME DTBSRC=$TL_DTBSRC
# the initramfs: code generation flags, where dynamic programs find their libraries
UFLAGS=$TL_CFLAGS SYSROOT_LIBS=$TL_SYSROOT_LIBS

# shellcheck source=lib/linux.sh
source "$HERE/lib/linux.sh"
# shellcheck source=lib/initramfs.sh
source "$HERE/lib/initramfs.sh"

FRAGMENT="$HERE/$ARCH/config.fragment"
INIT_SRC="$HERE/init/init.c"
CC="${CROSS}gcc"
[[ -f $FRAGMENT ]] || die "missing $FRAGMENT"
[[ -f $TARBALL ]] || die "missing $TARBALL (apt-get install $LINUX_PKG)"
command -v "$CC" >/dev/null || die "missing $CC (apt-get install $GCC_PKG)"
if [[ -n $BINDIR ]]; then
	[[ -d $BINDIR ]] || die "BINDIR '$BINDIR' is not a directory"
	BINDIR=$(cd "$BINDIR" && pwd)
fi

pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
LINUX_VER=$(pkgver $LINUX_PKG)
GCC_VER="$(pkgver "$GCC_PKG") $("$CC" --version | head -n1)"
LD_VER=$("${CROSS}ld" --version | head -n1)

if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
	d=$(zcat "/usr/share/doc/$LINUX_PKG/changelog.Debian.gz" 2>/dev/null | sed -n 's/^ -- .*>  //p' | head -n1 || true)
	SOURCE_DATE_EPOCH=$(date -u -d "$d" +%s 2>/dev/null || echo 1700000000)
fi
export SOURCE_DATE_EPOCH
export KBUILD_BUILD_TIMESTAMP="$(date -u -d "@$SOURCE_DATE_EPOCH" '+%a %b %e %H:%M:%S UTC %Y')"
export KBUILD_BUILD_USER=trapline KBUILD_BUILD_HOST=trapline KBUILD_BUILD_VERSION=1

CACHE=${TRAPLINE_CACHE:-$HOME/.cache/trapline}/images
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

LINUX_KEY=$({
	echo "trapline-linux 1"
	echo "arch=$ARCH"
	echo "build.sh=$(sha "$SELF")"
	echo "lib/linux.sh=$(sha "$HERE/lib/linux.sh")"
	echo "table=$CROSS|$KARCH|$KTARGETS|$KIMAGE|$KNAME|$DTBSRC"
	echo "fragment=$(sha "$FRAGMENT")"
	echo "$LINUX_PKG=$LINUX_VER"
	echo "gcc=$GCC_VER"
	echo "ld=$LD_VER"
	echo "epoch=$SOURCE_DATE_EPOCH"
} | sha)

bindir_digest() {
	[[ -n $BINDIR ]] || { echo none; return; }
	(cd "$BINDIR" && find . -mindepth 1 -printf '%y %m %p %l\n' | sort &&
		find . -type f -print0 | sort -z | xargs -0 -r sha256sum) | sha
}
INITRD_KEY=$({
	echo "trapline-initramfs 1"
	echo "arch=$ARCH"
	echo "build.sh=$(sha "$SELF")"
	echo "lib/initramfs.sh=$(sha "$HERE/lib/initramfs.sh")"
	echo "table=$CROSS|$UFLAGS|$SYSROOT_LIBS"
	echo "init.c=$(sha "$INIT_SRC")"
	(cd "$HERE/tests" && sha256sum ./*.c)
	echo "$LINUX_PKG=$LINUX_VER"
	echo "gcc=$GCC_VER"
	echo "epoch=$SOURCE_DATE_EPOCH"
	echo "bindir=$(bindir_digest)"
} | sha)

LINUX_DIR="$CACHE/$ARCH-linux-$LINUX_KEY"
INITRD_DIR="$CACHE/$ARCH-initramfs-$INITRD_KEY"
TOOLS_DIR="$CACHE/tools-$LINUX_VER"

# Locks: one kernel build at a time on this machine (CACHE/.lock-linux, any arch);
# initramfs builds only exclude each other per arch (CACHE/.lock-initramfs-ARCH), so
# a quick initramfs rebuild never waits for a kernel compile of another arch. Each
# lock is held until the script exits; the cache is re-checked after taking it.
take_lock() {
	local fd=$1 file=$2
	eval "exec $fd>\"\$file\""
	if ! flock -n "$fd"; then
		log "waiting for another build.sh (lock $file)"
		flock "$fd"
	fi
}
want_repro() {
	[[ ${TRAPLINE_REPRO_CHECK:-0} == 1 ]] && ! grep -qs '^repro_check=' "$LINUX_DIR/manifest.txt"
}

if [[ ! -f $LINUX_DIR/manifest.txt ]] || want_repro; then
	take_lock 8 "$CACHE/.lock-linux"
fi
if [[ -f $LINUX_DIR/manifest.txt ]]; then
	log "$ARCH: kernel cached: $LINUX_DIR"
else
	linux_build_cached
fi
if want_repro; then
	linux_repro_check || exit $?
fi

if [[ ! -f $INITRD_DIR/initramfs.cpio ]]; then
	take_lock 9 "$CACHE/.lock-initramfs-$ARCH"
fi
if [[ -f $INITRD_DIR/initramfs.cpio ]]; then
	log "$ARCH: initramfs cached: $INITRD_DIR"
else
	initramfs_build_cached
fi

KERNEL="$LINUX_DIR/$KNAME"
INITRD="$INITRD_DIR/initramfs.cpio"
DTB=""
[[ -z $DTBSRC ]] || DTB="$LINUX_DIR/$(basename "$DTBSRC")"

if [[ -n $OUTDIR ]]; then
	mkdir -p "$OUTDIR"
	OUTDIR=$(cd "$OUTDIR" && pwd)
	cp -f "$KERNEL" "$OUTDIR/"
	cp -f "$INITRD" "$OUTDIR/initramfs-$ARCH.cpio"
	KERNEL="$OUTDIR/$KNAME"
	INITRD="$OUTDIR/initramfs-$ARCH.cpio"
	if [[ -n $DTB ]]; then
		cp -f "$DTB" "$OUTDIR/"
		DTB="$OUTDIR/$(basename "$DTB")"
	fi
fi

result() {
	echo "ARCH=$ARCH"
	echo "KERNEL=$KERNEL"
	echo "INITRD=$INITRD"
	[[ -z $DTB ]] || echo "DTB=$DTB"
	echo "LINUX_SHA256=$(sha "$KERNEL")"
	echo "INITRD_SHA256=$(sha "$INITRD")"
	echo "LINUX_CACHE=$LINUX_DIR"
	echo "INITRD_CACHE=$INITRD_DIR"
	# init's snapshot spin, where a sun4u snapshot is taken (boot.sh TRAPLINE_SNAPSHOT_BREAK)
	sed -n 's/^init_snapshot_spin=/INIT_SNAPSHOT_SPIN=/p' "$INITRD_DIR/manifest.txt"
}
if [[ -n $OUTDIR ]]; then result >"$OUTDIR/boot-$ARCH.env"; fi
result
