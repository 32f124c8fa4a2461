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
import re
import tempfile
import time
from pathlib import Path

from trapline import arch as arch_table, build, guest, images, kernelio, machine as machines
from trapline.errors import UsageError
from trapline.kernelio import MODELLED_TIMER
from trapline.platforms.base import (GuestLane, Lane, Platform, PlatformRun, calibrated_on as base_calibrated_on,
                                     check_kernel_sets, guest_line, kernel_args, machine_lines, machine_provenance,
                                     rests_on)
from trapline.platforms.model.counters import COUNTERS, region_counts
from trapline.platforms.model.plugin_build import TOOL as PLUGIN_TOOL, plugin as built_plugin
from trapline.proc import run_command, tail, tool_version

TIMEOUT_S = 900
# a user-mode kernel's whole environment: fixed, since QEMU puts it on the kernel's
# stack and its size moves stack addresses, and so a few modelled cache misses
KERNEL_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
GUEST_TIMEOUT_S = {True: 600, False: 2400}  # quick, full
# the plugin's lockstep counts of order it could not keep (model/plugin/contention.c's
# "lockstep" stats: a turn waited 10 s, a full lock-line or futex-event table)
LOCKSTEP_LOSSES = ("timeouts", "lines_dropped", "events_dropped")
# (the guest lane's -icount arguments per architecture: trapline/arch.py)


def simulate(arch: str, plugin: Path, machine: machines.Machine, argv: list[str], timeout: float = TIMEOUT_S,
             cwd: Path | None = None, extra: list[str] | tuple[str, ...] = ()) -> tuple[dict, str, str, int | None]:
    """Run argv under qemu-<arch> with the model (extra: more plugin options, the lane's own, e.g.
    lockstep=on); returns (stats, stdout, stderr, status)."""
    with tempfile.TemporaryDirectory(prefix="trapline-model-") as tmp:
        out = Path(tmp) / "stats.json"
        opts = ",".join([str(plugin), f"arch={arch}", f"out={out}", *machine.plugin_args, *extra])
        a = arch_table.get(arch)
        cmd = [a.qemu_user, "-plugin", opts]
        if a.sysroot:
            cmd += ["-L", a.sysroot]
        status, so, se = run_command(cmd + argv, timeout, cwd=cwd, env=KERNEL_ENV)
        stats = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
    return stats, so, se, status


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
        ctx, log, spec, arch = self.ctx, self.ctx.log, self.spec, self.arch
        kset = self.platform.kernel_sets
        plugin = built_plugin(ctx)
        ctx.use(self.platform.name, arch)
        bindir = ctx.kernels(arch) / exp.kernel
        clock = m.clock_hz
        output = kernelio.KernelOutput()
        raw, shown, regions_total = [], [], 0
        lost = dict.fromkeys(LOCKSTEP_LOSSES, 0)
        log(f"{exp.id}: timing model, machine {m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}")
        for i, r in enumerate(spec.get("runs", [])):
            argv = [str(bindir / r["binary"])] + kernel_args(ctx, exp, r, kset)
            shown.append([f"{exp.kernel}/{r['binary']}"] + argv[1:])
            log(f"{exp.id} [{i + 1}/{len(spec['runs'])}] {' '.join(shown[-1])}")
            stats, so, se, status = simulate(arch, plugin, m, argv, ctx.timeout_for(r.get("timeout_s", TIMEOUT_S)),
                                             cwd=bindir, extra=["lockstep=on"] if spec.get("lockstep") else [])
            raw.append(f"$ {' '.join(shown[-1])}\n{so}{se}\n--- model stats ---\n{json.dumps(stats, indent=1)}")
            err = None
            if status is None:
                err = f"{' '.join(shown[-1])} timed out under the model; last output:\n{tail(so + se)}"
            elif status != 0:
                err = f"{' '.join(shown[-1])} exited with status {status} under the model; last output:\n{tail(so + se)}"
            if err:
                return PlatformRun(output, "\n".join(raw), shown, error=err, seconds=time.monotonic() - t0)
            out = kernelio.parse(so)
            regions = [g for g in stats.get("regions", []) if g.get("marked") and g.get("vcpu", 0) == 0]
            err = pair_regions(out, regions, clock, " ".join(shown[-1]))
            if err:
                return PlatformRun(output, "\n".join(raw), shown, seconds=time.monotonic() - t0, error=err)
            regions_total += len(regions)
            output.extend(out)
            for k in lost:
                lost[k] += stats.get("lockstep", {}).get(k, 0)
        hashes = {f"{exp.kernel}/{k}": v for k, v in build.binary_hashes(bindir).items()}
        run = PlatformRun(output, "\n".join(raw), shown, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = machine_facts(exp, m, regions_total)
        if spec.get("lockstep"):  # the clocks order the threads, but a few host races remain (docs/model.md)
            run.facts.update(lockstep=True, deterministic=False, lockstep_losses=lost)
            if any(lost.values()):
                log(f"{exp.id}: the lockstep timeline lost order in this run: "
                    f"{', '.join(f'{k} {v}' for k, v in lost.items() if v)} (docs/model.md)")
        return run


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
        with tempfile.TemporaryDirectory(prefix="trapline-model-guest-") as tmp:
            out = Path(tmp) / "stats.json"
            opts = [str(built_plugin(ctx)), f"arch={arch}", f"out={out}"] + guest_plugin_args(m, image)
            if lat:
                opts += [f"numa_mem={':'.join(str(b) for b in layout['node_bytes'])}",
                         f"numa_cpus={':'.join(str(c) for c in layout['cpu_nodes'])}"]
            log(f"{exp.id}: booting the {arch} guest under the timing model ({m.name}) with "
                f"{len(commands)} command(s)")
            # from the image's snapshot (booted once to its init), with the plugin loaded at restore
            b, retried = guest.boot_once_more_if_silent(exp.id, image, commands, timeout, log, snapshot=True,
                                                        qemu_extra=["-plugin", ",".join(opts)] + list(a.icount))
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
            err = pair_regions(o, mine, m.clock_hz, " ".join(what))
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

    def simulate(self, machine: machines.Machine, program, argv: list[str], mode: str, timeout: float):
        from trapline.platforms.model import simulated
        if mode == "guest":
            return simulated.guest_run(self, machine, argv, program, timeout, guest_plugin_args)
        raw, so, se, status = simulate(machine.arch, built_plugin(self.ctx), machine, argv, timeout)
        return simulated.user_run(type(self), machine, program, argv, raw, so, se, status, timeout)

def guest_plugin_args(m: machines.Machine, image: images.Image) -> list[str]:
    """The machine's plugin options for a whole guest: only the regions are
    modelled (fast_forward=2: the boot, and what runs between regions, such as
    a buffer's first touch or the next command's start, run at nearly plain QEMU
    speed; caches and TLBs start cold at the first region and keep, between
    regions, the state the last one left; each experiment's repetitions make the
    first one a warm-up); until the first region only the blocks that hold a
    marker are instrumented (ff_reset=1, model/plugin/ffreset.c: the boot, or a
    restored guest's first command's start, at plain QEMU speed, with the same
    counts; TRAPLINE_FF_RESET=0 turns that off). On sparc64 the plugin is
    told where Linux's trap table is (trap_table=, its entries are then counted
    by kind) and its own register-window model is off (nwindows=0): the guest
    kernel's spill and fill handlers run under the model instead, so counting
    the plugin's windows too would charge every spill twice."""
    ff_reset = "0" if os.environ.get("TRAPLINE_FF_RESET") == "0" else "1"  # 0: for comparisons (bench-rerun.sh)
    args = [*m.plugin_args, "fast_forward=2", f"ff_reset={ff_reset}"]
    if image.arch != "sparc64":
        return args
    args = [a for a in args if a.split("=", 1)[0] not in ("nwindows", "window_trap")]
    return args + ["nwindows=0", "window_trap=0", f"trap_table={images.symbol(image, 'sparc64_ttable_tl0')}",
                   # each switch of address space empties the model's TLBs (model/plugin/context.c)
                   f"ctx_switch={images.symbol(image, '__tsb_context_switch')}"]


def pair_regions(out: kernelio.KernelOutput, regions: list[dict], clock: float, what: str) -> str | None:
    """Give sample i the model's time of region i (cycles / clock) and its
    event counts as model_* counters with the sample's parameters
    (kernelio.pair_regions); an error message if they do not pair up one to one."""
    return kernelio.pair_regions(out, regions, what, "the model reported {regions} regions for {samples} samples; "
                                 "they must pair up one to one", ns=lambda g: g["cycles"] / clock * 1e9,
                                 counts=region_counts, timer=MODELLED_TIMER)


# In system mode a trap runs the guest kernel's own handler under the model: no
# lump trap cost (the plugin charges traps.cost only in user mode) and, on
# sparc64, no window-trap cost (guest_plugin_args): a guest lane does not use them.
UNUSED_IN_GUEST = frozenset({"traps.cost", "windows.spill_fill_cost"})


def calibrated_on(exp, m: machines.Machine, guest: bool) -> list[str]:
    """The machine parameters fitted to this experiment's own claim that its model lane uses."""
    return base_calibrated_on(exp, m, UNUSED_IN_GUEST if guest else frozenset())


def machine_facts(exp, m: machines.Machine, regions: int, guest: bool = False) -> dict:
    f = machine_provenance(exp, m, UNUSED_IN_GUEST if guest else frozenset())
    keys = ("machine", "machine_sets", "machine_file_sha256", "clock_hz")
    return {**{k: f[k] for k in keys}, "regions": regions, "deterministic": True,
            **{k: v for k, v in f.items() if k not in keys}}
