#!/usr/bin/env bash
# Boot a trapline guest image under QEMU and stream its serial console to stdout.
#
#   images/boot.sh ARCH KERNEL INITRD [TIMEOUT]
#
#   ARCH     sparc64 | armv6 | x86_64 (its QEMU machine comes from trapline/arch.py)
#   KERNEL   kernel image from images/build.sh (vmlinux-sparc64, zImage-armv6, bzImage-x86_64)
#   INITRD   initramfs.cpio from images/build.sh
#   TIMEOUT  seconds of wall time before QEMU is killed (default 600)
#
# The guest's /init prints `TLG ...` marker lines (see images/init/init.c) and powers
# off after `TLG done`: QEMU exits by itself on sun4u and x86_64; on raspi0 the kernel
# can only halt, so QEMU is killed as soon as `TLG done` is seen (on the other arches
# after a 5 s grace period if it has not exited).
#
# Environment:
#   TL_*                the arch table's values (trapline/arch.py; asked for if not given)
#   TRAPLINE_APPEND     extra kernel command line, e.g. 'tlg.run="/trapline/tests/hello a=1"'
#                       or 'tlg.timeout=120' or 'quiet' (see init.c for tlg.*)
#   TRAPLINE_SERIAL_LOG also write the console output to this file
#   TRAPLINE_DTB        raspi0 device tree (default: bcm2835-rpi-zero.dtb next to KERNEL)
#   TRAPLINE_MEM        guest RAM in MiB (defaults: sun4u 256, x86_64 512 = 2 x 256,
#                       raspi0 fixed at 512 by the board)
#   TRAPLINE_ACCEL      x86_64 only: tcg (default, same behaviour on every host; -cpu max)
#                       or kvm (-cpu host; untested: KVM failed on the nested build host)
#   TRAPLINE_QEMU_EXTRA extra QEMU arguments (word-split)
#   TRAPLINE_DRY_RUN=1  print the QEMU command line and exit
#   TRAPLINE_SNAPSHOT_SAVE=FILE  snapshot mode, saving: boot with a monitor (a pipe
#                       pair in the script's temporary directory) and, when the guest's
#                       init prints `TLG ready` (it was booted with tlg.wait=1), stop
#                       the machine, save it to FILE (`migrate "exec:cat > FILE"`,
#                       without the global run state, so a restore starts running)
#                       and quit. Exit 0 once the monitor said `Migration status:
#                       completed`. trapline/guest.py checks and keeps the file.
#   TRAPLINE_INCOMING=FILE  snapshot mode, restoring: start from FILE (`-incoming
#                       "exec:cat FILE"`) instead of booting; the rest of the command
#                       line must be the one the snapshot was saved with (its -append
#                       included), plus anything that is not machine state (-plugin).
#   In both snapshot modes an arch with TL_SNAPSHOT_HOST_PAGE (sun4u) runs QEMU with
#   images/qemu-pagesize.c preloaded (below), which QEMU 7.2 needs to save it.
#   TRAPLINE_SNAPSHOT_BREAK=0xADDR  with TRAPLINE_SNAPSHOT_SAVE: save the machine when
#                       it first executes ADDR (init's tlg_snapshot_spin, from the
#                       image: INIT_SNAPSHOT_SPIN) instead of wherever `stop` finds it:
#                       QEMU starts paused (-S) with its gdb stub on a pipe pair, gets
#                       a breakpoint there and `c`; at `TLG ready` the script waits
#                       for the stub's stop reply, then saves. Under -icount the guest
#                       then reaches the same instruction at the same virtual time in
#                       every boot, so every snapshot holds the same machine.
#
# Exit status: 0 if `TLG done` was seen (saving: the snapshot was saved), 124 on
# timeout, 125 if QEMU ended without `TLG done` (panic, crash, a snapshot that did
# not load), 2 on a usage error.
# On stderr: the QEMU command line, then `boot.sh: init_seen_s=... done_seen_s=...
# qemu_exit_s=...` (host wall seconds from QEMU start to the `TLG init` line, the
# `TLG done` line, and QEMU's end).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "boot.sh: $*" >&2; exit 2; }
[[ $# -ge 3 && $# -le 4 ]] || die "usage: images/boot.sh ARCH KERNEL INITRD [TIMEOUT]"
ARCH=$1 KERNEL=$2 INITRD=$3 TIMEOUT=${4:-600}
[[ -f $KERNEL ]] || die "no kernel $KERNEL"
[[ -f $INITRD ]] || die "no initramfs $INITRD"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "TIMEOUT must be whole seconds"

APPEND_EXTRA=${TRAPLINE_APPEND:-}
# The machine comes from the one table, trapline/arch.py: the harness
# (trapline/images.py) passes it as TL_* variables; run by hand, the script asks the
# table itself (python3 -m trapline.arch boot ARCH; unknown ARCH: exit 2).
# TL_QEMU_MACHINE holds -M, the CPU, the RAM and the -numa layout (x86_64: two vCPUs,
# one per NUMA node, each node half the RAM; QEMU exports it in ACPI SRAT/SLIT).
if [[ ${TL_ARCH:-} != "$ARCH" ]]; then
	table=$(cd "$HERE/.." && python3 -m trapline.arch boot "$ARCH") || exit 2
	eval "$table"
fi
read -r -a MACHINE <<<"$TL_QEMU_MACHINE"
QEMU=("$TL_QEMU" "${MACHINE[@]}")
if [[ -n $TL_DTB_NAME ]]; then
	DTB=${TRAPLINE_DTB:-$(dirname "$KERNEL")/$TL_DTB_NAME}
	[[ -f $DTB ]] || die "no device tree $DTB (set TRAPLINE_DTB)"
	QEMU+=(-dtb "$DTB")
fi
# panic=-1: reboot at once on a panic; with -no-reboot QEMU then exits instead of
# hanging until the timeout (raspi0 cannot reboot itself and still waits).
APPEND="console=$TL_CONSOLE panic=-1"
# seconds to let a guest that can power off end QEMU itself after `TLG done`
GRACE=$TL_GRACE
[[ -z $APPEND_EXTRA ]] || APPEND="$APPEND $APPEND_EXTRA"
# Serial console on stdio, no monitor, no graphics; -no-reboot makes a guest reboot
# (or panic=-1) end QEMU.
QEMU+=(-nographic -monitor none -serial stdio -no-reboot
	-kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND")
# shellcheck disable=SC2206
[[ -z ${TRAPLINE_QEMU_EXTRA:-} ]] || QEMU+=(${TRAPLINE_QEMU_EXTRA})
SAVE=${TRAPLINE_SNAPSHOT_SAVE:-}
INCOMING=${TRAPLINE_INCOMING:-}
[[ -z $SAVE || -z $INCOMING ]] || die "TRAPLINE_SNAPSHOT_SAVE and TRAPLINE_INCOMING exclude each other"
[[ $SAVE$INCOMING =~ ^[A-Za-z0-9_./:=,@+-]*$ ]] || die "snapshot paths may hold only [A-Za-z0-9_./:=,@+-]"
tmp=$(mktemp -d)
if [[ -n $SAVE ]]; then
	mkfifo "$tmp/mon.in" "$tmp/mon.out"
	QEMU+=(-chardev "pipe,id=tlgmon,path=$tmp/mon" -mon chardev=tlgmon,mode=readline
		-global migration.store-global-state=off)
fi
BREAK=${TRAPLINE_SNAPSHOT_BREAK:-}
if [[ -n $BREAK ]]; then
	[[ -n $SAVE ]] || die "TRAPLINE_SNAPSHOT_BREAK goes with TRAPLINE_SNAPSHOT_SAVE"
	[[ $BREAK =~ ^0x[0-9a-f]+$ ]] || die "TRAPLINE_SNAPSHOT_BREAK must be an address in hex (0x...), not '$BREAK'"
	mkfifo "$tmp/gdb.in" "$tmp/gdb.out"
	QEMU+=(-S -chardev "pipe,id=tlggdb,path=$tmp/gdb" -gdb chardev:tlggdb)
fi
if [[ -n $INCOMING ]]; then
	[[ -f $INCOMING ]] || die "no snapshot $INCOMING"
	QEMU+=(-incoming "exec:cat $INCOMING")
fi

{
	printf 'boot.sh: qemu:'
	for a in "${QEMU[@]}"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,@+-]+$ ]]; then printf ' %s' "$a"; else printf " '%s'" "${a//\'/\'\\\'\'}"; fi
	done
	printf '\n'
} >&2
[[ ${TRAPLINE_DRY_RUN:-0} != 1 ]] || { rm -rf "$tmp"; exit 0; }

# QEMU 7.2 cannot save a machine whose target pages are larger than the host's
# (sun4u's 8 KiB on a 4 KiB host: SIGFPE, QEMU issue 1456): in snapshot mode, saving
# or restoring, an arch whose table entry names a larger host page
# (TL_SNAPSHOT_HOST_PAGE) runs QEMU with images/qemu-pagesize.c preloaded, which
# makes QEMU see host pages of that size. It is built here, once per sha256 of that
# file, in the cache (or in this run's temporary directory where the cache cannot
# be written).
PRELOAD=()
if [[ -n $SAVE$INCOMING ]] && ((${TL_SNAPSHOT_HOST_PAGE:-0} > $(getconf PAGESIZE))); then
	src=$HERE/qemu-pagesize.c
	sum=$(sha256sum "$src" | cut -c1-16)
	dir=${TRAPLINE_CACHE:-$HOME/.cache/trapline}/qemu-pagesize
	{ mkdir -p "$dir" 2>/dev/null && [[ -w $dir ]]; } || dir=$tmp
	so=$dir/qemu-pagesize-$sum.so
	if [[ ! -f $so ]]; then
		cc -O2 -shared -fPIC -o "$so.$$" "$src" -ldl || { rm -rf "$tmp"; die "cannot build $src"; }
		mv -f "$so.$$" "$so"
	fi
	PRELOAD=(env "LD_PRELOAD=$so" "TL_HOST_PAGE=$TL_SNAPSHOT_HOST_PAGE")
	echo "boot.sh: preload: $so TL_HOST_PAGE=$TL_SNAPSHOT_HOST_PAGE (QEMU 7.2 saves this machine only so)" >&2
fi

# Host wall clock in microseconds (bash 5 EPOCHREALTIME; no forks per console line).
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo $((10#$t)); }
fmt_s() { printf '%d.%03d' $(($1 / 1000000)) $((($1 % 1000000) / 1000)); }

fifo="$tmp/console"
mkfifo "$fifo"
t0=$(now_us)
# QEMU dies with this script even when it is SIGKILLed (no trap runs then):
# setpriv (util-linux) sets the parent-death signal before exec
setpriv --pdeathsig KILL -- "${PRELOAD[@]}" "${QEMU[@]}" </dev/null >"$fifo" 2>"$tmp/qemu.err" &
qpid=$!
if [[ -n $SAVE ]]; then
	# the monitor's replies (QEMU holds both ends open read-write: EOF when it exits)
	cat "$tmp/mon.out" >"$tmp/mon.log" &
fi
# gdb remote protocol packet: $body#checksum (the sum of body's bytes mod 256)
gdb_packet() {
	local b=$1 s=0 c i
	for ((i = 0; i < ${#b}; i++)); do
		printf -v c '%d' "'${b:i:1}"
		s=$(((s + c) % 256))
	done
	printf '$%s#%02x' "$b" "$s"
}
if [[ -n $BREAK ]]; then
	cat "$tmp/gdb.out" >"$tmp/gdb.log" &
	# a breakpoint at BREAK, then continue (QEMU started paused); in the background:
	# QEMU opens its pipes only once this script has opened the console fifo below
	{ gdb_packet "Z0,${BREAK#0x},4"; gdb_packet c; } >"$tmp/gdb.in" &
fi
cleanup() {
	kill "$qpid" 2>/dev/null || true
	wait "$qpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

since() { fmt_s $(($(now_us) - t0)); }
deadline=$((t0 + TIMEOUT * 1000000))
left() {
	local l=$((deadline - $(now_us)))
	((l > 0)) || l=0
	fmt_s "$l"
}

log=${TRAPLINE_SERIAL_LOG:-/dev/null}
: >"$log"
init_s=- done_s=- ready_s=- status=125 timed_out=0
exec 3<"$fifo"
while :; do
	l=$(left)
	if [[ $l == 0.000 ]]; then timed_out=1; break; fi
	if IFS= read -r -t "$l" line <&3; then
		line=${line%$'\r'}
		printf '%s\n' "$line"
		printf '%s\n' "$line" >>"$log"
		case $line in
		"TLG init "*) [[ $init_s != - ]] || init_s=$(since) ;;
		"TLG ready "*)
			if [[ -n $SAVE && $ready_s == - ]]; then
				ready_s=$(since)
				if [[ -n $BREAK ]]; then # the stub's stop reply ($T05...): the guest is at BREAK
					for ((w = 0; w < 1000; w++)); do
						grep -qs '[$][TS]05' "$tmp/gdb.log" && break
						sleep 0.01
					done
					if ! grep -qs '[$][TS]05' "$tmp/gdb.log"; then
						echo "boot.sh: the guest did not stop at $BREAK within 10 s of TLG ready" >&2
						break
					fi
				fi
				# HMP runs them in turn; migrate (not detached) returns when done
				printf 'stop\nmigrate "exec:cat > %s"\ninfo migrate\nquit\n' "$SAVE" >"$tmp/mon.in"
			fi
			;;
		"TLG done"*)
			done_s=$(since)
			status=0
			break
			;;
		esac
	else
		rc=$?
		# keep a partial last line (no newline before EOF or the timeout)
		[[ -z $line ]] || { printf '%s\n' "${line%$'\r'}"; printf '%s\n' "${line%$'\r'}" >>"$log"; }
		if ((rc > 128)); then timed_out=1; fi # read timed out
		break                                   # else EOF: QEMU exited
	fi
done

if [[ $status == 0 && $GRACE -gt 0 ]]; then
	# let the guest power off by itself; copy what it still prints
	while IFS= read -r -t "$GRACE" line <&3; do
		line=${line%$'\r'}
		printf '%s\n' "$line"
		printf '%s\n' "$line" >>"$log"
	done
fi
if [[ $timed_out == 1 ]]; then
	status=124
	echo "boot.sh: timeout after ${TIMEOUT}s, killing QEMU" >&2
fi
kill "$qpid" 2>/dev/null || true
wait "$qpid" 2>/dev/null || true
exec 3<&-
if [[ -n $SAVE ]]; then
	wait 2>/dev/null || true # the monitor's reader ends with QEMU
	if [[ $timed_out == 0 ]] && grep -q 'Migration status: completed' "$tmp/mon.log" 2>/dev/null; then status=0; fi
	[[ $status == 0 ]] || sed 's/^/boot.sh: monitor: /' "$tmp/mon.log" >&2 || true
fi
# (QEMU's own "terminating on signal 15" after our kill is expected, not shown)
grep -v 'terminating on signal 15' "$tmp/qemu.err" | sed 's/^/boot.sh: qemu stderr: /' >&2 || true
echo "boot.sh: arch=$ARCH init_seen_s=$init_s done_seen_s=$done_s${SAVE:+ ready_seen_s=$ready_s} qemu_exit_s=$(since) status=$status" >&2
exit $status
