"""Checks on the program a user gives `./run.sh simulate`: an existing, readable,
executable ELF file of the machine's architecture (its ELF class and e_machine,
trapline/arch.py's `elf`), linked statically (no PT_INTERP: a guest, gem5's SE mode
and QEMU user mode without a sysroot have no dynamic loader for it). Each failure
is one UsageError line naming the program and what to do, before any simulation.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from dataclasses import dataclass

from trapline import arch as arch_table
from trapline.errors import UsageError

PT_INTERP = 3
ELF_CLASS_WORDS = {1: "32-bit", 2: "64-bit"}


@dataclass(frozen=True)
class Program:
    path: str
    sha256: str
    arch: str


def _elf_arch(cls: int, machine: int) -> str | None:
    return next((a.name for a in arch_table.ARCHES.values() if a.elf == (cls, machine)), None)


def _header(data: bytes) -> tuple[int, int, bool]:
    """(ELF class, e_machine, statically linked) of an ELF file's bytes."""
    cls, endian = data[4], data[5]
    e = "<" if endian == 1 else ">"
    (machine,) = struct.unpack_from(e + "H", data, 18)
    if cls == 2:
        phoff, = struct.unpack_from(e + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(e + "HH", data, 54)
    else:
        phoff, = struct.unpack_from(e + "I", data, 28)
        phentsize, phnum = struct.unpack_from(e + "HH", data, 42)
    static = True
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 4 > len(data):
            break
        (ptype,) = struct.unpack_from(e + "I", data, at)
        if ptype == PT_INTERP:
            static = False
    return cls, machine, static


def check(name: str, arch: str) -> Program:
    """The program `name` (a bare name is looked up on PATH) checked for `arch`."""
    path = name if "/" in name else (shutil.which(name) or name)
    if not os.path.exists(path):
        raise UsageError(f"simulate: program '{name}' does not exist")
    if os.path.isdir(path):
        raise UsageError(f"simulate: program '{name}' is a directory; give a static executable")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"simulate: program '{name}' cannot be read ({e.strerror})") from None
    if data[:4] != b"\x7fELF" or len(data) < 64:
        raise UsageError(f"simulate: program '{name}' is not an ELF executable (a static binary for {arch} is needed)")
    if not os.access(path, os.X_OK):
        raise UsageError(f"simulate: program '{name}' is not executable (chmod +x it)")
    try:
        cls, machine, static = _header(data)
    except struct.error:
        raise UsageError(f"simulate: program '{name}' has a truncated ELF header") from None
    if (cls, machine) != arch_table.get(arch).elf:
        found = _elf_arch(cls, machine) or f"{ELF_CLASS_WORDS.get(cls, '?')} e_machine {machine}"
        raise UsageError(f"simulate: program '{name}' is built for {found}, but the machine is {arch}; "
                         f"build it with {arch_table.get(arch).cc} -static")
    if not static:
        raise UsageError(f"simulate: program '{name}' is dynamically linked; build it with -static "
                         f"({arch_table.get(arch).cc} -static ...)")
    return Program(path, hashlib.sha256(data).hexdigest(), arch)
