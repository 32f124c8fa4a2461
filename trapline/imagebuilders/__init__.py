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
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Protocol

from trapline.errors import UsageError

if TYPE_CHECKING:
    from trapline.images import Image

DEFAULT = "debian"


class RunContext(Protocol):
    """What a builder asks of the run it builds for (trapline/context.py's RunContext, which
    asks the builders for its images: a protocol here, so that the two do not import each
    other): its progress log and its kernels."""
    def log(self, msg: str) -> None: ...
    def kernels(self, arch: str) -> Path: ...


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


    def to_build(self, arches: list[str]) -> list[str]:
        """Of arches, those whose guest Linux this builder has not built yet, as far as it
        can tell cheaply (the run's estimate and its build ahead); [] when it cannot tell."""
        return []

    def ahead(self, ctx: RunContext, arches: list[str], on_built=None) -> "Ahead | None":
        """Start building, in the background, what the images for arches need that does
        not depend on the run's kernels (a guest Linux), so that it overlaps the lanes that
        need no guest; None when there is nothing to build ahead. on_built(arch, seconds)
        is called as each one is done."""
        return None


class Ahead:
    """Builds, one after another in a background thread, what images for arches need:
    build(arch, stop) does one (stop() turns True when the run gives up: it must then end
    soon). The run asks wait(arch) before a lane that boots arch's guest, and cancel() when
    it ends early. A failed build is left for the lane to redo in the foreground, where its
    error becomes the entry's."""

    def __init__(self, arches: list[str], build: Callable[[str, Callable[[], bool]], object],
                 on_built: Callable[[str, float], None] | None = None):
        self.arches = list(arches)
        self._build, self._on_built = build, on_built
        self._stop = threading.Event()
        self._done = {a: threading.Event() for a in self.arches}
        self.failed: dict[str, str] = {}
        self.started = time.monotonic()
        self.current: tuple[str, float] | None = None  # (arch, since) while it builds
        self._thread = threading.Thread(target=self._work, name="images-ahead", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        for arch in self.arches:
            if self._stop.is_set():
                break
            t0 = time.monotonic()
            self.current = (arch, t0)
            try:
                self._build(arch, self._stop.is_set)
                if self._on_built and not self._stop.is_set():
                    self._on_built(arch, time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001 - the lane builds it again and reports the error
                self.failed[arch] = str(e).splitlines()[0] if str(e) else type(e).__name__
            finally:
                self._done[arch].set()
        self.current = None
        for ev in self._done.values():
            ev.set()

    def pending(self) -> list[str]:
        return [a for a in self.arches if not self._done[a].is_set()]

    def busy(self) -> bool:
        return bool(self.pending())

    def wait(self, arch: str | None = None, log=None, every: float = 60.0) -> None:
        """Until arch's build is done (None: every one), with a line every `every` seconds."""
        events = [self._done[arch]] if arch in self._done else ([] if arch else list(self._done.values()))
        t0 = time.monotonic()
        for ev in events:
            while not ev.wait(every):
                if log and self.current:
                    a, since = self.current
                    log(f"    waiting {time.monotonic() - t0:.0f} s so far for the guest Linux built in the background "
                        f"({a}'s for {time.monotonic() - since:.0f} s; still to build after it: "
                        f"{', '.join(self.pending()[1:]) or 'none'})")

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


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
