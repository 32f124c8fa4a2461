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

import json
import os
import tempfile
import time
from pathlib import Path

from trapline import arch as arch_table, guest, kernelio, machine as machines
from trapline.errors import UsageError
from trapline.platforms.base import (GuestLane, Lane, Platform, PlatformRun, check_kernel_sets, guest_line, machine_lines)
from trapline.platforms.engine import run_lane
from trapline.platforms.model.counters import COUNTERS
from trapline.platforms.model.engine import (TIMEOUT_S, GuestEngine, ModelEngine,
                                             guest_plugin_options, machine_facts, unused_fields as model_unused_fields)
from trapline.platforms.model.plugin_build import TOOL as PLUGIN_TOOL, plugin as built_plugin
from trapline.proc import tail, tool_version

GUEST_TIMEOUT_S = {True: 600, False: 2400}  # quick, full
# (the guest lane's -icount arguments per architecture: trapline/arch.py)


class UserLane(Lane):
    """A model lane in QEMU user mode: the kernel's runs under qemu-<arch> with the
    plugin. With one thread it is deterministic (the same inputs give byte-identical
    stats, and `./run.sh verify` reruns it); a lockstep lane (threads on several vCPUs,
    ordered by their clocks) is not quite (docs/model.md)."""

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

    def run(self, exp, m: machines.Machine, t0: float) -> PlatformRun:
        """The kernel's runs one after another under qemu-<arch> with the plugin."""
        ctx = self.ctx
        ctx.use(self.platform.name, self.arch)
        ctx.log(f"{exp.id}: timing model, machine {m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}")
        engine = ModelEngine(m, built_plugin(ctx), lockstep=bool(self.spec.get("lockstep")), log=ctx.log)
        return run_lane(self, exp, engine, ctx.kernels(self.arch) / exp.kernel, TIMEOUT_S, t0)


class GuestModelLane(GuestLane):
    """A model lane with `guest: true`: the experiment's commands in the qemu lane's guest
    image, booted under qemu-system with the plugin (module docstring)."""
    not_repeatable = "a guest lane of the model: a booted kernel is not bit-for-bit repeatable"

    def sweep_keys(self) -> dict:
        return {"plugin": built_plugin(self.ctx).parent.name, **super().sweep_keys()}

    def run(self, exp, m: machines.Machine, t0: float) -> PlatformRun:
        """The experiment's commands in the guest image, under qemu-system with the plugin."""
        ctx, log, spec, arch = self.ctx, self.ctx.log, self.spec, self.arch
        kset = self.platform.kernel_sets
        if os.environ.get("TRAPLINE_MEM"):
            raise UsageError("the model's guest lane maps guest-physical memory to NUMA nodes with the default "
                             "guest memory; unset TRAPLINE_MEM")
        a = arch_table.get(arch)
        layout = {"node_bytes": a.numa.node_bytes, "cpu_nodes": list(a.numa.cpu_nodes)}
        lat = m.numa_cycles()
        if lat and len(lat) != len(layout["node_bytes"]):
            raise UsageError(f"machine '{m.name}' has {len(lat)} NUMA nodes but the {arch} guest has "
                             f"{len(layout['node_bytes'])}; use a machine with {len(layout['node_bytes'])} "
                             f"(or --set the numa group)")
        image = ctx.image(arch)
        ctx.use("model-guest", arch)
        bindir = ctx.kernels(arch)
        commands, shown = guest.guest_commands(ctx, exp, spec, kset)
        timeout = ctx.timeout_for(spec.get("boot_timeout_s", GUEST_TIMEOUT_S[ctx.quick]))
        output = kernelio.KernelOutput()
        engine = ModelEngine(m, built_plugin(ctx))
        with tempfile.TemporaryDirectory(prefix="trapline-model-guest-") as tmp:
            out = Path(tmp) / "stats.json"
            log(f"{exp.id}: booting the {arch} guest under the timing model ({m.name}) with "
                f"{len(commands)} command(s)")
            # from the image's snapshot (booted once to its init), with the plugin loaded at restore
            b, retried = guest.boot_once_more_if_silent(exp.id, image, commands, timeout, log, snapshot=True,
                                                        qemu_extra=["-plugin", guest_plugin_options(
                                                            m, image, engine.plugin, out)] + list(a.icount))
            stats = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
        raw = f"$ {b.qemu_cmdline}\n{b.console}\n--- boot.sh ---\n{b.stderr}\n--- model stats ---\n" \
              f"{json.dumps(stats, indent=1)}"
        hashes = guest.guest_hashes(image, bindir, exp.kernel)
        outs, err = guest.command_outputs(b, commands, shown, timeout, under=" under the model")
        if err is None and not stats:
            err = f"QEMU ended without the model's statistics (the plugin writes them at exit); " \
                  f"console tail:\n{tail(b.console)}\n{tail(b.stderr, 5)}"
        # regions of every vCPU in the order they began: the guest's commands
        # ran one after another, each bound to its CPU while it measured
        regions = sorted((g for g in stats.get("regions", []) if g.get("marked")), key=lambda g: g["seq"])
        for text, what in zip(outs if err is None else [], shown):
            o = kernelio.parse(text)
            mine, regions = regions[:len(o.samples)], regions[len(o.samples):]
            err = engine.pair(o, mine, " ".join(what))
            if err:
                break
            output.extend(o)
        if err is None and regions:
            err = f"the model reported {len(regions)} more regions than the guest printed samples"
        run = PlatformRun(output, raw, shown, error=err, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = machine_facts(exp, m, len(stats.get("regions", [])), guest=True)
        icount = a.icount
        # a guest is not bit-for-bit deterministic even under -icount (docs/model.md:
        # the sun4u guest's regions differ by a few window traps in some runs)
        run.facts.update(guest=True, boot=b.facts, boot_retried=retried, icount=icount[1] if icount else None,
                         deterministic=False, numa_layout=layout if lat else None)
        return run


class ModelPlatform(Platform):
    name = "model"
    label = "timing model"
    meaning = "cycles charged by trapline's model for a machine description"
    times = "predicted"
    column = 30
    takes_machine = True
    counters = tuple(c.name for c in COUNTERS)
    lanes = (UserLane, GuestModelLane)

    @classmethod
    def unused_fields(cls, machine) -> frozenset[str]:
        return model_unused_fields(machine)

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
                "machines": self.machines_used()}

    def validate(self, exp) -> None:
        self.machine_of(exp)  # raises for a bad machine field, naming it, or another arch than the lane's
        check_kernel_sets(self.ctx, exp, self.name, self.kernel_sets,
                          also=f"; or a machine field: {', '.join(sorted(machines.top_fields()))} "
                               f"(dotted, e.g. caches.l1d.line=32B)")

    def run(self, exp) -> PlatformRun:
        _, _, t0 = self._lane(exp)
        m = self.use_machine(exp)
        built_plugin(self.ctx)
        return self.lane(exp).run(exp, m, t0)

    simulates = ("user", "guest")

    @classmethod
    def simulate_problem(cls, machine: machines.Machine, mode: str) -> str | None:
        why = super().simulate_problem(machine, mode)
        if why or mode != "guest":
            return why
        if os.environ.get("TRAPLINE_MEM"):
            return "the model's guest maps guest-physical memory to NUMA nodes with the default guest memory; unset TRAPLINE_MEM"
        nodes, lat = len(arch_table.get(machine.arch).numa.node_bytes), machine.numa_cycles()
        if lat and len(lat) != nodes:
            return (f"machine '{machine.name}' has {len(lat)} NUMA nodes but the {machine.arch} guest has {nodes} "
                    f"(--set the numa group)")
        return None

    def engine(self, machine: machines.Machine, mode: str):
        plugin = built_plugin(self.ctx)
        return GuestEngine(machine, plugin, self.ctx) if mode == "guest" else ModelEngine(machine, plugin)

