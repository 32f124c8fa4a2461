"""Guest images: a thin, typed wrapper around images/build.sh (the shell
script is the one definition of how an image is built, docs/images.md explains
it; the architecture's values come from trapline/arch.py). Booting an image
and reading its console is trapline/guest.py.

    image = images.build_image("armv6", bindir, log)   # cached by content hash
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from trapline import arch as arch_table, build
from trapline.errors import RunFailed, UsageError
from trapline.proc import run_command, tail

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
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


def build_image(arch: str, bindir: Path | None, log=None) -> Image:
    """Build (or find in the cache) the kernel and the initramfs holding bindir."""
    check_arch(arch)
    cmd = ["bash", str(IMAGES / "build.sh"), arch, "", str(bindir) if bindir else ""]
    env = dict(os.environ, TRAPLINE_CACHE=str(build.cache_root()), **arch_table.get(arch).build_env())

    status, out, err = run_command(cmd, BUILD_TIMEOUT_S, env=env, log=None)
    if status != 0:
        raise RunFailed(f"building the {arch} guest image failed (status {status}):\n{tail(err, 25)}")
    facts = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", out, re.M))
    for line in err.splitlines():
        if log and ("built" in line or "cached" in line or "took" in line):
            log("    " + line.strip())
    if "KERNEL" not in facts or "INITRD" not in facts:
        raise RunFailed(f"images/build.sh {arch} printed no KERNEL=/INITRD= lines:\n{tail(out + err)}")
    return Image(arch, Path(facts["KERNEL"]), Path(facts["INITRD"]),
                 Path(facts["DTB"]) if facts.get("DTB") else None, facts)


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
