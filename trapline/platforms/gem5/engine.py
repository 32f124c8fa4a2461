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

import importlib.util
import sys
from functools import cached_property, lru_cache
from pathlib import Path

from trapline import machine as machines, simstats
from trapline.errors import RunFailed, UsageError
from trapline.paths import ROOT
from trapline.platforms.base import machine_provenance
from trapline.platforms.engine import Engine, Ran
from trapline.platforms.gem5 import binary, run as gem5_run, stats
from trapline.platforms.gem5.machine_json import export

# gem5_<name> counts -> the common format's figures
# (each figure's meaning: simstats.SCALARS; l1i_accesses from O3 alone, whose fetch reads a line at a time)
FIGURES = {"gem5_instructions": "instructions", "gem5_cycles": "cycles", "gem5_l1i_line_fetches": "l1i_accesses",
           **{f"gem5_{k}": k for k in ("l1i_misses", "l1d_accesses", "l1d_misses", "l1d_misses_in_flight",
                                        "l2_accesses", "l2_misses", "l3_accesses", "l3_misses", "dtlb_misses",
                                        "itlb_misses", "hw_prefetches_issued", "hw_prefetches_useful")},
           "gem5_misses_overlapped": "l1d_misses_overlapped"}
# O3's fetch buffer: trapline's board makes it the line when the line is shorter, else it stays
# 64 bytes (gem5_configs/trapline_gem5/board.py): a longer line is read in 64-byte blocks
O3_FETCH_BUFFER = 64


@lru_cache(maxsize=None)
def _params_module():
    """gem5_configs/trapline_gem5/params.py (plain Python: gem5's side of the machine mapping)."""
    path = ROOT / "gem5_configs" / "trapline_gem5" / "params.py"
    spec = importlib.util.spec_from_file_location("trapline_gem5_params", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


def unused_fields(m: machines.Machine, g: dict | None = None, exported: dict | None = None) -> frozenset[str]:
    """The machine fields gem5 (facts `g`, default the one found) does not read: params.py
    notes them instead of mapping them (the model-only costs such as traps.cost, or on a
    stock gem5 atomics.split_lock_cost), so a parameter fitted to a claim that gem5
    ignores does not make gem5's figure 'fitted'. exported: export(m), when made already."""
    p = _params_module().from_machine(exported or export(m), changes=_changes(g))
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
    """gem5 SE mode on a machine. cores_by_args: a lane's run gets a core per thread its
    arguments start (run.cores_for); otherwise one. flavour: the lane's kernel build."""
    prefix = "gem5"
    under = "gem5"
    mismatch = ("gem5 dumped {regions} regions for {samples} samples; they must pair up one to one "
                "(is the kernel built in the gem5 flavour?)")
    timer = {"source": "gem5", "res_ns": 0, "min_delta_ns": 0}
    # O3 reads lines down a mispredicted path and again after a squash: its fetches depend on its timing
    rests_on_here = {"l1i_accesses": simstats.PREDICTION}

    def __init__(self, machine: machines.Machine, cpu: str = gem5_run.DEFAULT_CPU, gem5=None,
                 cores_by_args: bool = False, flavour: str | None = None):
        super().__init__(machine)
        self.cpu, self.cores_by_args, self.flavour, self._gem5 = cpu, cores_by_args, flavour, gem5
        # O3 reads a line per fetch only when the line fits its fetch buffer
        self.line_fetches = machine.bytes("caches.l1i.line") <= O3_FETCH_BUFFER

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

    def lane_facts(self, exp, runs: list[Ran]) -> dict:
        g, m = self.gem5_facts, self.machine
        per_run = [{"run": r.what, **r.facts} for r in runs]
        return {**machine_provenance(exp, m, unused_fields(m, g, self.exported)), "cpu": self.cpu,
                "deterministic": True, "gem5_version": g.get("version"), "gem5_sha256": g.get("sha256"),
                "gem5_build": g.get("build"), "gem5_changes": g.get("changes", []),
                "gem5_changes_sha256": g.get("changes_sha256"), "kernel_flavour": self.flavour, "runs": per_run,
                "config_sha256": sorted({r["config_sha256"] for r in per_run if r["config_sha256"]})}
