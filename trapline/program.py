"""Checks on the program a user gives `./run.sh simulate`: an existing, readable,
executable ELF file of the machine's architecture (its ELF class and e_machine,
trapline/arch.py's `elf`), an executable (ET_EXEC, or a static PIE: ET_DYN marked
DF_1_PIE; not a shared object or an object file), whole (its program headers and
every loaded segment inside the file, as a truncated copy's are not), linked
statically (no PT_INTERP: a guest, gem5's SE mode and QEMU user mode without a
sysroot have no dynamic loader for it). Each failure is one UsageError line naming
the program and what to do, before any simulation.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from dataclasses import dataclass

from trapline import arch as arch_table
from trapline.errors import UsageError

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
ET_EXEC, ET_DYN = 2, 3
DT_FLAGS_1, DF_1_PIE = 0x6FFFFFFB, 0x08000000
ELF_CLASS_WORDS = {1: "32-bit", 2: "64-bit"}
ELF_TYPE_WORDS = {0: "an ELF file of no type", 1: "an object file (.o), not linked",
                  3: "a shared object (a library), not an executable", 4: "a core dump"}


@dataclass(frozen=True)
class Program:
    path: str
    sha256: str
    arch: str


def _elf_arch(cls: int, machine: int) -> str | None:
    return next((a.name for a in arch_table.ARCHES.values() if a.elf == (cls, machine)), None)


@dataclass(frozen=True)
class Header:
    cls: int             # ELF class: 1 (32-bit) or 2 (64-bit)
    machine: int         # e_machine
    kind: str | None     # what it is when not an executable (ELF_TYPE_WORDS); None: an executable
    static: bool         # no PT_INTERP
    cut: str | None      # what lies past the file's end (a truncated copy); None: it is whole


def _header(data: bytes) -> Header:
    """What an ELF file's bytes are: class, machine, type, linking and wholeness (struct.error
    when its ELF header itself is cut short)."""
    cls, endian = data[4], data[5]
    e = "<" if endian == 1 else ">"
    etype, machine = struct.unpack_from(e + "HH", data, 16)
    if cls == 2:
        phoff, = struct.unpack_from(e + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(e + "HH", data, 54)
        # p_type, p_offset, p_filesz of a 64-bit program header
        ph = lambda at: (struct.unpack_from(e + "I", data, at)[0], *struct.unpack_from(e + "Q", data, at + 8),  # noqa: E731
                         *struct.unpack_from(e + "Q", data, at + 32))
        dyn = e + "qQ"
    else:
        phoff, = struct.unpack_from(e + "I", data, 28)
        phentsize, phnum = struct.unpack_from(e + "HH", data, 42)
        ph = lambda at: (*struct.unpack_from(e + "II", data, at), *struct.unpack_from(e + "I", data, at + 16))  # noqa: E731
        dyn = e + "iI"
    if phoff + phnum * phentsize > len(data):
        return Header(cls, machine, None, True, f"its program headers (bytes {phoff} to {phoff + phnum * phentsize})")
    static, pie, cut = True, False, None
    for i in range(phnum):
        ptype, off, size = ph(phoff + i * phentsize)
        if ptype == PT_INTERP:
            static = False
        if ptype in (PT_LOAD, PT_DYNAMIC) and off + size > len(data) and cut is None:
            cut = f"segment {i} (bytes {off} to {off + size})"
        if ptype == PT_DYNAMIC and off + size <= len(data):
            step = struct.calcsize(dyn)
            for at in range(off, off + size - step + 1, step):
                tag, val = struct.unpack_from(dyn, data, at)
                if tag == 0:
                    break
                if tag == DT_FLAGS_1 and val & DF_1_PIE:
                    pie = True
    kind = None if etype == ET_EXEC or (etype == ET_DYN and pie) else \
        ELF_TYPE_WORDS.get(etype, f"an ELF file of type {etype}, not an executable")
    return Header(cls, machine, kind, static, cut)


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
        h = _header(data)
    except struct.error:
        raise UsageError(f"simulate: program '{name}' has a truncated ELF header") from None
    cc = arch_table.get(arch).cc
    if h.cut:
        raise UsageError(f"simulate: program '{name}' is truncated: {h.cut} lies past its end ({len(data)} bytes); "
                         f"copy or build it again")
    if (h.cls, h.machine) != arch_table.get(arch).elf:
        found = _elf_arch(h.cls, h.machine) or f"{ELF_CLASS_WORDS.get(h.cls, '?')} e_machine {h.machine}"
        raise UsageError(f"simulate: program '{name}' is built for {found}, but the machine is {arch}; "
                         f"build it with {cc} -static")
    if h.kind:
        raise UsageError(f"simulate: program '{name}' is {h.kind}; give a static executable ({cc} -static ...)")
    if not h.static:
        raise UsageError(f"simulate: program '{name}' is dynamically linked; build it with -static "
                         f"({cc} -static ...)")
    return Program(path, hashlib.sha256(data).hexdigest(), arch)
