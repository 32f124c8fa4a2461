#!/usr/bin/env bash
# Buildroot post-image script of the TRAPLINE tree: lays out BINARIES_DIR as
# images/build.sh lays out its OUTDIR, so images/boot.sh boots it unchanged:
#
#   <kernel>              the image QEMU boots, named as trapline/arch.py's Linux kname
#                         (vmlinux-sparc64, zImage-armv6, bzImage-x86_64)
#   <dtb>                 beside the kernel, where boot.sh looks for it (armv6:
#                         bcm2835-rpi-zero.dtb)
#   initramfs-ARCH.cpio   Buildroot's rootfs.cpio (BusyBox, glibc, the trapline-guest
#                         package: /init, /trapline/tests, /trapline/bin, run.list)
#   System.map vmlinux linux.config   from the kernel's build tree (the timing model's
#                         guest lane reads System.map: the trap table's address)
#   boot-ARCH.env         ARCH= KERNEL= INITRD= [DTB=] LINUX_SHA256= INITRD_SHA256=
#                         LINUX_CACHE= INITRD_CACHE= [INIT_SNAPSHOT_SPIN=], as build.sh
#                         prints them, plus BUILDER=buildroot BUILDROOT_VERSION=
#                         LINUX_VERSION= DEFCONFIG=
#
# Buildroot runs it as: post-image.sh BINARIES_DIR, with BR2_CONFIG, BUILD_DIR and
# BR2_VERSION in the environment. The architecture's names come from trapline/arch.py
# (python3 -m trapline.arch build ARCH), the architecture itself from the
# trapline-guest package (BINARIES_DIR/trapline-guest.txt).
set -euo pipefail

BIN=${1:?usage: post-image.sh BINARIES_DIR}
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
die() { echo "post-image.sh: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
conf() { sed -n "s/^$1=\"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}\$/\\1/p" "$BR2_CONFIG"; }

[[ -f $BIN/trapline-guest.txt ]] || die "$BIN/trapline-guest.txt missing (is BR2_PACKAGE_TRAPLINE_GUEST set?)"
ARCH=$(sed -n 's/^arch=//p' "$BIN/trapline-guest.txt")
table=$(cd "$TOP" && python3 -m trapline.arch build "$ARCH") || die "trapline/arch.py does not know '$ARCH'"
eval "$table"

VERSION=$(conf BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE)
LINUX="$BUILD_DIR/linux-$VERSION"
[[ -f $LINUX/System.map ]] || die "no $LINUX/System.map (BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE='$VERSION')"

KERNEL="$BIN/$TL_KNAME"
INITRD="$BIN/initramfs-$ARCH.cpio"
cp -f "$BIN/$(basename "$TL_KIMAGE")" "$KERNEL"
cp -f "$BIN/rootfs.cpio" "$INITRD"
cp -f "$LINUX/System.map" "$LINUX/vmlinux" "$BIN/"
cp -f "$LINUX/.config" "$BIN/linux.config"
DTB=""
if [[ -n $TL_DTBSRC ]]; then
	DTB="$BIN/$(basename "$TL_DTBSRC")"
	[[ -f $DTB ]] || die "no device tree $DTB (BR2_LINUX_KERNEL_INTREE_DTS_NAME)"
fi

{
	echo "ARCH=$ARCH"
	echo "KERNEL=$KERNEL"
	echo "INITRD=$INITRD"
	[[ -z $DTB ]] || echo "DTB=$DTB"
	echo "LINUX_SHA256=$(sha "$KERNEL")"
	echo "INITRD_SHA256=$(sha "$INITRD")"
	echo "LINUX_CACHE=$BIN"
	echo "INITRD_CACHE=$BIN"
	sed -n 's/^init_snapshot_spin=/INIT_SNAPSHOT_SPIN=/p' "$BIN/trapline-guest.txt"
	echo "BUILDER=buildroot"
	echo "BUILDROOT_VERSION=${BR2_VERSION:-unknown}"
	echo "LINUX_VERSION=$VERSION"
	echo "DEFCONFIG=$(basename "$(conf BR2_DEFCONFIG)")"
} >"$BIN/boot-$ARCH.env"
echo "post-image.sh: $ARCH laid out in $BIN (boot-$ARCH.env)"
