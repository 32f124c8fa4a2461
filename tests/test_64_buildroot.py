"""Buildroot guest images (images/buildroot, trapline/imagebuilders/buildroot.py).

Offline, against Buildroot 2026.02.3's own tree (the release tarball beside the
clone in ../shared/buildroot/, TRAPLINE_BUILDROOT_TARBALL, or a tree in BUILDROOT;
unpacked into the cache by its sha256): each defconfig loads with the TRAPLINE
external tree, `make show-info` lists exactly the expected packages at their
pinned versions, savedefconfig gives the defconfig back, Buildroot's own kconfig
steps (its merge_config.sh and fixups) on Debian's linux-source-6.1 tree keep
every line of the arch's config.fragment, and the trapline-guest package's build
and install commands, run with Debian's cross compiler standing in for
Buildroot's, install byte for byte what images/build.sh puts in its initramfs. A
whole Buildroot build needs the source tarballs (BR2_DL_DIR) or a network: where
neither is there it is skipped, with the reason.

One parse of Buildroot's Makefiles per defconfig (about 5 s of CPU each) answers
show-info, savedefconfig and printvars together (the `configured` fixture).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT, trapline
from trapline import arch as arch_table, build, images, paths
from trapline.errors import UsageError
from trapline.imagebuilders import buildroot as br
from trapline.results import sha256_file

ARCHES = list(arch_table.ARCHES)
LINUX = "6.1.192"
# The toolchain and what each defconfig builds, as Buildroot 2026.02.3's show-info
# lists them (name: version); nothing else may appear.
TOOLCHAIN = {
    "gcc-final": "14.3.0", "host-gcc-final": "14.3.0", "host-gcc-initial": "14.3.0", "host-binutils": "2.44",
    "glibc": "2.42-67-g4ebd33dd77eabe8d4c45232bed4b42a31d2f9edc", "linux-headers": LINUX,
    "host-gmp": "6.3.0", "host-mpc": "1.3.1", "host-mpfr": "4.1.1", "host-m4": "1.4.21", "host-bison": "3.8.2",
    "host-gawk": "5.3.2", "host-patchelf": "0.13",
}
COMMON = {
    **TOOLCHAIN, "linux": LINUX, "busybox": "1.37.0", "trapline-guest": "local",
    "skeleton-init-common": "", "skeleton-init-none": "",
    # Buildroot's own host tools: archives, fakeroot and device nodes for the rootfs,
    # reproducible dates and cpio (BR2_REPRODUCIBLE), the kernel's kmod
    "host-acl": "2.3.2", "host-attr": "2.5.2", "host-autoconf": "2.72", "host-automake": "1.16.5",
    "host-libtool": "2.4.6", "host-pkgconf": "2.3.0", "host-tar": "1.35", "host-cpio": "2.15",
    "host-fakedate": "", "host-fakeroot": "1.37.1.2", "host-makedevs": "", "host-skeleton": "", "host-kmod": "33",
}
EXPECTED = {
    "sparc64": COMMON,
    # XZ-compressed zImage (tinyconfig's KERNEL_XZ) and the device tree's dtc (flex, gettext)
    "armv6": {**COMMON, "host-xz": "5.8.3", "host-flex": "2.6.4", "host-gettext-tiny": "0.3.2"},
    # XZ bzImage, objtool's libelf (elfutils and what it needs)
    "x86_64": {**COMMON, "host-xz": "5.8.3", "host-elfutils": "0.194", "host-bzip2": "1.0.8", "host-libzlib": "1.3.2",
               "host-zstd": "1.5.7"},
}
VARS = ("LINUX_KCONFIG_FIXUP_CMDS", "LINUX_DIR", "LINUX_KCONFIG_DEFCONFIG", "LINUX_KCONFIG_FRAGMENT_FILES",
        "KERNEL_ARCH", "LINUX_IMAGE_NAME", "LINUX_DTS_NAME", "TARGET_CROSS", "TARGET_DIR", "BINARIES_DIR",
        "TRAPLINE_GUEST_BUILD_CMDS", "TRAPLINE_GUEST_INSTALL_TARGET_CMDS", "TRAPLINE_GUEST_INSTALL_IMAGES_CMDS",
        "TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS", "RSYNC_VCS_EXCLUSIONS", "TRAPLINE_GUEST_SITE")
# what Buildroot's support/dependencies/dependencies.sh demands before it downloads
HOST_PROGRAMS = ("which", "sed", "make", "gcc", "g++", "bash", "patch", "gzip", "bzip2", "perl", "tar", "cpio",
                 "unzip", "rsync", "file", "bc", "find", "xargs", "awk", "cmp", "wget")
FRAGMENT_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set)")


def _tarball() -> Path | None:
    for t in (os.environ.get("TRAPLINE_BUILDROOT_TARBALL"),
              paths.shared("buildroot", f"buildroot-{br.PINNED}.tar.xz")):
        if t and Path(t).is_file():
            return Path(t)
    return None


@pytest.fixture(scope="session")
def tree() -> Path:
    """Buildroot's tree: $BUILDROOT, else the release tarball unpacked into the cache by its sha256."""
    where = os.environ.get("BUILDROOT") or _tarball()
    if not where:
        pytest.skip(f"no Buildroot {br.PINNED}: neither BUILDROOT, TRAPLINE_BUILDROOT_TARBALL nor "
                    f"../shared/buildroot/buildroot-{br.PINNED}.tar.xz beside the clone")
    return br.locate(where)


@pytest.fixture(scope="session")
def configured(tree, tmp_path_factory) -> dict:
    """Each defconfig loaded into an output directory of its own, then one make for
    savedefconfig, show-info and printvars (PKG=LINUX: the kernel's kconfig fixups
    name its .config): {arch: {"out", "config", "saved", "info", "vars"}}."""
    base = tmp_path_factory.mktemp("buildroot-out")

    def one(arch):
        out = base / arch
        mk = br.Make(tree, out, base / "dl")
        mk.configure(arch)
        info, values = br.parse_info(mk.quick("savedefconfig", "show-info", "printvars", f"VARS={' '.join(VARS)}",
                                              "PKG=LINUX", f"BR2_DEFCONFIG={out / 'saved_defconfig'}"), VARS)
        return arch, {"out": out, "config": (out / ".config").read_text(), "saved": (out / "saved_defconfig").read_text(),
                      "info": info, "vars": values}

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(one, ARCHES))


def _conf(text: str) -> dict[str, str]:
    return dict(re.findall(r"^(BR2_[A-Za-z0-9_]+)=(.*)$", text, re.M))


def _debian_linux_version() -> str | None:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "linux-source-6.1"], capture_output=True, text=True)
    return out.stdout.split("-")[0] if out.returncode == 0 and out.stdout else None


# ------------------------------------------------------------------ the defconfigs

def test_builder_is_found_by_scanning_and_debian_stays_the_default():
    from trapline import imagebuilders
    assert imagebuilders.names() == ["debian", "buildroot"]
    assert imagebuilders.get(None).name == "debian" and imagebuilders.get("buildroot").name == "buildroot"
    with pytest.raises(UsageError, match="valid choices: debian, buildroot"):
        imagebuilders.get("yocto")


@pytest.mark.parametrize("arch", ARCHES)
def test_defconfig_loads_with_the_trapline_external_tree(configured, arch):
    c = _conf(configured[arch]["config"])
    assert c["BR2_TOOLCHAIN_BUILDROOT_GLIBC"] == "y" and c["BR2_TOOLCHAIN_USES_GLIBC"] == "y"
    assert c["BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE"] == f'"{LINUX}"'
    assert c["BR2_PACKAGE_BUSYBOX"] == "y" and c["BR2_PACKAGE_TRAPLINE_GUEST"] == "y"
    assert c["BR2_PACKAGE_TRAPLINE_GUEST_ARCH"] == f'"{arch}"'
    assert c["BR2_TARGET_ROOTFS_CPIO"] == "y" and c["BR2_INIT_NONE"] == "y" and c["BR2_REPRODUCIBLE"] == "y"
    cpu = {"sparc64": {"BR2_sparc64": "y", "BR2_sparc_v9": "y", "BR2_GCC_TARGET_CPU": '"ultrasparc"'},
           "armv6": {"BR2_arm1176jzf_s": "y", "BR2_ARM_EABI": "y", "BR2_ARM_INSTRUCTIONS_ARM": "y"},
           "x86_64": {"BR2_x86_64": "y"}}[arch]
    assert {k: c.get(k) for k in cpu} == cpu
    assert f"BR2_EXTERNAL_TRAPLINE_PATH = {br.EXTERNAL}" in (configured[arch]["out"] / ".br2-external.mk").read_text()


def test_the_pinned_linux_is_the_one_debians_linux_source_is():
    """Both builders boot the same Linux version."""
    deb = _debian_linux_version()
    if deb is None:
        pytest.skip("linux-source-6.1 is not installed (dpkg-query)")
    assert deb == LINUX
    for a in ARCHES:
        assert f'BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE="{deb}"' in br.defconfig(a).read_text()


@pytest.mark.parametrize("arch", ARCHES)
def test_show_info_lists_exactly_the_expected_packages(configured, arch):
    info = configured[arch]["info"]
    assert br.packages(info) == EXPECTED[arch]
    virtual = sorted(k for k, v in info.items() if v.get("virtual"))  # the internal toolchain, nothing external
    assert virtual == sorted(["skeleton", "toolchain", "toolchain-buildroot"] + {"armv6": ["host-gettext"], "x86_64": ["host-zlib"]}.get(arch, []))
    assert sorted(k for k, v in info.items() if v.get("type") == "rootfs") == ["rootfs-common", "rootfs-cpio"]
    # every source but the local trapline-guest comes from a download Buildroot checks
    assert all(not s.startswith("trapline-guest/") for s in br.sources(info))
    assert f"linux/linux-{LINUX}.tar.xz" in br.sources(info)


@pytest.mark.parametrize("arch", ARCHES)
def test_savedefconfig_round_trips(configured, arch):
    assert configured[arch]["saved"] == br.defconfig(arch).read_text()


@pytest.mark.parametrize("arch", ARCHES)
def test_kernel_is_configured_as_build_sh_configures_it(configured, arch):
    """tinyconfig, then images/<arch>/config.fragment (the file build.sh merges), for
    the arch table's ARCH=, building the image and device tree QEMU boots."""
    v = configured[arch]["vars"]
    a = arch_table.get(arch)
    assert v["LINUX_KCONFIG_DEFCONFIG"] == "tinyconfig"
    assert [Path(f).resolve() for f in v["LINUX_KCONFIG_FRAGMENT_FILES"].split()] == \
        [images.IMAGES / arch / "config.fragment"]
    assert v["KERNEL_ARCH"] == a.linux.karch
    assert v["LINUX_IMAGE_NAME"] == Path(a.linux.kimage).name
    assert v["LINUX_DTS_NAME"].strip() == Path(a.linux.dtb).stem


@pytest.fixture(scope="session")
def debian_kconfig_tree() -> Path:
    """The Kconfig, Makefile and scripts files of Debian's linux-source-6.1 (enough
    for tinyconfig and olddefconfig: 41 MB of its 1.4 GB), unpacked once into the
    cache by the tarball's sha256."""
    tarball = Path("/usr/src/linux-source-6.1.tar.xz")
    if not tarball.is_file():
        pytest.skip(f"{tarball} is missing (apt-get install linux-source-6.1)")
    digest = sha256_file(tarball)
    dest = build.cache_root() / "buildroot" / f"linux-kconfig-{digest[:16]}"
    if not (dest / ".complete").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(subprocess.check_output(["mktemp", "-d", f"{dest}.tmp-XXXXXX"], text=True).strip())
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(tmp), "--wildcards", "*/Kconfig*", "*/Makefile*",
                        "*/Kbuild*", "linux-source-6.1/scripts/*", "linux-source-6.1/arch/*/configs/*",
                        "linux-source-6.1/kernel/configs/*"], check=True)
        (tmp / ".complete").write_text(digest + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    return dest / "linux-source-6.1"


@pytest.mark.parametrize("arch", ARCHES)
def test_fragment_survives_buildroots_kconfig_steps_on_debians_linux(configured, debian_kconfig_tree, tree, arch,
                                                                     tmp_path):
    """What Buildroot does to configure the kernel (linux.mk, pkg-kconfig.mk): make
    tinyconfig, its own support/kconfig/merge_config.sh -m with the fragment, its
    LINUX_KCONFIG_FIXUP_CMDS, make olddefconfig: here on Debian's 6.1.192 tree with
    Debian's cross compiler (Buildroot's needs sources this machine cannot
    download). Every option of the fragment must be in the result, as build.sh
    demands of its own kernels, and the configuration must be the Debian builder's
    (which the qemu lane's tests build)."""
    a = arch_table.get(arch)
    v = configured[arch]["vars"]
    k = tmp_path / "k"
    mk = ["make", "-s", "-C", str(debian_kconfig_tree), f"O={k}", f"ARCH={a.linux.karch}", f"CROSS_COMPILE={a.cross}"]
    fragment = images.IMAGES / arch / "config.fragment"
    subprocess.run(mk + ["tinyconfig"], check=True, capture_output=True)
    subprocess.run([str(tree / "support/kconfig/merge_config.sh"), "-m", "-O", str(k), str(k / ".config"),
                    str(fragment)], check=True, capture_output=True)
    for line in br.recipe_lines(v["LINUX_KCONFIG_FIXUP_CMDS"].replace(v["LINUX_DIR"] + "/", f"{k}/")):
        r = subprocess.run(["bash", "-c", line], capture_output=True, text=True)
        assert r.returncode == 0, (line, r.stderr)
    subprocess.run(mk + ["olddefconfig"], check=True, capture_output=True)
    config = (k / ".config").read_text().splitlines()
    wanted = [l for l in fragment.read_text().splitlines() if FRAGMENT_LINE.match(l)]
    assert len(wanted) >= 14
    assert [l for l in wanted if l not in config] == []
    settings = lambda lines: sorted(l for l in lines if FRAGMENT_LINE.match(l))  # noqa: E731
    debian = Path(images.build_image(arch, build.build(arch)).facts["LINUX_CACHE"]) / "config"
    assert settings(config) == settings(debian.read_text().splitlines())


# ------------------------------------------------------------------ the trapline-guest package

def _newc(root: Path, out: Path, epoch: int = 0) -> None:
    """root as an uncompressed newc cpio (what Buildroot's rootfs-cpio writes: every
    path sorted, uid/gid 0) with /dev/console, which Buildroot's static device table
    adds and which needs no root here."""
    def entry(name: str, mode: int, data: bytes = b"", rdev=(0, 0)) -> bytes:
        fields = [0, mode, 0, 0, 1, epoch, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields) + name.encode() + b"\0"
        hdr += b"\0" * (-len(hdr) % 4)
        return hdr + data + b"\0" * (-len(data) % 4)

    blob = [entry("dev", 0o40755), entry("dev/console", 0o20600, rdev=(5, 1))]
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            blob.append(entry(rel, 0o120777, os.readlink(p).encode()))
        elif p.is_dir():
            blob.append(entry(rel, 0o40755 if rel != "tmp" else 0o41777))
        else:
            blob.append(entry(rel, 0o100755 if os.access(p, os.X_OK) else 0o100644, p.read_bytes()))
    blob.append(entry("TRAILER!!!", 0))
    out.write_bytes(b"".join(blob))


def _cpio_files(cpio: Path) -> dict[str, bytes]:
    """The regular files of a newc cpio: path -> content."""
    data, at, files = cpio.read_bytes(), 0, {}
    while True:
        f = [int(data[at + 6 + 8 * i: at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        name = data[at + 110: at + 110 + namesize - 1].decode()
        at += 110 + namesize
        at += -at % 4
        if name == "TRAILER!!!":
            return files
        if mode & 0o170000 == 0o100000:
            files["/" + name.lstrip("./")] = data[at:at + size]
        at += size + (-size % 4)


def run_package(configured, arch: str, work: Path) -> tuple[Path, Path]:
    """The trapline-guest package's rsync, build, target install and images install,
    as Buildroot's make prints them (printvars), with Debian's cross compiler and
    binutils in place of Buildroot's (TARGET_CROSS) and TARGET_DIR and BINARIES_DIR
    in work; (TARGET_DIR, BINARIES_DIR)."""
    v = configured[arch]["vars"]
    src, target, binaries = work / "src", work / "target", work / "images"
    for d in (src, target, binaries):
        d.mkdir(parents=True)
    subprocess.run(["rsync", "-au", "--chmod=u=rwX,go=rX", *shlex.split(v["TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS"]),
                    *shlex.split(v["RSYNC_VCS_EXCLUSIONS"]), v["TRAPLINE_GUEST_SITE"] + "/", f"{src}/"], check=True)
    standin = arch_table.get(arch).cross
    for name in ("TRAPLINE_GUEST_BUILD_CMDS", "TRAPLINE_GUEST_INSTALL_TARGET_CMDS", "TRAPLINE_GUEST_INSTALL_IMAGES_CMDS"):
        text = (v[name].replace(v["TARGET_CROSS"], standin).replace(v["TARGET_DIR"], str(target))
                .replace(v["BINARIES_DIR"], str(binaries)))
        for line in br.recipe_lines(text):  # $(@D) is '.' in printvars: the package's build directory
            r = subprocess.run(["bash", "-c", line], cwd=src, capture_output=True, text=True)
            assert r.returncode == 0, f"{name}: {line}\n{r.stderr[-3000:]}"
    return target, binaries


@pytest.mark.parametrize("arch", ARCHES)
def test_package_installs_what_build_sh_puts_in_its_initramfs(configured, arch, tmp_path):
    """Same compiler, same flags (the arch table's), same functions (initramfs.sh):
    /init, /trapline/tests, /trapline/bin and run.list installed by the package are
    the Debian image's, byte for byte. Only the Debian image's copies of the C
    library for dynamic programs (/trapline/lib, the ELF interpreter) are not the
    package's: Buildroot's glibc installs them in /lib."""
    target, binaries = run_package(configured, arch, tmp_path)
    ours = {"/" + p.relative_to(target).as_posix(): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    img = images.build_image(arch, build.build(arch))
    theirs = _cpio_files(img.initrd)
    runtime = {p for p in theirs if p.startswith("/trapline/lib/") or (p.startswith("/lib") and "ld-" in p)}
    # build.sh copies BINDIR whole, trapline/build.py's cache marker too (no guest reads it)
    runtime.add("/trapline/bin/.complete")
    assert set(ours) == set(theirs) - runtime
    assert [p for p in ours if ours[p] != theirs[p]] == []
    assert len([p for p in ours if p.startswith("/trapline/bin/")]) >= 10
    # what the harness keeps of the package: its kernels (hashed into a run's manifest) and init's facts
    assert build.binary_hashes(binaries / "trapline-bin") == build.binary_hashes(build.build(arch))
    facts = dict(l.split("=", 1) for l in (binaries / "trapline-guest.txt").read_text().split())
    assert facts["arch"] == arch
    if img.facts.get("INIT_SNAPSHOT_SPIN"):
        assert facts["init_snapshot_spin"] == img.facts["INIT_SNAPSHOT_SPIN"]


def test_a_buildroot_laid_out_image_boots_in_the_qemu_lane(configured, tree, tmp_path, monkeypatch):
    """The harness's side of a Buildroot image, end to end, with stand-in parts (this
    machine cannot build Buildroot's toolchain): post-image.sh lays out a
    BINARIES_DIR holding Debian's armv6 kernel and dtb (named as Buildroot names
    them) and a rootfs.cpio of the package's install (Debian's compiler), the image
    is stored in a cache of this test's own under the key a real build would have,
    and `run armv6-unaligned --images buildroot` finds it, boots it, counts every
    fixup exactly and says in its manifest, entry and report which images it booted."""
    arch = "armv6"
    target, binaries = run_package(configured, arch, tmp_path / "pkg")
    for d in ("proc", "sys", "tmp", "root", "lib"):  # Buildroot's skeleton
        (target / d).mkdir(exist_ok=True)
    deb = images.build_image(arch, build.build(arch))
    a = arch_table.get(arch)
    linux_cache = Path(deb.facts["LINUX_CACHE"])
    shutil.copy(deb.kernel, binaries / Path(a.linux.kimage).name)
    shutil.copy(deb.dtb, binaries / deb.dtb.name)
    _newc(target, binaries / "rootfs.cpio")
    build_dir = tmp_path / "build"
    (build_dir / f"linux-{LINUX}").mkdir(parents=True)
    for src, dst in (("System.map", "System.map"), ("vmlinux", "vmlinux"), ("config", ".config")):
        shutil.copy(linux_cache / src, build_dir / f"linux-{LINUX}" / dst)
    env = dict(os.environ, BR2_CONFIG=str(configured[arch]["out"] / ".config"), BUILD_DIR=str(build_dir),
               BR2_VERSION=br.PINNED)
    r = subprocess.run([str(br.EXTERNAL / "board" / "post-image.sh"), str(binaries)], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    laid = dict(l.split("=", 1) for l in (binaries / f"boot-{arch}.env").read_text().split())
    assert laid["KERNEL"] == str(binaries / a.linux.kname) and laid["DTB"] == str(binaries / deb.dtb.name)
    assert laid["LINUX_SHA256"] == deb.facts["LINUX_SHA256"] and laid["DEFCONFIG"] == "trapline_armv6_defconfig"
    assert laid["BUILDER"] == "buildroot" and laid["BUILDROOT_VERSION"] == br.PINNED

    cache = tmp_path / "cache"
    (cache / "images").mkdir(parents=True)
    os.symlink(build.cache_root() / "kernels", cache / "kernels")
    monkeypatch.setenv("TRAPLINE_CACHE", str(cache))
    _, key, inputs = br.keys(arch, tree)
    entry = cache / "images" / f"{arch}-buildroot-{key[:24]}"
    br._store(binaries, entry, arch, {"builder": "buildroot", **inputs, "stand_in": "test_64: Debian's parts"})
    results = tmp_path / "results"
    r = trapline("run", "armv6-unaligned", "--platform", "qemu", "--quick", "--images", "buildroot",
                 env={"TRAPLINE_CACHE": str(cache), "BUILDROOT": str(tree), "TRAPLINE_RESULTS": str(results)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"buildroot: {arch} image cached: {entry}" in r.stderr
    run = (results / "latest").resolve()
    e = json.loads((run / "entries" / "armv6-unaligned.qemu.json").read_text())
    assert e["status"] == "reproduced" and all(c["ok"] for c in e["checks"]), e["checks"]
    assert next(f["value"] for f in e["figures"] if f["name"].startswith("kernel fixups (Multi) per unaligned LDM")) == 1.0
    assert e["platform_facts"]["boot"]["images"] == "buildroot"
    assert e["binaries"]["guest/initramfs"] == laid["INITRD_SHA256"]
    m = json.loads((run / "manifest.json").read_text())
    assert m["args"]["images"] == "buildroot"
    g = m["platforms"]["qemu"][arch]
    assert g["images"]["builder"] == "buildroot" and g["images"]["buildroot"] == br.PINNED
    assert g["images"]["defconfig_sha256"] == sha256_file(br.defconfig(arch))
    assert g["images"]["image_sha256"]["initramfs-armv6.cpio"] == laid["INITRD_SHA256"]
    assert (f"buildroot images (Buildroot {br.PINNED}, trapline_armv6_defconfig sha256 "
            f"{g['images']['defconfig_sha256'][:12]})") in (run / "report.md").read_text()


# ------------------------------------------------------------------ the command

def test_images_without_buildroot_says_where_to_get_it():
    r = trapline("images", "--builder", "buildroot", "--arch", "armv6", env={"BUILDROOT": ""})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert br.RELEASE_URL in r.stderr and "BUILDROOT" in r.stderr and "--buildroot" in r.stderr


@pytest.mark.parametrize("command", [["run", "armv6-unaligned", "--platform", "qemu"], ["reproduce-all"],
                                     ["sweep", "armv6-unaligned", "--set", "k=1000,2000"]], ids=lambda c: c[0])
def test_images_option_is_checked_before_anything_runs(command, tmp_path):
    """--images: an unknown builder, or buildroot without Buildroot, is one line and
    exit 2, before a run directory exists."""
    results = tmp_path / "results"
    for images_arg, words in (("yocto", ["unknown image builder 'yocto'", "debian, buildroot"]),
                              ("buildroot", ["no Buildroot given", br.RELEASE_URL])):
        r = trapline(*command, "--quick", "--images", images_arg,
                     env={"BUILDROOT": "", "TRAPLINE_RESULTS": str(results)})
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert all(w in r.stderr for w in words), r.stderr
    assert not results.exists()


def test_images_with_a_bad_arch_or_builder_is_one_line(tree):
    for args, words in ((["--builder", "buildroot", "--arch", "mips"], ["mips", "armv6"]),
                        (["--builder", "yocto"], ["yocto", "debian, buildroot"]),
                        (["--buildroot", str(tree)], ["--buildroot goes with --builder buildroot"])):
        r = trapline("images", *args, env={"BUILDROOT": str(tree)})
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert all(w in r.stderr for w in words), r.stderr


def test_images_without_sources_or_network_is_one_line_and_leaves_no_image(tree, configured, tmp_path):
    """An empty BR2_DL_DIR, no network here: Buildroot's own download step (make
    source) fails, and the command names the missing files and where they go."""
    if _network():
        pytest.skip("this machine reaches Buildroot's download sites")
    lacking = [t for t in HOST_PROGRAMS if shutil.which(t) is None]
    if lacking:  # Buildroot stops at its host check, before downloading (the next test has that case)
        pytest.skip(f"Buildroot's host programs are missing: {', '.join(lacking)} (docs/images.md)")
    cache, dl = tmp_path / "cache", tmp_path / "dl"
    r = trapline("images", "--builder", "buildroot", "--arch", "armv6", "--buildroot", str(tree),
                 env={"TRAPLINE_CACHE": str(cache), "BR2_DL_DIR": str(dl)})
    err = [l for l in r.stderr.splitlines() if l.startswith("trapline:")]
    assert r.returncode == 2 and len(err) == 1, r.stderr[-2000:]
    m = re.search(r"Buildroot: (\d+) of the (\d+) source files trapline_armv6_defconfig needs", err[0])
    assert m and m.group(1) == m.group(2) == str(len(br.sources(configured["armv6"]["info"]))), err[0]
    assert f"BR2_DL_DIR={dl}" in err[0] and "could not be downloaded" in err[0] and "BR2_PRIMARY_SITE" in err[0]
    assert "buildroot: >>> " in r.stderr  # Buildroot's progress was shown
    assert list((cache / "images").glob("*")) == []  # nothing half-written in the image cache


def test_a_buildroot_that_stops_is_one_line_with_its_message(tree, tmp_path):
    """Buildroot's own failure, here its host check (the working directory in
    LD_LIBRARY_PATH): one line with Buildroot's words and its log, exit 2."""
    cache = tmp_path / "cache"
    r = trapline("images", "--builder", "buildroot", "--arch", "sparc64", "--buildroot", str(tree),
                 env={"TRAPLINE_CACHE": str(cache), "LD_LIBRARY_PATH": ":/usr/lib"})
    err = [l for l in r.stderr.splitlines() if l.startswith("trapline:")]
    assert r.returncode == 2 and len(err) == 1, r.stderr[-2000:]
    assert "Buildroot stopped before its download step: You seem to have the current working directory" in err[0]
    assert "LD_LIBRARY_PATH" in err[0] and "build.log" in err[0]
    assert list((cache / "images").glob("*")) == []


def _network() -> bool:
    try:
        socket.getaddrinfo("sources.buildroot.net", 443)
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ the whole build (where it can run)

def test_full_buildroot_build_and_boot(tree, configured, tmp_path):
    """./run.sh images --builder buildroot, then the qemu lanes of sparc-misalign-trap,
    armv6-unaligned and numa-first-touch on those images, exact functional counts.
    Runs where BR2_DL_DIR holds every source; with only a network it also needs
    TRAPLINE_BUILDROOT_FULL=1 (it downloads the sources and builds three toolchains:
    hours on 2 cores, beyond CI's 90 minutes)."""
    dl = br.download_dir()
    missing = sorted({m for a in ARCHES for m in br.missing_sources(configured[a]["info"], dl)})
    if missing and not (_network() and os.environ.get("TRAPLINE_BUILDROOT_FULL") == "1"):
        why = ("this machine has no network" if not _network() else
               "downloading them and building needs TRAPLINE_BUILDROOT_FULL=1")
        pytest.skip(f"a whole Buildroot build needs {len(missing)} source files that are not in BR2_DL_DIR={dl} "
                    f"(e.g. {', '.join(Path(m).name for m in missing[:3])}) and {why}")
    r = trapline("images", "--builder", "buildroot", env={"BUILDROOT": str(tree)}, timeout=6 * 3600 * 3)
    assert r.returncode == 0, r.stderr[-3000:]
    results = tmp_path / "results"
    for eid in ("sparc-misalign-trap", "armv6-unaligned", "numa-first-touch"):
        r = trapline("run", eid, "--platform", "qemu", "--quick", "--images", "buildroot",
                     env={"BUILDROOT": str(tree), "TRAPLINE_RESULTS": str(results)})
        assert r.returncode == 0, r.stderr[-3000:]
        e = json.loads(((results / "latest").resolve() / "entries" / f"{eid}.qemu.json").read_text())
        assert e["status"] == "reproduced" and all(c["ok"] for c in e["checks"]), (eid, e["checks"])
        assert e["platform_facts"]["boot"]["images"] == "buildroot"
