"""The same kernel on the same machine under gem5 and under the timing model,
side by side: per sample group, the time per operation and the counts per
operation both simulators produce (gem5_* beside model_*, by suffix).

    python -m trapline.platforms.gem5.compare --machine x86-2012-server --cpu o3 --cpu timing \\
        "loop-order/loop-order variant=row rows=512 cols=512 reps=2 warmup=1" \\
        "loop-order/loop-order variant=column rows=512 cols=512 reps=2 warmup=1"

Each RUN is a kernel binary (EXPERIMENT/BINARY, as in the experiment files)
and its arguments (an experiment's gem5 lane lists its own under `runs:`);
`--set` changes the machine on both simulators. The model runs the default build (its region markers are
NOPs it recognises), gem5 the gem5 flavour (the same markers as m5 ops); the
code between the markers is the same source. Figures: docs/gem5.md. --json
prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time

from trapline import arch as arch_table, build, kernelio, machine as machines
from trapline.errors import RunFailed
from trapline.platforms.gem5 import binary, run
from trapline.platforms.gem5.machine_json import cli_status

# the counts shown per operation, by suffix (gem5_<s> beside model_<s>)
SUFFIXES = ("instructions", "l1d_misses", "l1d_misses_in_flight", "l1d_line_fetches", "l1d_upgrades", "l2_misses", "l3_misses", "dtlb_misses", "itlb_misses",
            "l1i_misses", "locked_lines")


def _groups(out: kernelio.KernelOutput, prefix: str) -> dict[tuple, dict]:
    """{group key: {"ns_per_op": median, "<suffix>": median count per op}} of paired output."""
    by: dict[tuple, dict] = {}
    for s in out.samples:
        g = by.setdefault(kernelio.group_key(s), {"ns": [], "label": _label(s)})
        g["ns"].append(s["ns"] / s["ops"])
    for c in out.counts:
        if not c.get("name", "").startswith(prefix + "_"):
            continue
        key = kernelio.group_key({k: v for k, v in c.items() if k not in ("name", "value")})
        if key in by:
            by[key].setdefault(c["name"][len(prefix) + 1:], []).append(c["value"] / c["ops"])
    return {k: {name: (statistics.median(v) if isinstance(v, list) else v) for name, v in g.items()}
            for k, g in by.items()}


def _label(s: dict) -> str:
    return " ".join([s.get("variant", "")] + [f"{k}={v}" for k, v in s.items() if k not in kernelio.SAMPLE_KEYS])


def compare(machine: str, runs: list[str], cpus: list[str], gem5=None, log=print, sets=()) -> list[dict]:
    """One row per sample group and simulator: {"group", "sim", "ns_per_op", "<suffix>": per op, "seconds"}.
    Each simulator is its engine (trapline/platforms/engine.py), as in an experiment's lanes; sets are
    the machine's (path, value) overrides, as `--set` gives them (machine.pair); gem5 is the --gem5
    value, found as binary.find finds it."""
    from trapline.context import RunContext
    from trapline.platforms.gem5 import Gem5Platform
    from trapline.platforms.gem5.engine import Gem5Engine
    from trapline.platforms.model import ModelPlatform
    from trapline.platforms.model.engine import ModelEngine
    m = machines.load(machine, sets=list(sets))  # a bad machine or --set: its line before gem5 is looked for
    gem5 = binary.find(gem5)
    arch = m.arch
    arch_table.get(arch)
    default, flavoured = build.build(arch), build.build(arch, flavour="gem5")
    ctx = RunContext.make(log=log)
    model, gem5_platform = ModelPlatform(ctx), Gem5Platform(ctx)
    rows = []
    for spec in runs:
        argv = shlex.split(spec)
        rel = argv[0]
        cores = run.cores_for(dict(a.split("=", 1) for a in argv[1:] if "=" in a))
        # threads under the model: the lockstep lane (docs/model.md), as stl-alloc-scaling's model lane
        engines = [("model", ModelEngine(model, m, "user", lockstep=cores > 1), default)]
        engines += [(f"gem5-{cpu}", Gem5Engine(gem5_platform, m, "se", cpu=cpu, gem5=gem5, cores_by_args=True),
                     flavoured) for cpu in cpus]
        for sim, engine, bindir in engines:
            t0 = time.monotonic()
            ran = engine.run([str(bindir / rel)] + argv[1:], run.TIMEOUT_S, cwd=(bindir / rel).parent)
            err = engine.failure(f"{spec} ({sim})", ran)
            out = kernelio.parse(ran.stdout)
            err = err or engine.pair(out, engine.lane_regions(ran), spec)
            if err:
                raise RunFailed(err)
            secs = time.monotonic() - t0
            for key, g in _groups(out, engine.prefix).items():
                rows.append({"group": g.pop("label"), "sim": sim, "ns_per_op": g.pop("ns"), "seconds": secs, **g})
            log(f"{sim:11} {spec}: {secs:.1f} s")
    return rows


def table(rows: list[dict]) -> str:
    head = ["group", "sim", "ns/op"] + [s + "/op" for s in SUFFIXES] + ["wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["group"], r["sim"], f"{r['ns_per_op']:.4g}"]
        cells += [f"{r[s]:.4g}" if s in r else "-" for s in SUFFIXES]
        cells.append(f"{r['seconds']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trapline.platforms.gem5.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--machine", required=True)
    ap.add_argument("--cpu", action="append", help=f"gem5 CPU model(s): {', '.join(run.CPUS)} (default o3)")
    ap.add_argument("--gem5", help="the gem5 binary (default: GEM5, then gem5.opt on PATH)")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                    help="override a machine field on both simulators, e.g. caches.l1d.prefetch.next-line.degree=0")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("runs", nargs="+", metavar="RUN", help='"EXPERIMENT/BINARY key=value ..."')
    a = ap.parse_args(argv)

    def go():
        cpus = a.cpu or [run.DEFAULT_CPU]
        for c in cpus:
            run.check_cpu(c)
        rows = compare(a.machine, a.runs, cpus, a.gem5, log=lambda s: print(s, file=sys.stderr),
                       sets=[machines.pair(s) for s in a.set])
        print(json.dumps(rows, indent=1) if a.json else table(rows))
    return cli_status(go)

if __name__ == "__main__":
    sys.exit(main())
