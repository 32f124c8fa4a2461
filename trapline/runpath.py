"""Where a simulator runs a program: from a copy at a path of one length on every machine, as ./<name>.

A simulator in user (SE) mode writes the program's path onto its initial stack as argv[0], and answers
readlink("/proc/self/exe") with the path it loaded the program from (gem5: src/sim/syscall_emul.hh,
readlinkFunc; QEMU's linux-user: its exec_path), which static glibc keeps on its heap from start-up on.
Run from the cache (~/.cache under a home folder of any length natively, /opt/trapline/cache in the
image) the stack, the heap, the lines first touched and so the modelled figures moved with the cache's
path. So a run copies the program to <run folder>/exe/<name>, the run folder made in RUN_PARENT under a
prefix of the platform's (tempfile's random part is always 8 characters), links the rest of the
program's folder beside the copy (a dynamically linked program finds its libraries at $ORIGIN), and
runs it as ./<name> (argv0)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# /tmp where it can be written (its path has one length everywhere), else the system's temporary folder
RUN_PARENT = "/tmp" if os.access("/tmp", os.W_OK) else None


def run_folder(prefix: str) -> tempfile.TemporaryDirectory:
    """A run's own temporary folder, RUN_PARENT/<prefix>XXXXXXXX (removed when the context ends)."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=RUN_PARENT)


def program(argv: list[str], cwd: Path | str | None) -> Path:
    """The program argv names, its path taken from cwd when relative (as the process started in cwd
    finds it)."""
    return Path(argv[0]) if not cwd or Path(argv[0]).is_absolute() else Path(cwd) / argv[0]


def stage(program: Path, folder: Path) -> Path:
    """program copied to folder/exe/<name>, the other files of its folder linked beside the copy; returns
    the copy's path."""
    src, exe = program.resolve(), folder / "exe" / program.name
    exe.parent.mkdir()
    for beside in src.parent.iterdir():
        if beside.name != exe.name:
            (exe.parent / beside.name).symlink_to(beside)
    shutil.copy2(src, exe)
    return exe


def argv0(program: Path) -> str:
    """The argv[0] a staged program runs with."""
    return f"./{program.name}"
