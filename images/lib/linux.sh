# shellcheck shell=bash
# Linux kernel half of images/build.sh (sourced). Its sha256 is part of the kernel
# cache key, and it is NOT part of the initramfs key, so editing the initramfs side
# (lib/initramfs.sh, init.c, tests) never rebuilds a kernel.
#
# Inputs (set by build.sh): ARCH CROSS JOBS NICE TARBALL LINUX_PKG FRAGMENT CACHE
# LINUX_DIR, the arch table's KARCH KTARGETS KIMAGE (the image QEMU boots, stored as
# KNAME) DTBSRC (trapline/arch.py), the KBUILD_* / SOURCE_DATE_EPOCH environment, functions log die sha now
# elapsed.

# build_linux WORKDIR: extract the tarball into WORKDIR/linux, configure
# (tinyconfig + fragment), check the fragment, build. Sets BUILD_SECONDS
# (configure + compile, not the extraction).
build_linux() {
	local work=$1 t0 src
	mkdir -p "$work"
	# Only what a guest kernel built from tinyconfig can use is written out: the large
	# driver, sound, tool-test and documentation trees (about 60% of the tarball's 1.3 GB)
	# keep only their Kconfig, Makefile and Kbuild files, which kconfig and kbuild read
	# (a second pass over the tarball, skipping files the first one wrote). Writing the
	# whole tree took minutes per kernel on a slow disk; the images are the same bytes.
	local skip=(Documentation drivers/gpu drivers/net drivers/media drivers/scsi drivers/staging
		drivers/infiniband sound tools/perf tools/testing) d ex=()
	for d in "${skip[@]}"; do ex+=(--exclude="$LINUX_PKG/$d"); done
	log "$ARCH: extracting $TARBALL into $work (without the contents of ${skip[*]})"
	tar -xJf "$TARBALL" -C "$work" "${ex[@]}"
	tar -xJf "$TARBALL" -C "$work" --skip-old-files --wildcards '*/Kconfig*' '*/Makefile*' '*/Kbuild*'
	mv "$work/$LINUX_PKG" "$work/linux"
	src="$work/linux"
	# In-tree build: file names in the objects are relative, so the directory
	# name does not leak into the image.
	local mk=(nice -n "$NICE" make -C "$src" ARCH="$KARCH" CROSS_COMPILE="$CROSS")
	t0=$(now)
	log "$ARCH: configuring (tinyconfig + $FRAGMENT)"
	{
		"${mk[@]}" tinyconfig
		(cd "$src" && ARCH=$KARCH scripts/kconfig/merge_config.sh -m .config "$FRAGMENT")
		"${mk[@]}" olddefconfig
	} >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; die "$ARCH: configuration failed"; }
	# Every line of the fragment must have survived olddefconfig (unmet
	# dependencies silently drop options).
	local missing=0 line
	while IFS= read -r line; do
		grep -qxF -- "$line" "$src/.config" || { log "$ARCH: fragment line not in .config: $line"; missing=1; }
	done < <(grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set)' "$FRAGMENT")
	[[ $missing == 0 ]] || die "$ARCH: config fragment not satisfied (see above)"
	log "$ARCH: building $KTARGETS with -j$JOBS (nice $NICE; log $work/build.log)"
	"${mk[@]}" -j"$JOBS" $KTARGETS >>"$work/build.log" 2>&1 ||
		{ tail -n 40 "$work/build.log" >&2; die "$ARCH: kernel build failed"; }
	BUILD_SECONDS=$(elapsed "$t0")
	log "$ARCH: kernel built in ${BUILD_SECONDS}s"
}

# Build into a temporary directory, keep the artifacts, rename into LINUX_DIR.
linux_build_cached() {
	local work src stage
	work=$(mktemp -d "$CACHE/.build-$ARCH-XXXXXXXX")
	trap 'rm -rf "$work"' EXIT
	build_linux "$work/b"
	src="$work/b/linux"
	stage="$work/out"
	mkdir -p "$stage"
	cp "$src/$KIMAGE" "$stage/$KNAME"
	[[ -z $DTBSRC ]] || cp "$src/$DTBSRC" "$stage/"
	cp "$src/vmlinux" "$src/System.map" "$stage/"
	cp "$src/.config" "$stage/config"
	cp "$work/b/build.log" "$stage/"
	{
		echo "arch=$ARCH"
		echo "key=$LINUX_KEY"
		echo "$LINUX_PKG=$LINUX_VER"
		echo "gcc=$GCC_VER"
		echo "ld=$LD_VER"
		echo "fragment_sha256=$(sha "$FRAGMENT")"
		echo "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
		echo "KBUILD_BUILD_TIMESTAMP=$KBUILD_BUILD_TIMESTAMP"
		echo "make_targets=$KTARGETS"
		echo "jobs=$JOBS nice=$NICE"
		echo "build_seconds=$BUILD_SECONDS"
		echo "host=$(uname -m) $(nproc) cpus"
		echo "kernel=$KNAME"
		echo "kernel_sha256=$(sha "$stage/$KNAME")"
		echo "vmlinux_sha256=$(sha "$stage/vmlinux")"
		[[ -z $DTBSRC ]] || echo "dtb_sha256=$(sha "$stage/$(basename "$DTBSRC")")"
	} >"$stage/manifest.txt"
	rm -rf "$LINUX_DIR"
	mv "$stage" "$LINUX_DIR"
	rm -rf "$work"
	trap - EXIT
}

# Second build in another directory (different name and length), compared with
# the cached one. Appends the result to the manifest; returns 3 on a mismatch
# (the second tree is then kept for diffoscope).
linux_repro_check() {
	local other s1 s2 v1 v2 result
	other=$(mktemp -d "$CACHE/.repro-$ARCH-XXXXXXXX")
	build_linux "$other/second-build-dir"
	s1=$(sha "$LINUX_DIR/$KNAME")
	s2=$(sha "$other/second-build-dir/linux/$KIMAGE")
	v1=$(sha "$LINUX_DIR/vmlinux")
	v2=$(sha "$other/second-build-dir/linux/vmlinux")
	if [[ $s1 == "$s2" && $v1 == "$v2" ]]; then result=identical; else result=DIFFERENT; fi
	{
		echo "repro_check=$result"
		echo "repro_image_sha256_first=$s1"
		echo "repro_image_sha256_second=$s2"
		echo "repro_vmlinux_sha256_first=$v1"
		echo "repro_vmlinux_sha256_second=$v2"
		echo "repro_second_build_seconds=$BUILD_SECONDS"
	} >>"$LINUX_DIR/manifest.txt"
	log "$ARCH: reproducibility check: $KNAME sha256 $s1 (first) vs $s2 (second): $result"
	if [[ $result != identical ]]; then
		log "$ARCH: kept the second tree in $other for diffoscope"
		return 3
	fi
	rm -rf "$other"
}
