"""The timing model as an engine (trapline/platforms/engine.py): a program under
qemu-<arch> with trapline's plugin (model/plugin/), in user mode (no kernel: the
plugin's own trap and window models charge what a kernel would do), or in the
arch's guest (GuestEngine: the program under Linux in qemu-system with the plugin;
the kernel's trap paths run and are charged; only the regions the program marks
with TL_ROI_BEGIN/END are modelled, as in the guest lanes).

A region is one of the plugin's stats JSON: its time is cycles / clock, its counts
the model_* counters (counters.py), its figures the common statistics.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from trapline import arch as arch_table, guest, images, kernelio, machine as machines, simstats
from trapline.kernelio import MODELLED_TIMER
from trapline.platforms.base import Command, Lane
from trapline.platforms.engine import Engine, Ran
from trapline.machine.options import OPTIONS
from trapline.platforms.model import counters
from trapline.runpath import argv0, program, run_folder, stage
from trapline.platforms.model.plugin_build import plugin as built_plugin
from trapline.proc import run_command, tail

TIMEOUT_S = 900
GUEST_TIMEOUT_S = {True: 600, False: 2400}  # a guest lane's boot (with its commands): quick, full
# (the guest lane's -icount arguments per architecture: trapline/arch.py)
# a user-mode kernel's whole environment: fixed, since QEMU puts it on the kernel's
# stack and its size moves stack addresses, and so a few modelled cache misses
KERNEL_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
# the plugin's lockstep counts of order it could not keep (model/plugin/contention.c's
# "lockstep" stats: a turn waited 10 s, a full lock-line or futex-event table)
LOCKSTEP_LOSSES = ("timeouts", "lines_dropped", "events_dropped")
# the plugin's bookkeeping in a region, not counts to add up
NOT_COUNTS = ("vcpu", "index", "marked", "closed_by", "seq")
# the guest boots and restores under the model too (fast_forward: at plain QEMU speed)
GUEST_BOOT_S = 300
# In system mode a trap runs the guest kernel's own handler under the model: no
# lump trap cost (the plugin charges traps.cost only in user mode) and, on
# sparc64, no window-trap cost (guest_plugin_args): a guest lane does not use them.
UNUSED_IN_GUEST = frozenset({"traps.cost", "windows.spill_fill_cost"})
# the plugin's options that only an out-of-order core's timeline reads (model/plugin/timing.c): on an
# in-order machine the fields behind them (its store buffer, MSHRs, prefetchers, memory channels) are
# not read
OOO_ONLY = ("rob", "lq", "sb", "l1d_mshrs", "l2_mshrs", "l3_mshrs", "l2_fill_width", "l3_fill_width", "mem_channels",
            "mem_width", "mem_rate")


def unused_fields(m: machines.Machine, guest: bool = False) -> frozenset[str]:
    """The machine fields the model does not read for m (in a guest lane: guest)."""
    out = set(UNUSED_IN_GUEST) if guest else set()
    if m.raw("core.kind") != "out-of-order":
        out |= {o.field for o in OPTIONS if o.name in OOO_ONLY or "_pf_" in o.name}
    return frozenset(out)


def simulate(arch: str, plugin: Path, machine: machines.Machine, argv: list[str], timeout: float = TIMEOUT_S,
             cwd: Path | None = None, extra: list[str] | tuple[str, ...] = ()) -> tuple[dict, str, str, int | None]:
    """Run argv under qemu-<arch> with the model (extra: more plugin options, the lane's own, e.g.
    lockstep=on); returns (stats, stdout, stderr, status)."""
    with run_folder("trapline-model-") as tmp:
        out = Path(tmp) / "stats.json"
        opts = ",".join([str(plugin), f"arch={arch}", f"out={out}", *machine.plugin_args, *extra])
        a = arch_table.get(arch)
        cmd = [a.qemu_user, "-plugin", opts]
        if a.sysroot:
            cmd += ["-L", a.sysroot]
        # the program runs from a copy at a path of one length, as ./<name> (trapline/runpath.py)
        prog = program(argv, cwd)
        if prog.is_file():
            argv = [str(stage(prog, Path(tmp))), *argv[1:]]
            cmd += ["-0", argv0(prog)]
        status, so, se = run_command(cmd + argv, timeout, cwd=cwd, env=KERNEL_ENV)
        stats = _stats(out)
    return stats, so, se, status


def _stats(out: Path) -> dict:
    """The plugin's stats JSON (written at exit), or {} when it wrote none."""
    return json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}


def marked(raw: dict) -> list[dict]:
    """The regions a program marked, in the order they began (every vCPU's)."""
    out = [g for g in raw.get("regions", []) if g.get("marked") and g.get("index") != "overflow"]
    return sorted(out, key=lambda g: g.get("seq", 0))


def _level(g: dict, name: str) -> tuple[int | None, int | None]:
    """A level's accesses and misses as simstats.SCALARS defines them: the L1I's reads by fetch
    (line_fetches: a move to another line), the L1D's loads and stores, the L2's and L3's demand
    reads from above (write-backs into them are not accesses) and the lines each one filled."""
    lv = g.get(name)
    if not isinstance(lv, dict):
        return None, None
    if name == "l1i":
        return lv.get("line_fetches"), lv.get("misses")
    if name in ("l2", "l3"):
        rh, rm = lv.get("read_hits"), lv.get("read_misses")
        return (None if rh is None or rm is None else rh + rm), rm
    return lv.get("accesses"), lv.get("misses")


def instructions(g: dict) -> int | None:
    """Instructions as simstats.SCALARS defines them, as model_instructions counts them: an x86
    rep-prefixed string instruction once (QEMU executes it once per iteration)."""
    return None if g.get("instructions") is None else counters.count(g, "model_instructions")


def machine_facts(exp, m: machines.Machine, regions: int, guest: bool = False) -> dict:
    """A model lane's facts about its machine and what its figures rest on (Machine.rests_on)."""
    f = m.rests_on(exp.data["catalogue"], unused_fields(m, guest))
    keys = ("machine", "machine_sets", "machine_file_sha256", "clock_hz")
    return {**{k: f[k] for k in keys}, "regions": regions, "deterministic": True,
            **{k: v for k, v in f.items() if k not in keys}}


class ModelEngine(Engine):
    """The model in user mode (QEMU user mode: no kernel), with the plugin built for the
    platform's run context. lockstep: threads on several vCPUs, ordered by their clocks
    (docs/model.md): a lane's `lockstep`, else as given (a comparison's threads)."""
    prefix = "model"
    under = "the model"
    mismatch = "the model reported {regions} regions for {samples} samples; they must pair up one to one"
    timer = MODELLED_TIMER
    timeout_s = TIMEOUT_S

    @classmethod
    def unused_fields(cls, machine: machines.Machine) -> frozenset[str]:
        return unused_fields(machine)

    def __init__(self, platform, machine: machines.Machine, mode: str, lane: Lane | None = None, *,
                 lockstep: bool | None = None):
        super().__init__(platform, machine, mode, lane)
        self.plugin = built_plugin(self.ctx)
        self.lockstep = bool(lane.spec.get("lockstep")) if lockstep is None and lane is not None else bool(lockstep)

    def lane_line(self) -> str:
        m = self.machine
        return f"timing model, machine {m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}"

    def lane_runs(self, commands: list[Command]):
        self.ctx.use(self.platform.name, self.machine.arch)  # (describe: the QEMU user mode it ran)
        yield from super().lane_runs(commands)

    def run(self, argv: list[str], timeout: float, cwd: Path | None = None) -> Ran:
        raw, so, se, status = simulate(self.machine.arch, self.plugin, self.machine, argv, timeout, cwd=cwd,
                                       extra=["lockstep=on"] if self.lockstep else [])
        return Ran(so, se, status, marked(raw), total=raw.get("total") or None, raw=raw,
                   console=f"\n--- model stats ---\n{json.dumps(raw, indent=1)}")

    def region_ns(self, g: dict) -> float:
        return g["cycles"] / self.machine.clock_hz * 1e9

    def region_counts(self, g: dict, ops: int) -> dict[str, int]:
        return counters.region_counts(g, ops)

    def figures(self, g: dict) -> dict:
        traps = {k: v for k, v in (g.get("traps") or {}).items() if v}
        traps.update({f"trap_table.{k}": v for k, v in (g.get("trap_table_entries") or {}).items() if v})
        traps.update({f"exception.{k}": v for k, v in (g.get("exceptions") or {}).items() if v})
        reads = g.get("memory_reads_by_node")
        out = {"seconds": g["cycles"] / self.machine.clock_hz, "instructions": instructions(g),
               "cycles": g.get("cycles"), "traps": traps,
               "memory_reads_by_node": {str(i): n for i, n in enumerate(reads)} if reads else None,
               "itlb_misses": (g.get("itlb") or {}).get("misses"), "dtlb_misses": (g.get("dtlb") or {}).get("misses"),
               "l1d_misses_in_flight": (g.get("timing") or {}).get("l1d_in_flight"),
               "l1d_misses_overlapped": (g.get("timing") or {}).get("misses_overlapped"),
               "hw_prefetches_issued": (g.get("hardware_prefetches") or {}).get("issued"),
               "hw_prefetches_useful": (g.get("hardware_prefetches") or {}).get("useful")}
        for lv in ("l1i", "l1d", "l2", "l3"):
            out[f"{lv}_accesses"], out[f"{lv}_misses"] = _level(g, lv)
        return simstats.figures(**out)

    def total(self, ran: Ran) -> dict:
        """The plugin's own total of the run (what ran outside the regions too)."""
        return self.figures(ran.total) if ran.total else {}

    def lane_regions(self, ran: Ran) -> list[dict]:
        """The main thread's (vCPU 0's) marked regions: the kernel prints its samples there."""
        return [g for g in ran.raw.get("regions", []) if g.get("marked") and g.get("vcpu", 0) == 0]

    def lane_facts(self, runs: list[Ran]) -> dict:
        exp = self.lane.exp
        facts = machine_facts(exp, self.machine, sum(len(self.lane_regions(r)) for r in runs))
        if self.lockstep:  # the clocks order the threads, but a few host races remain (docs/model.md)
            lost = {k: sum(r.raw.get("lockstep", {}).get(k, 0) for r in runs) for k in LOCKSTEP_LOSSES}
            facts.update(lockstep=True, deterministic=False, lockstep_losses=lost)
            if any(lost.values()):
                self.ctx.log(f"{exp.id}: the lockstep timeline lost order in this run: "
                             f"{', '.join(f'{k} {v}' for k, v in lost.items() if v)} (docs/model.md)")
        return facts


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


def guest_plugin_options(m: machines.Machine, image: images.Image, plugin: Path, out: Path) -> str:
    """The -plugin argument of a guest under the model: the plugin, where it writes its
    stats, the machine's options for a whole guest, and the arch's NUMA layout when the
    machine has NUMA latencies (as many nodes as the guest's)."""
    layout = arch_table.get(m.arch).numa
    opts = [str(plugin), f"arch={m.arch}", f"out={out}"] + guest_plugin_args(m, image)
    if m.numa_cycles():
        opts += [f"numa_mem={':'.join(str(b) for b in layout.node_bytes)}",
                 f"numa_cpus={':'.join(str(c) for c in layout.cpu_nodes)}"]
    return ",".join(opts)


class GuestEngine(ModelEngine):
    """The model on a whole guest, booted once under qemu-system with the plugin from the
    snapshot taken at its init: a lane's commands, all in one boot of the lane's image
    (the qemu lane's), or a user's program written into the program snapshot kind
    (trapline/guest.py program_image). Only the regions are modelled: the run's total is
    theirs."""
    timeout_s = None  # (a lane's limit is its boot's: GUEST_TIMEOUT_S or the lane's boot_timeout_s)

    @classmethod
    def unused_fields(cls, machine: machines.Machine) -> frozenset[str]:
        return unused_fields(machine, guest=True)

    @classmethod
    def problem(cls, machine: machines.Machine) -> str | None:
        """The guest's memory is mapped to the machine's NUMA nodes by the arch's layout: the
        default guest memory, and as many nodes as the guest has."""
        if os.environ.get("TRAPLINE_MEM"):
            return ("the model's guest maps guest-physical memory to NUMA nodes with the default guest memory; "
                    "unset TRAPLINE_MEM")
        nodes, lat = len(arch_table.get(machine.arch).numa.node_bytes), machine.numa_cycles()
        if lat and len(lat) != nodes:
            return (f"machine '{machine.name}' has {len(lat)} NUMA nodes but the {machine.arch} guest has {nodes}; "
                    f"use a machine with {nodes} (or --set the numa group)")
        return None

    def boot(self, what: str, image: images.Image, commands: list[str], timeout: float,
             program_image: images.Image | None = None, **kw) -> tuple[dict, "guest.Boot", bool]:
        """(the plugin's stats, the boot, whether it was booted once more) of the guest image
        (or program_image, made from it) run from its snapshot with `commands`, the plugin
        loaded at restore (a guest silent before its init is booted once more)."""
        a = arch_table.get(self.machine.arch)
        with tempfile.TemporaryDirectory(prefix="trapline-model-guest-") as tmp:
            out = Path(tmp) / "stats.json"
            b, retried = guest.boot_once_more_if_silent(
                what, program_image or image, commands, timeout, self.ctx.log, snapshot=True,
                qemu_extra=["-plugin", guest_plugin_options(self.machine, image, self.plugin, out)] + list(a.icount),
                **kw)
            stats = _stats(out)
        return stats, b, retried

    # ------------------------------------------------ a lane

    def lane_runs(self, commands: list[Command]) -> list[Ran]:
        """Every command in one boot of the lane's guest image: a Ran per command, each with
        the regions of its samples (the regions of every vCPU in the order they began: the
        commands ran one after another, each bound to its CPU while it measured); one Ran
        with the error when the boot or a command failed."""
        ctx, m, lane = self.ctx, self.machine, self.lane
        image = ctx.image(m.arch)
        ctx.use("model-guest", m.arch)
        lines = [guest.command_line(c) for c in commands]
        timeout = ctx.timeout_for(lane.spec.get("boot_timeout_s", GUEST_TIMEOUT_S[ctx.quick]))
        ctx.log(f"{lane.exp.id}: booting the {m.arch} guest under the timing model ({m.name}) with "
                f"{len(lines)} command(s)")
        stats, b, retried = self.boot(lane.exp.id, image, lines, timeout)
        raw = f"$ {b.qemu_cmdline}\n{b.console}\n--- boot.sh ---\n{b.stderr}\n--- model stats ---\n" \
              f"{json.dumps(stats, indent=1)}"
        booted = {"regions": len(stats.get("regions", [])), "boot": b.facts, "boot_retried": retried}
        outs, err = guest.command_outputs(b, lines, [c.shown for c in commands], timeout, under=" under the model")
        if err is None and not stats:
            err = f"QEMU ended without the model's statistics (the plugin writes them at exit); " \
                  f"console tail:\n{tail(b.console)}\n{tail(b.stderr, 5)}"
        if err is not None:
            return [Ran("", "", None, [], error=err, console=raw, facts=booted)]
        regions = sorted((g for g in stats.get("regions", []) if g.get("marked")), key=lambda g: g["seq"])
        runs = []
        for text in outs:
            n = len(kernelio.parse(text).samples)
            runs.append(Ran(text, "", 0, regions[:n]))
            regions = regions[n:]
        runs[0].console, runs[0].facts = raw, booted
        runs[-1].facts = {**runs[-1].facts, "unpaired_regions": len(regions)}
        return runs

    def raw_text(self, shown: list[str], ran: Ran) -> str:
        return ran.console  # the boot's, once: its command line, console, boot.sh's messages, the stats

    def failure(self, what: str, ran: Ran) -> str | None:
        return ran.error  # (each names the guest command it is about)

    def lane_regions(self, ran: Ran) -> list[dict]:
        return ran.regions

    def lane_end(self, runs: list[Ran]) -> str | None:
        left = runs[-1].facts.get("unpaired_regions", 0)
        return f"the model reported {left} more regions than the guest printed samples" if left else None

    def binaries(self) -> dict[str, str]:
        arch = self.machine.arch
        return guest.guest_hashes(self.ctx.image(arch), self.ctx.kernels(arch), self.lane.exp.kernel)

    def lane_facts(self, runs: list[Ran]) -> dict:
        a, booted = arch_table.get(self.machine.arch), runs[0].facts
        facts = machine_facts(self.lane.exp, self.machine, booted["regions"], guest=True)
        layout = {"node_bytes": a.numa.node_bytes, "cpu_nodes": list(a.numa.cpu_nodes)}
        # a guest is not bit-for-bit deterministic even under -icount (docs/model.md:
        # the sun4u guest's regions differ by a few window traps in some runs)
        facts.update(guest=True, boot=booted["boot"], boot_retried=booted["boot_retried"],
                     icount=a.icount[1] if a.icount else None, deterministic=False,
                     numa_layout=layout if self.machine.numa_cycles() else None)
        return facts

    # ------------------------------------------------ a user's program

    def total(self, ran: Ran) -> dict:
        regions = ran.regions
        return self.figures(simstats.add_up(regions, NOT_COUNTS)) if regions else {}

    def simulate(self, program, argv: list[str], timeout: float) -> simstats.Run:
        ctx = self.ctx
        image = ctx.image(self.machine.arch)
        stats, b, _ = self.boot("simulate", image, [guest.program_command(guest.PROGRAM_PATH, argv[1:])],
                                timeout + GUEST_BOOT_S, program_image=guest.program_image(image, ctx.log),
                                per_command_timeout=timeout, program=Path(program.path))
        ran = Ran("", "", None, marked(stats), raw=stats)
        return guest.program_result(self.stats(program, argv, ran), b, timeout)
