"""Guest image builders: who makes the kernel, device tree and initramfs that a
guest lane (the qemu lane, the timing model's guest lane) boots. One module per
builder in this folder, found by scanning it (no central list); `--images NAME`
(run, reproduce-all, sweep) and `./run.sh images --builder NAME` choose one, and
RunContext.image asks it. Both lay an image out alike (trapline/images.Image:
images/boot.sh boots either unchanged).

    debian     images/build.sh: Debian's linux-source-6.1 and cross compilers (the default)
    buildroot  images/buildroot: a BR2_EXTERNAL tree, built by the user's Buildroot 2026.02.3

    builder = imagebuilders.get("buildroot")   # UsageError naming the choices if unknown
    builder.check()                            # UsageError if it cannot work here (before any run)
    image = builder.image(ctx, "armv6")        # built, or found in the cache by content hash
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from trapline.errors import UsageError

if TYPE_CHECKING:
    from trapline.context import RunContext
    from trapline.images import Image

DEFAULT = "debian"


class ImageBuilder(ABC):
    """Makes guest images. Subclasses set name (what --images takes) and summary
    (one line for the help and docs)."""
    name: ClassVar[str]
    summary: ClassVar[str]

    def check(self) -> None:
        """Raise UsageError, naming what is missing and how to get it, when this
        builder cannot work on this machine; called before any work starts."""

    @abstractmethod
    def image(self, ctx: RunContext, arch: str) -> Image:
        """The guest image for arch (ctx.log shows the progress), built or found in
        the cache. Image.builder names this builder, Image.bindir holds the
        experiment kernels as the guest has them, Image.provenance what a manifest
        records of it."""


def _scan() -> dict[str, type[ImageBuilder]]:
    found = {}
    for mod in pkgutil.iter_modules(__path__):
        m = importlib.import_module(f"{__name__}.{mod.name}")
        for obj in vars(m).values():
            if isinstance(obj, type) and issubclass(obj, ImageBuilder) and obj is not ImageBuilder \
                    and obj.__module__ == m.__name__:
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != DEFAULT, kv[0])))


_BUILDERS: dict[str, type[ImageBuilder]] | None = None


def names() -> list[str]:
    """The builders' names, the default first."""
    global _BUILDERS
    if _BUILDERS is None:
        _BUILDERS = _scan()
    return list(_BUILDERS)


def get(name: str | None = None) -> ImageBuilder:
    """A new builder called name (default: debian); UsageError naming the choices otherwise."""
    name = name or DEFAULT
    if name not in names():
        raise UsageError(f"unknown image builder '{name}'; valid choices: {', '.join(names())}")
    return _BUILDERS[name]()
