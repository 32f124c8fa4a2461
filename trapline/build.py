"""Build the kernels for one architecture, cached by content hash.

The cache lives outside the clone (``$TRAPLINE_CACHE``, default
``~/.cache/trapline``) so that a fresh clone, CI, and the Docker build reuse a
build whose inputs did not change. The key is the sha256 of every file under
the kernels directory (``paths.kernels_dir()``: ``$TRAPLINE_KERNELS`` or
kernels/) except the experiments' prose and data (experiment.yaml, README.md,
disasm.yaml, which the compiler never reads), the architecture with its compiler
and flags (trapline/arch.py), and the full
``--version`` of the compiler and make.
A build goes to a temporary directory and is renamed into place, so a killed
build never leaves a half-filled cache entry.

A flavour is a variant of the same sources with more compiler flags (FLAVOURS,
the one place that says which): the default ("") is what every lane runs;
"gem5" adds -DTL_GEM5, which turns the region markers of kernels/common/trapline.h
into gem5's m5 ops (reset the stats at a region's start, dump them at its end);
"gem5-freestanding" also adds -DTL_FREESTANDING, which links the sparc64 kernels
a kernel.mk names without glibc, for a stock gem5 whose SPARC SE mode cannot
start a glibc program (kernels/common/freestanding.mk; trapline's gem5 can).
A flavour has its own cache key and directory (``<arch>-gem5-<key>``); the
default's key and directory are what they were before flavours existed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from functools import lru_cache
from pathlib import Path

from trapline import arch as arch_table
from trapline.errors import RunFailed, UsageError
from trapline.paths import ROOT, cache_root, kernels_dir  # noqa: F401 (re-exported: build.cache_root, build.kernels_dir)
ARCHES = arch_table.ARCHES  # the one architecture table (trapline/arch.py)

# Build flavours: the compiler flags each adds to the architecture's.
FLAVOURS = {"": "", "gem5": "-DTL_GEM5", "gem5-freestanding": "-DTL_GEM5 -DTL_FREESTANDING"}


def check_arch(arch: str) -> None:
    arch_table.get(arch)  # UsageError naming the valid choices


def check_flavour(flavour: str) -> None:
    if flavour not in FLAVOURS:
        raise UsageError(f"unknown build flavour '{flavour}'; valid choices: "
                         f"{', '.join(repr(f) if not f else f for f in FLAVOURS)}")


def cflags(arch: str, flavour: str = "") -> str:
    """The architecture's code generation flags plus the flavour's."""
    check_flavour(flavour)
    return " ".join(f for f in (arch_table.get(arch).cflags, FLAVOURS[flavour]) if f)


def make_vars(arch: str, flavour: str = "") -> list[str]:
    """What kernels/Makefile takes from the architecture table (and the flavour)."""
    a = arch_table.get(arch)
    return [f"ARCH={arch}", f"CC={a.cc}", f"OBJDUMP={a.objdump}", f"ARCHFLAGS={cflags(arch, flavour)}"]


@lru_cache(maxsize=None)
def _tool_version(tool: str) -> str:
    import subprocess  # (here and in build(): every command reads cache_root, few build)
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise RunFailed(f"{tool} is not installed; ./run.sh installs it on Debian "
                        f"(apt package for the cross compilers: gcc-sparc64-linux-gnu, gcc-arm-linux-gnueabi)") from None
    return out.strip()


def compiler_version(arch: str) -> str:
    return _tool_version(arch_table.get(arch).cc).splitlines()[0]


# Files in the kernels directory that no build reads: editing them rebuilds nothing.
NOT_BUILD_INPUTS = ("experiment.yaml", "README.md", "disasm.yaml")


def source_files() -> list[Path]:
    return sorted(p for p in kernels_dir().rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.name not in NOT_BUILD_INPUTS)


def input_hash(arch: str, flavour: str = "") -> str:
    a = arch_table.get(arch)
    h = hashlib.sha256()
    h.update(f"arch={arch}\n".encode())
    h.update(f"cc={a.cc} archflags={cflags(arch, flavour)}\n".encode())
    h.update(_tool_version(a.cc).encode())
    h.update(_tool_version("make").encode())
    for p in source_files():
        h.update(str(p.relative_to(kernels_dir())).encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def build(arch: str, log=None, flavour: str = "") -> Path:
    """Return the directory holding every kernel binary for arch (in the given
    flavour), building it if no cache entry with the same inputs exists."""
    key = input_hash(arch, flavour)
    name = f"{arch}-{flavour}" if flavour else arch
    root = cache_root() / "kernels"
    out = root / f"{name}-{key[:16]}"
    if (out / ".complete").exists():
        return out
    import shutil
    import subprocess
    import tempfile
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".complete").exists():
            return out
        if log:
            log(f"building kernels for {name} (cache {out.name})")
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
        try:
            jobs = str(os.cpu_count() or 2)
            proc = subprocess.run(["make", "-s", "-C", str(kernels_dir()), *make_vars(arch, flavour), f"O={tmp}", "-j", jobs, "all"],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
                raise RunFailed(f"building kernels for {name} failed:\n{tail}")
            (tmp / ".complete").write_text(key + "\n")
            if out.exists():
                shutil.rmtree(out)
            os.rename(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def guest_bins(build_dir: Path) -> Path:
    """The kernels a guest image holds: build_dir without the folders the Makefile lists as host-only
    (HOST_ONLY: kernels that never run in a guest), hard-linked beside it (<build_dir>-guest) once, so
    that a kernel of the host, the model's user mode or gem5 alone leaves the images as they were."""
    import shutil
    import subprocess
    build_dir = Path(build_dir)
    out = build_dir.parent / f"{build_dir.name}-guest"
    if (out / ".complete").exists():
        return out
    r = subprocess.run(["make", "-s", "-C", str(kernels_dir()), "host-only", "CC=cc", "ARCHFLAGS="],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RunFailed(f"listing the host-only kernels failed:\n{(r.stdout + r.stderr).strip()[-2000:]}")
    skip = set(r.stdout.split())
    tmp = build_dir.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(build_dir, tmp, copy_function=os.link,
                        ignore=lambda d, names: [n for n in names if Path(d) == build_dir and n in skip])
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def binary_hashes(build_dir: Path) -> dict[str, str]:
    """sha256 of every built file (binaries and shared libraries)."""
    out = {}
    for p in sorted(Path(build_dir).rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            out[str(p.relative_to(build_dir))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
