"""A user's program in gem5's SE mode as `./run.sh simulate`'s common stats
(trapline/simstats.py): trapline.platforms.gem5.run.simulate's Gem5Result converted. The gem5
platform's simulate() calls `simulate` here (the platform module supplies itself
as `platform`, for its name and label).

gem5 sees regions only in a program built with -DTL_GEM5 (trapline.h's markers are
m5 ops there: a stats reset and dump each); an ordinary build is one region, the
whole run (gem5's exit dump). With regions, the total is their sum.
"""

from __future__ import annotations

from trapline import simstats
from trapline.platforms.gem5 import run as gem5_run
from trapline.proc import tail

# gem5_<name> counts -> the common format's figures
# (each figure's meaning: simstats.SCALARS; l1i_accesses from O3 alone, whose fetch reads a line at a time)
FIGURES = {"gem5_instructions": "instructions", "gem5_cycles": "cycles", "gem5_l1i_line_fetches": "l1i_accesses",
           **{f"gem5_{k}": k for k in ("l1i_misses", "l1d_accesses", "l1d_misses", "l1d_misses_in_flight",
                                        "l2_accesses", "l2_misses", "l3_accesses", "l3_misses", "dtlb_misses",
                                        "itlb_misses")}}
RESTS_ON = {"seconds": simstats.PREDICTION, "cycles": simstats.PREDICTION, "instructions": simstats.COUNTED,
            "l1i_accesses": simstats.PREDICTION, "l1d_accesses": simstats.COUNTED,
            **{k: simstats.PREDICTION for k in ("l1i_misses", "l1d_misses", "l1d_misses_in_flight", "l2_accesses",
                                                  "l2_misses", "l3_accesses", "l3_misses", "dtlb_misses",
                                                  "itlb_misses")}}


# O3's fetch buffer: trapline's board makes it the line when the line is shorter, else it stays
# 64 bytes (gem5_configs/trapline_gem5/board.py): a longer line is read in 64-byte blocks
O3_FETCH_BUFFER = 64


def block(g: dict, line_fetches: bool = True) -> dict:
    """One gem5 region (trapline.platforms.gem5.stats.region) as a figures block; line_fetches:
    whether O3's L1I reads are one per line (its fetch buffer is the line)."""
    c = g["counts"]
    return simstats.figures(seconds=g["seconds"], **{f: c[k] for k, f in FIGURES.items()
                                                     if k in c and (line_fetches or f != "l1i_accesses")})


def common(platform, machine, program, argv: list[str], r: gem5_run.Gem5Result) -> dict:
    whole = machine.bytes("caches.l1i.line") <= O3_FETCH_BUFFER
    regions = [block(g, whole) for g in r.regions]
    total = simstats.add_up(regions) if regions else (block(r.tail_region, whole) if r.tail_region else {})
    raw = {"gem5": {k: r.gem5.get(k) for k in ("sha256", "version", "isas")}, "cpu": r.cpu, "cores": r.cores,
           "ticks": r.ticks, "config_sha256": r.config_sha256, "host_seconds": round(r.seconds, 3),
           "regions": r.regions, "exit_region": r.tail_region}
    return simstats.stats(platform, machine, program, argv, "se", r.status, "simulated", total, regions,
                          RESTS_ON, raw)


def simulate(platform, machine, program, argv: list[str], timeout: float, cpu: str = gem5_run.DEFAULT_CPU,
             gem5=None) -> simstats.Run:
    """The program in gem5 SE mode on machine (one core of CPU model cpu)."""
    r = gem5_run.simulate(machine, argv, cpu=cpu, timeout=timeout, gem5=gem5)
    err = None if r.error is None else f"{r.error}\nthe program's last output:\n{tail(r.stdout + r.stderr, 10)}"
    return simstats.Run(common(platform, machine, program, argv, r), r.stdout, r.stderr, err)
