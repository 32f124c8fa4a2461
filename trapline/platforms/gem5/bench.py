"""How slow gem5 is: simulated instructions per second of gem5's TimingSimpleCPU
and O3CPU beside the timing model's, on the same kernel and machine, in one
interleaved run (model/bench-gem5.sh runs it; figures: docs/performance.md).

    ./run.sh python -m trapline.platforms.gem5.bench [--runs 3] [--machine M] [-- EXP/BINARY ARGS...]

Each configuration runs the whole program (start-up included):

    model         qemu-<arch> with trapline's plugin, the default build (trapline.platforms.model.engine.simulate)
    gem5-timing   gem5 gem5_configs/run_se.py --cpu timing, the gem5 build flavour (trapline.platforms.gem5.run.simulate)
    gem5-o3       the same with --cpu o3

Instructions are each simulator's count for the whole program (the model's
total.instructions, gem5's simInsts); the time is the host's wall clock of
the simulate() call and the CPU time (user + sys) of its child process. Each
configuration also runs the same program measuring nothing (reps=0 warmup=0:
start-up, argument parsing, the timer check), so the kernel's work alone is
the difference (start-up is most of a small run under the model: QEMU's and
the plugin's, about 30 ms; gem5's is about 0.3 s). The configurations run
`runs` times, interleaved; the best (shortest) wall time counts, with that
run's CPU time. The machine's load is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from trapline import build, machine as machines
from trapline.errors import RunFailed, UsageError
from trapline.platforms.gem5 import binary, run
from trapline.platforms.gem5.machine_json import cli_status

DEFAULT_KERNEL = ["malloc-chunk-chase/chunk-chase", "allocator=chunk", "requestsize=9", "rounds=4", "objects=4000",
                  "reps=1", "warmup=0"]
CONFS = ("model", "gem5-timing", "gem5-o3")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def one(conf: str, m: machines.Machine, kernel: list[str], gem5, plugin) -> tuple[int, float, float]:
    """(instructions, wall s, CPU s) of one run of the whole program."""
    from trapline.platforms.model.engine import simulate as model_simulate
    in_gem5 = conf.startswith("gem5-")  # gem5-timing, gem5-o3; else the timing model
    flavour = "gem5" if in_gem5 else ""
    prog = build.build(m.arch, flavour=flavour) / kernel[0]
    argv = [str(prog)] + kernel[1:]
    cpu0, t0 = _children_cpu(), time.monotonic()
    if not in_gem5:
        st, so, se, status = model_simulate(m.arch, plugin, m, argv, cwd=prog.parent)
        wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
        if status != 0:
            raise RunFailed(f"model: {kernel[0]} exited with {status}:\n{se[-1500:]}")
        return int(st["total"]["instructions"]), wall, cpu
    r = run.simulate(m, argv, cpu=conf.split("-", 1)[1], gem5=gem5, cwd=prog.parent)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    if r.error or r.status != 0:
        raise RunFailed(f"{conf}: {r.error or f'exit status {r.status}'}")
    return int(r.tail_region["instructions_since_start"]), wall, cpu


def bench(machine: str, kernel: list[str], runs: int, gem5=None, out=print) -> dict[str, dict]:
    from trapline.platforms.model.plugin_build import plugin_path
    m = machines.load(machine)
    gem5 = gem5 or binary.find()
    facts = binary.facts(gem5)
    run.check_isa(m, facts)
    plugin = plugin_path()
    for flavour in ("", "gem5"):
        build.build(m.arch, flavour=flavour)
    out(f"machine: {os.cpu_count()} CPUs, {_cpu_name()}; gem5 {facts['version']} ({facts['sha256'][:16]})")
    out(f"load before: {_load()}; best of {runs} interleaved runs (wall), with that run's CPU time")
    # the same program measuring nothing (reps=0 warmup=0): start-up, argument parsing, the
    # timer check; the kernel's work is the difference
    empty = [kernel[0]] + [a for a in kernel[1:] if a.split("=", 1)[0] not in ("reps", "warmup")] + \
        ["reps=0", "warmup=0"]
    best: dict[str, dict] = {}
    for _ in range(runs):
        for conf in CONFS:
            for what, k in (("", kernel), ("-empty", empty)):
                insts, wall, cpu = one(conf, m, k, gem5, plugin)
                if conf + what not in best or wall < best[conf + what]["wall"]:
                    best[conf + what] = {"instructions": insts, "wall": wall, "cpu": cpu}
    out(f"\n{machine}: {' '.join(kernel)}; load now {_load()}")
    out("whole program, and the kernel's work alone (the whole less the same program run with reps=0 warmup=0)")
    out(f"{'configuration':<14} {'instructions':>13} {'wall s':>8} {'CPU s':>8} {'M inst/s (CPU)':>15} "
        f"{'work: M inst':>13} {'CPU s':>8} {'M inst/s (CPU)':>15} {'vs model':>10}")
    rate = {}
    for conf in CONFS:
        b, e = best[conf], best[conf + "-empty"]
        d_i, d_c = b["instructions"] - e["instructions"], max(b["cpu"] - e["cpu"], 1e-3)
        rate[conf] = d_i / d_c
    for conf in CONFS:
        b, e = best[conf], best[conf + "-empty"]
        d_i, d_c = b["instructions"] - e["instructions"], max(b["cpu"] - e["cpu"], 1e-3)
        out(f"{conf:<14} {b['instructions']:>13,} {b['wall']:>8.2f} {b['cpu']:>8.2f} "
            f"{b['instructions'] / b['cpu'] / 1e6:>15.2f} {d_i / 1e6:>13.2f} {d_c:>8.2f} {rate[conf] / 1e6:>15.2f} "
            f"{rate[conf] / rate['model']:>9.4f}x")
    return best


def _cpu_name() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trapline.platforms.gem5.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--machine", default="x86-2012-server")
    ap.add_argument("--gem5", help="the gem5 binary (default: GEM5, then gem5.opt on PATH)")
    ap.add_argument("kernel", nargs="*", help="-- EXPERIMENT/BINARY key=value ... (default: " + " ".join(DEFAULT_KERNEL) + ")")
    a = ap.parse_args(argv)

    def go():
        if a.runs < 1:
            raise UsageError(f"--runs {a.runs}: needs at least 1")
        bench(a.machine, a.kernel or DEFAULT_KERNEL, a.runs, binary.find(a.gem5))
    return cli_status(go)

if __name__ == "__main__":
    sys.exit(main())
