"""The run context: what one command (a run, a build, a simulation) knows and
has made so far, passed down to every platform instead of shared through
class attributes or module globals.

    ctx = RunContext.make(quick=True, sets={"caches.l1d.line": "32B", "n": "8"}, machine="ultrasparc-iii")
    ctx.kernel_sets             # {"n": "8"}: kernel arguments
    ctx.machine_sets            # (("caches.l1d.line", "32B"),): machine overrides, as (path, value) pairs
    ctx.machine_for("default")  # loaded and validated once per name, then reused
    ctx.kernels("sparc64")      # the kernel build dir, built once per context
    ctx.image("sparc64")        # the guest image holding those kernels (from ctx.image_builder's builder)
    ctx.tool(key, make)         # a platform's own tool (the model's plugin), made once

The caches are filled lazily and live exactly as long as the context: one
run uses one build of each architecture even if the sources change while it
runs (the manifest names that build), and a second run in the same process
(sensitivity) starts from a context of its own.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trapline import build, imagebuilders, images, machine as machines
from trapline.errors import UsageError


class Progress:
    """One line per step on stderr, with the elapsed time."""

    def __init__(self, stream=sys.stderr):
        self.t0 = time.monotonic()
        self.stream = stream

    def __call__(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", file=self.stream, flush=True)


@dataclass
class RunContext:
    quick: bool = False
    sets: dict[str, str] = field(default_factory=dict)   # as the user gave them (--set)
    machine_sets: tuple[machines.Pair, ...] = ()         # the machine's share, (path, value) pairs
    kernel_sets: dict[str, str] = field(default_factory=dict)  # the kernels' share
    machine_name: str | None = None                      # --machine (the platforms that take a machine)
    timeout: float | None = None                         # --timeout: seconds per command or guest boot
    image_builder: str = "debian"                        # --images: who builds the guest images (trapline/imagebuilders)
    log: Callable[[str], None] = field(default_factory=Progress)
    builds: dict[str, Path] = field(default_factory=dict)          # arch -> kernel build dir
    images: dict[str, images.Image] = field(default_factory=dict)  # arch -> guest image
    machines: dict[str, machines.Machine] = field(default_factory=dict)  # name -> loaded with machine_sets
    tools: dict[str, Any] = field(default_factory=dict)  # a platform's own tools (ctx.tool), by key
    used: dict[str, set[str]] = field(default_factory=dict)  # what each lane used, for its manifest facts

    def use(self, what: str, item: str) -> None:
        self.used.setdefault(what, set()).add(item)

    @classmethod
    def make(cls, quick: bool = False, sets: dict[str, str] | None = None, machine: str | None = None,
             log: Callable[[str], None] | None = None, timeout: float | None = None,
             image_builder: str | None = None) -> "RunContext":
        sets = dict(sets or {})
        mset = tuple((k, v) for k, v in sets.items() if machines.is_machine_key(k))
        kset = {k: v for k, v in sets.items() if not machines.is_machine_key(k)}
        return cls(quick=quick, sets=sets, machine_sets=mset, kernel_sets=kset, machine_name=machine,
                   log=log or Progress(), timeout=timeout, image_builder=image_builder or imagebuilders.DEFAULT)

    def timeout_for(self, declared: float) -> float:
        """A command's or a guest's time limit: --timeout when given, else what the experiment or lane declares."""
        return self.timeout if self.timeout is not None else declared

    def kernels(self, arch: str) -> Path:
        """The directory with every kernel binary for arch (built once per context)."""
        if arch not in self.builds:
            self.builds[arch] = build.build(arch, log=self.log)
        return self.builds[arch]

    def image(self, arch: str) -> images.Image:
        """The guest image for arch, from the builder --images chose (cached by content
        hash; the default, debian, holds this context's kernels)."""
        if arch not in self.images:
            self.images[arch] = imagebuilders.get(self.image_builder).image(self, arch)
        return self.images[arch]

    def machine_for(self, default: str | None, exp_id: str = "?", platform: str = "?",
                    use: bool = False) -> machines.Machine:
        """The machine --machine names (else default, the experiment's), with the
        machine's --set values applied: loaded and validated once per name. use: noted
        as used by a lane of `platform` (machines_used)."""
        name = self.machine_name or default
        if not name:
            raise UsageError(f"{exp_id} on {platform} needs --machine; valid choices: {', '.join(machines.names())}")
        if name not in self.machines:
            self.machines[name] = machines.load(name, sets=self.machine_sets)
        if use:
            self.use(f"{platform}-machines", name)
        return self.machines[name]

    def machines_used(self, platform: str) -> dict:
        """The machines the lanes of `platform` ran in this context (machine_for(..., use=True)),
        for its manifest facts: Machine.to_dict() by name (+ the --set values)."""
        return {m.name + ("+" + ",".join(m.sets) if m.sets else ""): m.to_dict()
                for k, m in sorted(self.machines.items()) if k in self.used.get(f"{platform}-machines", ())}

    def tool(self, key: str, make: Callable[[], Any]) -> Any:
        """A platform's own tool (the model's plugin, a simulator's binary) under key: made by
        make() once per context, like the kernels."""
        if key not in self.tools:
            self.tools[key] = make()
        return self.tools[key]
