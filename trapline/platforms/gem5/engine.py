"""gem5 as an engine (trapline/platforms/engine.py): a program in gem5's SE mode on a
machine (trapline.platforms.gem5.run.simulate), one core of the CPU model `cpu`, or in
an experiment's lane one per thread its run starts (run.cores_for).

gem5 sees regions only in a program built with -DTL_GEM5 (trapline.h's markers are
m5 ops there: a stats reset and dump each); an ordinary build is one region, the
whole run (gem5's exit dump). With regions, the total is their sum. A region's time is
its ticks, its counts the gem5_* counters (stats.COUNTERS), its figures the common
statistics.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from trapline import build, machine as machines, simstats
from trapline.errors import RunFailed, UsageError
from trapline.platforms.base import Lane
from trapline.platforms.engine import Engine, Ran
from trapline.platforms.gem5 import binary, run as gem5_run, stats
from trapline.platforms.gem5.machine_json import export, isa, params

FLAVOUR = "gem5"          # the kernels' build flavour with m5-op region markers (kernels/common)
FREESTANDING = "gem5-freestanding"  # ... whose listed sparc64 kernels link without glibc
GLIBC_CHANGE = "sparc-glibc"        # trapline's change that lets SPARC SE start a glibc program
TIMEOUT_S = 3600          # a full-size run on the O3 CPU is slow (about 0.3 M instructions/s)
CPU_FIELD = "gem5.cpu"    # the machine field (and --set key) that picks the CPU model

# gem5_<name> counts -> the common format's figures
# (each figure's meaning: simstats.SCALARS; l1i_accesses from O3 alone, whose fetch reads a line at a time)
FIGURES = {"gem5_instructions": "instructions", "gem5_cycles": "cycles", "gem5_l1i_line_fetches": "l1i_accesses",
           **{f"gem5_{k}": k for k in ("l1i_misses", "l1d_accesses", "l1d_misses", "l1d_misses_in_flight",
                                        "l2_accesses", "l2_misses", "l3_accesses", "l3_misses", "dtlb_misses",
                                        "itlb_misses", "hw_prefetches_issued", "hw_prefetches_useful")},
           "gem5_misses_overlapped": "l1d_misses_overlapped"}
def kernel_flavour(arch: str, g: dict) -> str:
    """The build flavour of the kernels a gem5 (facts g) runs: gem5, or on sparc64 without
    trapline's change sparc-glibc, gem5-freestanding (a stock gem5's SPARC SE mode stops a
    glibc program at its first system call: kernels/common/freestanding.mk)."""
    return FLAVOUR if arch != "sparc64" or GLIBC_CHANGE in g.get("changes", []) else FREESTANDING


def cpu_of(m: machines.Machine) -> str:
    """The CPU model the machine runs on in gem5 (its gem5.cpu, else O3)."""
    return str(m.raw(CPU_FIELD)) if m.has(CPU_FIELD) else gem5_run.DEFAULT_CPU


def unused_fields(m: machines.Machine, g: dict | None = None, exported: dict | None = None) -> frozenset[str]:
    """The machine fields gem5 (facts `g`, default the one found) does not read: params.py
    notes them instead of mapping them (the model-only costs such as traps.cost, or on a
    stock gem5 atomics.split_lock_cost), so a parameter fitted to a claim that gem5
    ignores does not make gem5's figure 'fitted'. exported: export(m), when made already."""
    p = params.from_machine(exported or export(m), changes=_changes(g))
    return frozenset(n.field for n in p.notes if n.field not in p.mapped)


def _changes(g: dict | None) -> list[str]:
    """trapline's changes in the gem5 of facts g (None: the gem5 found; none found: [])."""
    if g is None:
        try:
            g = binary.facts(binary.find())
        except (UsageError, RunFailed):
            return []
    return list(g.get("changes", []))


class Gem5Engine(Engine):
    """gem5 SE mode on a machine, on its CPU model (gem5.cpu, cpu_of; `cpu` for a comparison
    of several). For a lane, a run gets a core per thread its arguments start (run.cores_for)
    and the lane's kernels are built in the flavour this gem5 runs (kernel_flavour);
    otherwise one core (cores_by_args, as given)."""
    prefix = "gem5"
    under = "gem5"
    mismatch = ("gem5 dumped {regions} regions for {samples} samples; they must pair up one to one "
                "(is the kernel built in the gem5 flavour?)")
    timer = {"source": "gem5", "res_ns": 0, "min_delta_ns": 0}
    # O3 reads lines down a mispredicted path and again after a squash: its fetches depend on its timing
    rests_on_here = {"l1i_accesses": simstats.PREDICTION}
    timeout_s = TIMEOUT_S

    @classmethod
    def unused_fields(cls, machine: machines.Machine) -> frozenset[str]:
        return unused_fields(machine)

    def __init__(self, platform, machine: machines.Machine, mode: str, lane: Lane | None = None, *,
                 cpu: str | None = None, gem5=None, cores_by_args: bool | None = None):
        super().__init__(platform, machine, mode, lane)
        self.cpu, self._gem5 = cpu or cpu_of(machine), gem5
        self.cores_by_args = lane is not None if cores_by_args is None else cores_by_args
        # O3 reads a line per fetch only when the line fits its fetch buffer (trapline's board makes
        # the buffer the line when the line is shorter; a longer line is read in buffer-sized blocks)
        self.line_fetches = machine.bytes("caches.l1i.line") <= params.O3_FETCH_BUFFER
        # a lane's kernels: the flavour this gem5 runs (its facts say)
        self.flavour = kernel_flavour(machine.arch, self.gem5_facts) if lane is not None else None

    @classmethod
    def problem(cls, machine: machines.Machine) -> str | None:
        """Its CPU model must be gem5's and run the machine's ISA, and the gem5 found must have the ISA."""
        try:
            gem5_run.check_cpu(cpu_of(machine), isa(machine))  # (minor cannot run SPARC: gem5_run.BROKEN_CPUS)
            gem5_run.check_isa(machine, binary.facts(binary.find()))
        except (UsageError, RunFailed) as e:
            return str(e)
        return None

    # found when first run (reading regions needs no gem5)
    @cached_property
    def gem5(self) -> Path:
        return Path(self._gem5) if self._gem5 else binary.find()

    @cached_property
    def gem5_facts(self) -> dict:
        return binary.facts(self.gem5)

    @cached_property
    def exported(self) -> dict:
        """The machine as gem5's JSON, made once for every run."""
        return export(self.machine)

    def cores(self, argv: list[str]) -> int:
        return gem5_run.cores_for(dict(a.split("=", 1) for a in argv[1:])) if self.cores_by_args else 1

    def note(self, argv: list[str]) -> str:
        return f" ({self.cores(argv)} core(s))"

    def run(self, argv: list[str], timeout: float, cwd: Path | None = None) -> Ran:
        r = gem5_run.simulate(self.machine, argv, cpu=self.cpu, cores=self.cores(argv), gem5=self.gem5, cwd=cwd,
                              timeout=timeout, exported=self.exported)
        raw = {"gem5": {k: r.gem5.get(k) for k in ("sha256", "version", "isas")}, "cpu": r.cpu, "cores": r.cores,
               "ticks": r.ticks, "config_sha256": r.config_sha256, "host_seconds": round(r.seconds, 3),
               "regions": r.regions, "exit_region": r.tail_region}
        facts = {"cpu": r.cpu, "cores": r.cores, "config_sha256": r.config_sha256, "ticks": r.ticks,
                 "regions": len(r.regions), "wall_seconds": round(r.seconds, 2),
                 "instructions": (r.tail_region or {}).get("instructions_since_start")}
        return Ran(r.stdout, r.stderr, r.status, r.regions, total=None if r.regions else r.tail_region,
                   error=r.error, raw=raw, facts=facts, cmd=r.cmd)

    def region_ns(self, g: dict) -> float:
        return g["ticks"] / 1000

    def region_counts(self, g: dict, ops: int) -> dict[str, int]:
        return stats.region_counts(g, ops)

    def figures(self, g: dict) -> dict:
        c = g["counts"]
        return simstats.figures(seconds=g["seconds"], **{f: c[k] for k, f in FIGURES.items()
                                                         if k in c and (self.line_fetches or f != "l1i_accesses")})

    def lane_line(self) -> str:
        m = self.machine
        return (f"{binary.described(self.gem5_facts)} ({self.cpu} CPU, {self.flavour} kernels), machine "
                f"{m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}")

    def kernels(self) -> Path:
        """The lane's kernels in this gem5's flavour, built once per run context."""
        ctx, arch, flavour = self.ctx, self.machine.arch, self.flavour
        return ctx.tool(f"kernels-{flavour}-{arch}", lambda: build.build(arch, log=ctx.log, flavour=flavour)) \
            / self.lane.exp.kernel

    def lane_facts(self, runs: list[Ran]) -> dict:
        exp, g, m = self.lane.exp, self.gem5_facts, self.machine
        per_run = [{"run": r.what, **r.facts} for r in runs]
        return {**m.rests_on(exp.data["catalogue"], unused_fields(m, g, self.exported)), "cpu": self.cpu,
                "deterministic": True, "gem5_version": g.get("version"), "gem5_sha256": g.get("sha256"),
                "gem5_build": g.get("build"), "gem5_changes": g.get("changes", []),
                "gem5_changes_sha256": g.get("changes_sha256"), "kernel_flavour": self.flavour, "runs": per_run,
                "config_sha256": sorted({r["config_sha256"] for r in per_run if r["config_sha256"]})}
