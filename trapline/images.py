"""Guest images: a thin, typed wrapper around images/build.sh (the shell
script is the one definition of how an image is built, docs/images.md explains
it; the architecture's values come from trapline/arch.py). Booting an image
and reading its console is trapline/guest.py. Which builder makes the images a
run boots (this one, "debian", or Buildroot) is trapline/imagebuilders/.

    image = images.build_image("armv6", bindir, log)   # cached by content hash
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trapline import arch as arch_table, build
from trapline.errors import RunFailed, UsageError
from trapline.paths import IMAGES, ROOT  # noqa: F401 (ROOT re-exported)
from trapline.proc import group_dies_with_harness, run_command, tail

ARCHES = tuple(arch_table.ARCHES)
# read by tests/test_70_docker.py; the table is trapline/arch.py
QEMU_BINARY = {a.name: a.qemu_system for a in arch_table.ARCHES.values()}
BUILD_TIMEOUT_S = 3600


def check_arch(arch: str) -> None:
    if arch not in ARCHES:
        raise UsageError(f"unknown guest arch '{arch}'; valid choices: {', '.join(ARCHES)}")


@dataclass
class Image:
    arch: str
    kernel: Path
    initrd: Path
    dtb: Path | None
    facts: dict  # LINUX_SHA256, INITRD_SHA256, caches ...
    builder: str = "debian"      # who made it (trapline/imagebuilders: --images)
    bindir: Path | None = None   # the experiment kernels as the guest holds them in /trapline/bin
    provenance: dict = field(default_factory=dict)  # the builder's facts for a manifest (versions, hashes)


def build_image(arch: str, bindir: Path | None, log=None, stop=None) -> Image:
    """Build (or find in the cache) the kernel and the initramfs holding bindir. stop():
    polled while build.sh runs; True kills it (a build in the background the run gives up)."""
    check_arch(arch)
    cmd = ["bash", str(IMAGES / "build.sh"), arch, "", str(bindir) if bindir else ""]
    env = dict(os.environ, TRAPLINE_CACHE=str(build.cache_root()), **arch_table.get(arch).build_env())

    memo = _memo_path(arch, bindir, env)
    out = _memo_read(memo)
    if out is None:
        drop_stale_kernel_builds()
        status, out, err = run_command(group_dies_with_harness(cmd), BUILD_TIMEOUT_S, env=env, log=None, stop=stop)
        if status != 0:
            raise RunFailed(f"building the {arch} guest image failed (status {status}):\n{tail(err, 25)}")
        for line in err.splitlines():
            if log and ("built" in line or "cached" in line or "took" in line):
                log("    " + line.strip())
    elif log:
        log(f"    build.sh: {arch} image cached (none of its inputs' files changed since it said so)")
    facts = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", out, re.M))
    if "KERNEL" not in facts or "INITRD" not in facts:
        raise RunFailed(f"images/build.sh {arch} printed no KERNEL=/INITRD= lines:\n{tail(out)}")
    if memo:
        _memo_write(memo, out)
    return Image(arch, Path(facts["KERNEL"]), Path(facts["INITRD"]),
                 Path(facts["DTB"]) if facts.get("DTB") else None, facts, "debian", Path(bindir) if bindir else None,
                 {"builder": "debian"})


# build.sh finds a cached image by the content hash of its inputs, which takes it
# 0.3-0.8 s (sha256 of the guest binaries, dpkg-query, the compiler's --version) at
# every run. Its answer is kept per fingerprint of those inputs' files (path, size,
# mtime, inode: images/, the kernels directory, the Linux tarball, dpkg's status
# for the packages and compilers) and of the environment it reads, and reused while
# none changed and the files it named exist (docs/performance.md).
def _memo_path(arch: str, bindir: Path | None, env: dict) -> Path | None:
    if env.get("TRAPLINE_REPRO_CHECK") == "1":
        return None
    h = hashlib.sha256()
    for k in sorted(env):
        if k.startswith(("TL_", "TRAPLINE_", "SOURCE_DATE_EPOCH")) or k in ("PATH", "HOME"):
            h.update(f"{k}={env[k]}\n".encode())
    paths = [IMAGES, Path(env.get("TRAPLINE_LINUX_TARBALL", "/usr/src/linux-source-6.1.tar.xz")),
             Path("/var/lib/dpkg/status")] + ([Path(bindir)] if bindir else [])
    try:
        for top in paths:
            for p in sorted([top] + (list(top.rglob("*")) if top.is_dir() else [])):
                st = p.stat()
                h.update(f"{p} {st.st_size} {st.st_mtime_ns} {st.st_ino}\n".encode())
    except OSError:
        return None
    return build.cache_root() / "images" / ".memo" / f"{arch}-{h.hexdigest()[:40]}"


def _memo_read(memo: Path | None) -> str | None:
    if memo is None:
        return None
    try:
        out = memo.read_text()
    except OSError:
        return None
    named = re.findall(r"^(?:KERNEL|INITRD|DTB)=(.*)$", out, re.M)
    return out if len(named) >= 2 and all(Path(p).is_file() for p in named) else None


def _memo_write(memo: Path, out: str) -> None:
    from trapline.results import cache_write
    cache_write(memo, out)  # (a cache the user cannot write: build.sh answers every time)


def drop_stale_kernel_builds() -> None:
    """Remove the work trees (CACHE/images/.build-*, up to 1.5 GB each) of kernel builds that
    were killed with their harness: build.sh removes its own when it ends, but a SIGKILL
    gives it no chance. Only while no kernel build runs: build.sh's lock is free."""
    import fcntl
    import shutil
    cache = build.cache_root() / "images"
    stale = list(cache.glob(".build-*"))
    if not stale:
        return
    try:
        with open(cache / ".lock-linux", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # a build runs: its tree is not stale
            for d in cache.glob(".build-*"):
                shutil.rmtree(d, ignore_errors=True)
    except OSError:
        pass


def linux_built(arch: str) -> bool:
    """Whether the cache holds a guest Linux built for arch (any of its keys: a hint for the
    run's estimate and its build ahead, not proof; build.sh decides by the content hash)."""
    return any((d / "manifest.txt").is_file() for d in (build.cache_root() / "images").glob(f"{arch}-linux-*"))


def symbol(image: Image, name: str) -> int:
    """The address of a symbol of the guest's Linux, from the System.map the
    kernel build left beside it (e.g. sparc64_ttable_tl0, the trap table)."""
    smap = Path(image.facts.get("LINUX_CACHE", "")) / "System.map"
    try:
        for line in smap.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2] == name:
                return int(parts[0], 16)
    except OSError as e:
        raise RunFailed(f"cannot read the {image.arch} guest's System.map ({smap}): {e.strerror}") from None
    raise RunFailed(f"the {image.arch} guest's System.map ({smap}) has no symbol {name}")
