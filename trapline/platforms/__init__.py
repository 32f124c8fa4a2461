"""Platforms: where an experiment runs. One module per platform; the module
name is the registry key used by --platform and by experiments/<id>.yaml.

    host   the x86_64 machine trapline runs on (real hardware, real time)
    qemu   guests booted under QEMU: functional traps and counts
    model  the timing model: QEMU user mode + trapline's plugin + a machine description
    gem5   gem5 with the same machine descriptions, where a user has gem5 (planned)
"""

from __future__ import annotations

from trapline.errors import UsageError
from trapline.platforms.base import Platform
from trapline.platforms.host import HostPlatform
from trapline.platforms.model import ModelPlatform
from trapline.platforms.qemu import QemuPlatform

PLATFORMS: dict[str, type[Platform]] = {"host": HostPlatform, "qemu": QemuPlatform, "model": ModelPlatform}
# Named in experiment files already; runnable once their issue lands.
PLANNED = {
    "gem5": "gem5 scripts are not written yet (and gem5 is not installed here)",
}


# set by the CLI's --machine (model platform only)
OPTIONS: dict[str, str] = {}


def get(name: str) -> Platform:
    if name not in PLATFORMS:
        if name in PLANNED:
            raise UsageError(f"platform '{name}' is not available: {PLANNED[name]}; "
                             f"valid choices: {', '.join(PLATFORMS)}")
        raise UsageError(f"unknown platform '{name}'; valid choices: {', '.join(PLATFORMS)}")
    if name == "model":
        return ModelPlatform(OPTIONS.get("machine"))
    return PLATFORMS[name]()
