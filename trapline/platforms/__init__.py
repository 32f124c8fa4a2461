"""Platforms: where an experiment runs. A module (or package) of this folder is a
platform: it defines one class, a subclass of base.Platform, whose `name` is the
module's name, the key that --platform and an experiment file's `platforms:` use.
There is no central list: the registry scans this folder (ChampSim style), and
the folders in $TRAPLINE_PLATFORMS (os.pathsep-separated: platform modules kept
outside the clone, e.g. a test's throwaway one). Those of this folder:

    host   the x86_64 machine trapline runs on (real hardware, real time)
    qemu   guests booted under QEMU: functional traps and counts
    model  the timing model: QEMU user mode (or a guest) + trapline's plugin + a machine description
    gem5   gem5 in SE mode on the same machine descriptions (when a gem5 binary is found)

A platform that needs a tool this machine lacks (gem5 without a gem5 binary) is
still found, and says why it cannot run (Platform.why_unavailable): its lanes
become not-applicable entries with that reason, and --platform NAME is one line.

A platform is made for one run context (trapline/context.py) and keeps no
state of its own: what it builds and loads lives on the context. Callers ask it
(base.Platform documents every attribute and method) and never switch on its name.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING

from trapline.errors import UsageError

if TYPE_CHECKING:
    from trapline.context import RunContext
    from trapline.platforms.base import Platform

# more folders of platform modules, scanned like this one
__path__ = list(__path__) + [p for p in os.environ.get("TRAPLINE_PLATFORMS", "").split(os.pathsep) if p]
NOT_PLATFORMS = ("base", "engine")  # the modules of this folder that are not platforms (what they share)


@lru_cache(maxsize=1)
def _module_names() -> list[str]:
    """The platform modules' names, from the folders alone (nothing imported)."""
    return sorted({m.name for m in pkgutil.iter_modules(__path__)
                   if not m.name.startswith("_") and m.name not in NOT_PLATFORMS})


@lru_cache(maxsize=None)
def _load(name: str) -> type[Platform]:
    """The platform class of module `name`: the one class defined there whose `name` is the module's."""
    from trapline.platforms.base import Platform
    mod = importlib.import_module(f"{__name__}.{name}")
    found = [c for c in vars(mod).values()
             if isinstance(c, type) and issubclass(c, Platform) and c.__module__ == mod.__name__
             and getattr(c, "name", None) == name]
    if len(found) != 1:
        raise RuntimeError(f"platform module {mod.__file__} defines {len(found)} platform classes named "
                           f"'{name}'; a platform module defines exactly one (base.Platform)")
    return found[0]


def all() -> dict[str, type[Platform]]:  # noqa: A001 - platforms.all(), as the registry reads
    """Every platform found, in the claim matrix's column order (then by name)."""
    classes = [_load(n) for n in _module_names()]
    return {c.name: c for c in sorted(classes, key=lambda c: (c.column, c.name))}


def names() -> list[str]:
    """Every platform's name, in column order: the valid choices of --platform."""
    return list(all())


def find(name: str) -> type[Platform] | None:
    """The platform class called name, or None when no module of that name exists."""
    return _load(name) if name in _module_names() else None


@lru_cache(maxsize=None)
def why_unavailable(name: str) -> str | None:
    """Why the platform called name cannot run here (asked once per process); None when it can."""
    return _load(name).why_unavailable()


def why_lane_unavailable(platform: Platform | type[Platform], spec: dict) -> str | None:
    """Why the platform cannot run here, or this lane of it (spec: its part of an
    experiment file) cannot (Platform.why_lane_unavailable); None when it can."""
    why = why_unavailable(platform.name)
    if why:
        return f"the {platform.name} platform is not available here: {why}"
    return platform.why_lane_unavailable(spec) if "not_applicable" not in spec else None


def available() -> list[str]:
    """The platforms that can run here, in column order."""
    return [n for n in names() if why_unavailable(n) is None]


def check(name: str) -> type[Platform]:
    """The platform class called name, if it can run here; a UsageError naming the valid choices otherwise."""
    cls = find(name)
    if cls is None:
        raise UsageError(f"unknown platform '{name}'; valid choices: {', '.join(names())}")
    why = why_unavailable(name)
    if why:
        raise UsageError(f"platform '{name}' is not available here: {why}; "
                         f"available: {', '.join(available())}")
    return cls


def get(name: str, ctx: RunContext) -> Platform:
    """The platform called name, working in the run context ctx."""
    return check(name)(ctx)


def machine_platforms() -> list[str]:
    """The platforms that --machine (and a machine's --set keys) are for, in column order."""
    return [n for n, c in all().items() if c.takes_machine]


def machine_options() -> str:
    """The platforms --machine is for, as the option that picks them: '--platform model'."""
    return " or ".join(f"--platform {n}" for n in machine_platforms())


def counter_owner(count: str) -> type[Platform] | None:
    """The platform whose counts a count's name is (model_l1d_misses: the model's): the
    prefix before the first '_' names a platform that declares counters; None for a
    kernel's own count. Only that platform is imported."""
    head, sep, _ = count.partition("_")
    if not sep or head not in _module_names():
        return None
    cls = _load(head)
    return cls if cls.counters else None
