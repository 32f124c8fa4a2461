# shellcheck shell=bash
# initramfs half of images/build.sh (sourced). Its sha256 is part of the initramfs
# cache key only.
#
# Layout of the initramfs (newc cpio, uncompressed, written by the kernel tree's
# gen_init_cpio from a sorted list; every mtime = SOURCE_DATE_EPOCH, uid/gid 0):
#   /init                   images/init/init.c, static
#   /dev/console            char 5,1 (so the kernel gives /init the console as fd 0-2)
#   /proc /sys /tmp /root   mount points and scratch
#   /trapline/tests/        images/tests/hello.c and images/tests/<arch>_*.c, static
#   /trapline/bin/          a copy of BINDIR (subdirectories kept)
#   /trapline/run.list      BINDIR/run.list if there is one, else the default list
#   /trapline/lib/, ELF interpreter at its PT_INTERP path: only if BINDIR holds
#                           dynamically linked programs (see copy_runtime)
#
# Inputs (set by build.sh): ARCH CROSS CC UFLAGS SYSROOT_LIBS (the arch table's, from
# trapline/arch.py) HERE INIT_SRC BINDIR TARBALL LINUX_PKG
# TOOLS_DIR INITRD_DIR INITRD_KEY CACHE SOURCE_DATE_EPOCH GCC_VER, functions log die
# sha now elapsed.

default_run_list() {
	echo "# default trapline run list for $ARCH (images/build.sh): smoke test + trap test"
	echo "/trapline/tests/hello trapline=$ARCH"
	case $ARCH in
	sparc64)
		echo "/trapline/tests/sparc64_lduw 10"
		echo "@timeout=30 /trapline/tests/sparc64_lduw raw"
		;;
	armv6) echo "/trapline/tests/armv6_ldrd 1000" ;;
	x86_64) echo "/trapline/tests/x86_64_numa" ;;
	esac
}

# guest_programs ROOT: /init (INIT_SRC) and /trapline/tests/ (images/tests/hello.c and
# the arch's <arch>_*.c), static, compiled with CC and UFLAGS into ROOT. The Buildroot
# package (images/buildroot/package/trapline-guest) calls it too, with Buildroot's
# compiler, so both builders compile the guest's own programs alike.
guest_programs() {
	local root=$1 t n ucc
	mkdir -p "$root/trapline/tests"
	ucc=("$CC" $UFLAGS -O2 -static -Wall -Wextra -ffile-prefix-map="$HERE"=images)
	"${ucc[@]}" -o "$root/init" "$INIT_SRC"
	for t in "$HERE"/tests/hello.c "$HERE"/tests/"$ARCH"_*.c; do
		[[ -f $t ]] || continue
		n=$(basename "$t" .c)
		"${ucc[@]}" -o "$root/trapline/tests/$n" "$t"
	done
}

# init_snapshot_spin NM INIT: the address of init's tlg_snapshot_spin (0x...), where a
# sun4u snapshot's save stops the guest (boot.sh TRAPLINE_SNAPSHOT_BREAK); nothing if
# init has no such symbol (the other arches)
init_snapshot_spin() {
	"$1" "$2" | sed -n 's/^0*\([0-9a-f]*\) T tlg_snapshot_spin$/0x\1/p'
}

gen_init_cpio_tool() {
	GEN_INIT_CPIO="$TOOLS_DIR/gen_init_cpio"
	[[ -x $GEN_INIT_CPIO ]] && return
	log "building gen_init_cpio from $TARBALL"
	local tdir
	tdir=$(mktemp -d "$CACHE/.tools-XXXXXXXX")
	tar -xJf "$TARBALL" -C "$tdir" "$LINUX_PKG/usr/gen_init_cpio.c"
	gcc -O2 -o "$tdir/gen_init_cpio" "$tdir/$LINUX_PKG/usr/gen_init_cpio.c"
	mkdir -p "$TOOLS_DIR"
	mv "$tdir/gen_init_cpio" "$GEN_INIT_CPIO"
	rm -rf "$tdir"
}

is_elf() { [[ $(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' \n') == '177ELF' ]]; }

# copy_runtime ROOT: make dynamically linked programs in ROOT/trapline/bin runnable:
# copy their ELF interpreter to its PT_INTERP path and every DT_NEEDED library that
# is not shipped in BINDIR itself (e.g. libc.so.6) from the toolchain's libraries to
# ROOT/trapline/lib (init puts that in LD_LIBRARY_PATH), transitively.
copy_runtime() {
	local root=$1 f interp lib d found
	local -A have=() done=()
	local queue=()
	# libraries shipped in BINDIR (found through $ORIGIN rpaths or LD_LIBRARY_PATH)
	while IFS= read -r -d '' f; do have[$(basename "$f")]=1; done < <(find "$root/trapline/bin" -name '*.so*' -print0)
	while IFS= read -r -d '' f; do
		is_elf "$f" || continue
		interp=$("${CROSS}readelf" -lW "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
		[[ -n $interp ]] || continue
		if [[ ! -e $root$interp ]]; then
			found=""
			for d in $SYSROOT_LIBS; do [[ -e $d/$(basename "$interp") ]] && { found=$d/$(basename "$interp"); break; }; done
			[[ -n $found ]] || die "no ELF interpreter $(basename "$interp") for $f in $SYSROOT_LIBS"
			mkdir -p "$root$(dirname "$interp")"
			cp -L "$found" "$root$interp"
			log "$ARCH: dynamic programs: interpreter $interp from $found"
		fi
		queue+=("$f")
	done < <(find "$root/trapline/bin" -type f -print0 | sort -z)
	[[ ${#queue[@]} -gt 0 ]] || return 0
	mkdir -p "$root/trapline/lib"
	while [[ ${#queue[@]} -gt 0 ]]; do
		f=${queue[0]}
		queue=("${queue[@]:1}")
		for lib in $("${CROSS}readelf" -dW "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			[[ -z ${have[$lib]:-} && -z ${done[$lib]:-} ]] || continue
			done[$lib]=1
			found=""
			for d in $SYSROOT_LIBS; do [[ -e $d/$lib ]] && { found=$d/$lib; break; }; done
			[[ -n $found ]] || die "library $lib (needed by $f) not found in $SYSROOT_LIBS"
			cp -L "$found" "$root/trapline/lib/$lib"
			queue+=("$root/trapline/lib/$lib")
		done
	done
	log "$ARCH: dynamic programs: copied ${!done[*]} to /trapline/lib"
}

# cpio_list ROOT: gen_init_cpio entries for every path, sorted by name, uid/gid 0,
# modes normalised (directories 0755, /tmp 1777, files 0755 if executable, else
# 0644): the archive must not depend on the umask or on the permissions of the
# kernels' cache directory it was copied from (0700 from mkdtemp here, 0755 in the
# Docker image), since a different mode is a different guest, and the timing
# model's guest lane counts every instruction the guest kernel runs.
cpio_list() {
	local root=$1 type mode path link
	echo "dir /dev 0755 0 0"
	echo "nod /dev/console 0600 0 0 c 5 1"
	(cd "$root" && find . -mindepth 1 -printf '%y %m %p %l\n' | sort -k3,3) |
		while read -r type mode path link; do
			path=${path#.}
			case $path in *[[:space:]]*) die "path with blanks not supported: $path" ;; esac
			case $type in
			d) [[ $path == /tmp ]] && mode=1777 || mode=755 ;;
			f) (( 8#$mode & 8#111 )) && mode=755 || mode=644 ;;
			esac
			case $type in
			d) echo "dir $path $mode 0 0" ;;
			f) echo "file $path $root$path $mode 0 0" ;;
			l) echo "slink $path $link $mode 0 0" ;;
			*) die "unsupported file type $type: $path" ;;
			esac
		done
}

initramfs_build_cached() {
	local t0 work root spin
	gen_init_cpio_tool
	t0=$(now)
	work=$(mktemp -d "$CACHE/.initramfs-$ARCH-XXXXXXXX")
	trap 'rm -rf "$work"' EXIT
	root="$work/root"
	mkdir -p "$root"/{proc,sys,tmp,root,trapline/bin,trapline/tests}
	chmod 1777 "$root/tmp"
	guest_programs "$root"
	if [[ -n $BINDIR ]]; then
		cp -a "$BINDIR/." "$root/trapline/bin/"
		if [[ -f $root/trapline/bin/run.list ]]; then
			mv "$root/trapline/bin/run.list" "$root/trapline/run.list"
		fi
		copy_runtime "$root"
	fi
	[[ -f $root/trapline/run.list ]] || default_run_list >"$root/trapline/run.list"
	find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	cpio_list "$root" >"$work/cpio.list"
	"$GEN_INIT_CPIO" -t "$SOURCE_DATE_EPOCH" "$work/cpio.list" >"$work/initramfs.cpio"
	mkdir -p "$work/out"
	mv "$work/initramfs.cpio" "$work/out/"
	sed "s|$root||" "$work/cpio.list" >"$work/out/cpio.list"
	cp "$root/trapline/run.list" "$work/out/run.list"
	{
		echo "arch=$ARCH"
		echo "key=$INITRD_KEY"
		echo "bindir=${BINDIR:-none}"
		echo "gcc=$GCC_VER"
		echo "init_sha256=$(sha "$root/init")"
		# where a snapshot's save stops the guest (boot.sh TRAPLINE_SNAPSHOT_BREAK), if init has it
		spin=$(init_snapshot_spin "${CROSS}nm" "$root/init")
		[[ -z $spin ]] || echo "init_snapshot_spin=$spin"
		echo "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
		echo "build_seconds=$(elapsed "$t0")"
		echo "initramfs_sha256=$(sha "$work/out/initramfs.cpio")"
		echo "initramfs_bytes=$(stat -c %s "$work/out/initramfs.cpio")"
	} >"$work/out/manifest.txt"
	rm -rf "$INITRD_DIR"
	mv "$work/out" "$INITRD_DIR"
	rm -rf "$work"
	trap - EXIT
	log "$ARCH: initramfs built: $INITRD_DIR/initramfs.cpio"
}
