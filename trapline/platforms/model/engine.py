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

from trapline import arch as arch_table, guest, images, machine as machines, simstats
from trapline.kernelio import MODELLED_TIMER
from trapline.platforms.base import machine_provenance
from trapline.platforms.engine import Engine, Ran
from trapline.machine.options import OPTIONS
from trapline.platforms.model import counters
from trapline.proc import run_command

TIMEOUT_S = 900
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
OOO_ONLY = ("rob", "lq", "sb", "l1d_mshrs", "l2_mshrs", "l3_mshrs", "mem_channels", "mem_width", "mem_rate")


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
    f = machine_provenance(exp, m, unused_fields(m, guest))
    keys = ("machine", "machine_sets", "machine_file_sha256", "clock_hz")
    return {**{k: f[k] for k in keys}, "regions": regions, "deterministic": True,
            **{k: v for k, v in f.items() if k not in keys}}


class ModelEngine(Engine):
    """The model in user mode (QEMU user mode: no kernel). lockstep: threads on several
    vCPUs, ordered by their clocks (docs/model.md)."""
    prefix = "model"
    under = "the model"
    mismatch = "the model reported {regions} regions for {samples} samples; they must pair up one to one"
    timer = MODELLED_TIMER

    def __init__(self, machine: machines.Machine, plugin: Path, lockstep: bool = False, log=None):
        super().__init__(machine)
        self.plugin, self.lockstep, self.log = plugin, lockstep, log

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

    def lane_facts(self, exp, runs: list[Ran]) -> dict:
        facts = machine_facts(exp, self.machine, sum(len(self.lane_regions(r)) for r in runs))
        if self.lockstep:  # the clocks order the threads, but a few host races remain (docs/model.md)
            lost = {k: sum(r.raw.get("lockstep", {}).get(k, 0) for r in runs) for k in LOCKSTEP_LOSSES}
            facts.update(lockstep=True, deterministic=False, lockstep_losses=lost)
            if any(lost.values()) and self.log:
                self.log(f"{exp.id}: the lockstep timeline lost order in this run: "
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
    """The model on a whole guest: the program under Linux in the arch's guest, restored
    from the program snapshot kind (trapline/guest.py program_image), the program written
    into it. Only the regions are modelled: the run's total is theirs."""

    def __init__(self, machine: machines.Machine, plugin: Path, ctx):
        super().__init__(machine, plugin, log=ctx.log)
        self.ctx = ctx

    def boot(self, argv: list[str], program, timeout: float) -> tuple[dict, "guest.Boot"]:
        """(the plugin's stats, the boot) of the program run once in the guest."""
        ctx, a = self.ctx, arch_table.get(self.machine.arch)
        image = ctx.image(self.machine.arch)
        img = guest.program_image(image, ctx.log)
        cmd = guest.program_command(guest.PROGRAM_PATH, argv[1:])
        with tempfile.TemporaryDirectory(prefix="trapline-simulate-") as tmp:
            out = Path(tmp) / "stats.json"
            b = guest.boot(img, [cmd], timeout + GUEST_BOOT_S, per_command_timeout=timeout, log=ctx.log,
                           qemu_extra=["-plugin", guest_plugin_options(self.machine, image, self.plugin, out)]
                           + list(a.icount), snapshot=True, program=Path(program.path))
            raw = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
        return raw, b

    def total(self, ran: Ran) -> dict:
        regions = ran.regions
        return self.figures(simstats.add_up(regions, NOT_COUNTS)) if regions else {}

    def simulate(self, platform, program, argv: list[str], mode: str, timeout: float) -> simstats.Run:
        raw, b = self.boot(argv, program, timeout)
        ran = Ran("", "", None, marked(raw), raw=raw)
        return guest.program_result(self.stats(platform, program, argv, mode, ran), b, timeout)
