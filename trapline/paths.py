"""Where things are: the clone and the directories of it that trapline reads, and the
two places a user can move (the kernels directory, the cache). Written once here;
every other module imports them from this one (modules that named ROOT before
re-export it, e.g. results.ROOT). It imports nothing of trapline's, so no import
circle can run through it.

    ROOT       the clone (the folder holding run.sh)
    KERNELS    kernels/: the experiments (kernels_dir() is where they are read from)
    MODEL      model/: the timing model's plugin sources and its build.sh
    IMAGES     images/: the guest images' scripts
    GEM5_CONFIGS  gem5_configs/: what gem5 runs (run_se.py, the trapline_gem5 package)
    MACHINES   gem5_configs/machines/: the machine descriptions
    DOCS       docs/
    shared()   ../shared/: what the project is given beside the clone (the catalogue claims.md,
               the gem5 binary and Buildroot tarball for tests and CI)
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
MODEL = ROOT / "model"
IMAGES = ROOT / "images"
GEM5_CONFIGS = ROOT / "gem5_configs"
MACHINES = GEM5_CONFIGS / "machines"
DOCS = ROOT / "docs"


def kernels_dir() -> Path:
    """The kernels directory, the one place experiments live: $TRAPLINE_KERNELS
    when set (a tree of its own, e.g. a test's throwaway experiment), else the
    clone's kernels/. The build (trapline/build.py) reads the same setting."""
    env = os.environ.get("TRAPLINE_KERNELS")
    return Path(env) if env else KERNELS


def cache_root(environ=None) -> Path:
    """Where builds are cached by content hash: $TRAPLINE_CACHE (of `environ`, default
    the process's environment), default ~/.cache/trapline."""
    env = os.environ if environ is None else environ
    return Path(env.get("TRAPLINE_CACHE") or Path.home() / ".cache" / "trapline")


def shared(*parts: str) -> Path:
    """A file of ../shared/ (the catalogue claims.md, the gem5 and Buildroot the tests and CI
    use): the first <dir>/shared/<parts> that exists for dir the clone's parent or any
    folder above it (a git worktree or a CI checkout may sit deeper than the clone);
    <clone>/../shared/<parts> when none does, so that a message can name it."""
    for d in ROOT.parents:
        p = d.joinpath("shared", *parts)
        if p.exists():
            return p
    return ROOT.parent.joinpath("shared", *parts)
