"""The timing-model platform: the experiment's kernel runs under QEMU user-mode
emulation with trapline's timing plugin (model/plugin/trapline-model.c), which
charges cycles for what executes according to a machine description
(gem5_configs/machines/<name>.yaml, trapline/machine.py).

Each measured repetition of a kernel is one region of interest (TL_ROI_BEGIN/
END in tl_measure), so the plugin's region i is the kernel's sample line i:
the sample keeps its ops and parameters and its time becomes the modelled one,
cycles / clock. The same metrics as on the host then apply. User mode with one
thread is deterministic: the same inputs give byte-identical stats.

An experiment whose model lane says `guest: true` needs a kernel (NUMA page
placement by Linux's first-touch policy, kernel fixups, a trap's whole path):
its commands run in the guest image of the qemu lane, booted under qemu-system
with the plugin (modelling only inside regions) and, for the one-vCPU guests,
-icount (nearly deterministic: docs/model.md), so the model also charges what
the guest kernel does inside a region, and a data access's cache lines and NUMA
node come from its guest-physical address (the arch's NUMA layout says which node
holds it: trapline/arch.py).

--set key=value: a key the machine description has (dotted, e.g.
caches.l1d.line=32B, or a top-level field such as cpi) overrides the machine;
any other key is a kernel argument.
"""

from __future__ import annotations

from pathlib import Path

from trapline import arch as arch_table, guest
from trapline.platforms.base import GuestLane, Lane, Platform, guest_line
from trapline.platforms.engine import SimulatorLane
from trapline.machine import report_lines as machine_lines
from trapline.platforms.model.counters import COUNTERS
from trapline.platforms.model.engine import GuestEngine, ModelEngine, machine_facts  # noqa: F401 (machine_facts: tests)
from trapline.platforms.model.plugin_build import TOOL as PLUGIN_TOOL, plugin as built_plugin
from trapline.proc import tool_version


class UserLane(SimulatorLane):
    """A model lane in QEMU user mode: the kernel's runs under qemu-<arch> with the
    plugin. With one thread it is deterministic (the same inputs give byte-identical
    stats, and `./run.sh verify` reruns it); a lockstep lane (threads on several vCPUs,
    ordered by their clocks) is not quite (docs/model.md)."""
    mode = "user"

    def sweep_keys(self) -> dict:
        return {"plugin": built_plugin(self.ctx).parent.name,  # model/<key>/libtrapline-model.so
                "qemu": tool_version(arch_table.get(self.arch).qemu_user)}

    @classmethod
    def why_not_repeatable(cls, facts: dict) -> str | None:
        if facts.get("deterministic", True):
            return None
        if facts.get("lockstep"):
            return ("a lockstep lane of the model: threads on several vCPUs, whose host timing "
                    "moves its figures by about 1e-6 (docs/model.md)")
        return "a lane of the model whose run said its figures are not deterministic"


class GuestModelLane(SimulatorLane, GuestLane):
    """A model lane with `guest: true`: the experiment's commands in the qemu lane's guest
    image, booted once under qemu-system with the plugin (module docstring)."""
    mode = "guest"
    not_repeatable = "a guest lane of the model: a booted kernel is not bit-for-bit repeatable"

    def sweep_keys(self) -> dict:
        return {"plugin": built_plugin(self.ctx).parent.name, **super().sweep_keys()}


class ModelPlatform(Platform):
    name = "model"
    label = "timing model"
    meaning = "cycles charged by trapline's model for a machine description"
    times = "predicted"
    column = 30
    takes_machine = True
    counters = tuple(c.name for c in COUNTERS)
    lanes = (UserLane, GuestModelLane)
    engines = {"user": ModelEngine, "guest": GuestEngine}

    @classmethod
    def lane_class(cls, spec: dict) -> type[Lane]:
        """A lane (or an entry's platform_facts) that says guest: true is a guest lane."""
        return GuestModelLane if spec.get("guest") else UserLane

    @classmethod
    def report_lines(cls, f: dict) -> list[str]:
        plugin = Path(f["plugin"]).parent.name[:12] if f.get("plugin") else "-"
        out = [f"{cls.label}: plugin build {plugin}" + "".join(f"; user mode: {v}" for v in f.get("qemu", {}).values())]
        out += [guest_line(f"{cls.label} guest ({arch})", g) for arch, g in sorted(f.get("guests", {}).items())]
        return out + machine_lines(cls.label, f.get("machines", {}))

    def describe(self) -> dict:
        ctx = self.ctx
        plugin = ctx.tools.get(PLUGIN_TOOL)
        return {"plugin": str(plugin) if plugin else None,
                "qemu": {a: tool_version(arch_table.get(a).qemu_user) for a in sorted(ctx.used.get(self.name, ()))},
                # the guest lane: qemu-system and the guest image it booted
                "guests": {a: guest.guest_image_facts(a, ctx.images.get(a))
                           for a in sorted(ctx.used.get("model-guest", ()))},
                "machines": ctx.machines_used(self.name)}
