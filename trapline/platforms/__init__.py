"""Platforms: where an experiment runs. One module per platform; the module
name is the registry key used by --platform and by kernels/<id>/experiment.yaml.

    host   the x86_64 machine trapline runs on (real hardware, real time)
    qemu   guests booted under QEMU: functional traps and counts
    model  the timing model: QEMU user mode + trapline's plugin + a machine description
    gem5   gem5 with the same machine descriptions, where a user has gem5 (planned)

A platform is made for one run context (trapline/context.py) and keeps no
state of its own: what it builds and loads lives on the context.
"""

from __future__ import annotations

from trapline.context import RunContext
from trapline.errors import UsageError
from trapline.platforms.base import Platform
from trapline.platforms.host import HostPlatform
from trapline.platforms.model import ModelPlatform
from trapline.platforms.qemu import QemuPlatform

PLATFORMS: dict[str, type[Platform]] = {"host": HostPlatform, "qemu": QemuPlatform, "model": ModelPlatform}
# Named in experiment files already; runnable once their issue lands: why not, and how to read its figures.
PLANNED = {
    "gem5": "gem5 scripts are not written yet (and gem5 is not installed here)",
}
PLANNED_MEANING = {
    "gem5": "simulated cycles from gem5 with the same machine description",
}


def check(name: str) -> type[Platform]:
    """The platform class called name; a UsageError naming the valid choices otherwise."""
    if name not in PLATFORMS:
        if name in PLANNED:
            raise UsageError(f"platform '{name}' is not available: {PLANNED[name]}; "
                             f"valid choices: {', '.join(PLATFORMS)}")
        raise UsageError(f"unknown platform '{name}'; valid choices: {', '.join(PLATFORMS)}")
    return PLATFORMS[name]


def get(name: str, ctx: RunContext) -> Platform:
    """The platform called name, working in the run context ctx."""
    return check(name)(ctx)


def meaning(name: str) -> str:
    """How figures from the platform called name must be read (also for planned ones)."""
    return PLATFORMS[name].meaning if name in PLATFORMS else PLANNED_MEANING.get(name, name)


def machine_platform() -> str:
    """The platform that --machine is for."""
    return next(n for n, p in PLATFORMS.items() if p.takes_machine)
