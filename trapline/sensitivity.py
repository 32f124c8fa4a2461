"""How much a modelled figure rests on one machine parameter.

    ./run.sh sensitivity ID [--machine M] [--param PATH ...] [--factors 0.5,2] [--quick]

Runs the experiment on its timing-model lane (its first lane on a platform that takes
a machine) once as described, then once per
(parameter, factor) with that parameter scaled (`--set PATH=<value x factor>`,
in the field's own unit), and prints one markdown table: the headline of each
run and its change against the baseline. Without --param the parameters are
the machine's *assumed* ones (no source was found for them, docs/machines.md):
so a reader sees at once whether an unsourced number matters to a claim.

Every scaled machine is loaded (and so checked) before anything runs; a bad
experiment, parameter or factor exits 2 naming the valid choices. The runs are
the points of one sweep (trapline/sweep, on Dask: the baseline and the scaled
machines run in parallel) in a temporary results directory: nothing is added to
results/.
"""

from __future__ import annotations

import math

import re
import tempfile
from pathlib import Path

from trapline import analysis, experiment, machine as machines, platforms
from trapline.errors import UsageError

_NUM = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*(?:/s)?)\s*$")


def scaled(value, factor: float, where: str) -> str:
    """'150ns' x 2 -> '300ns'; 1.0 x 0.5 -> '0.5' (the field's own unit kept)."""
    m = _NUM.match(str(value))
    if not m or isinstance(value, bool):
        raise UsageError(f"--param {where}: '{value}' is not a number that can be scaled")
    return f"{float(m.group(1)) * factor:.6g}{m.group(2)}"


def parse_factors(text: str) -> list[float]:
    try:
        fs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fs = []
    if not fs or any(not (f > 0 and math.isfinite(f)) for f in fs):
        raise UsageError(f"--factors takes positive finite numbers separated by commas, e.g. 0.5,2 (got '{text}')")
    return fs


def machine_lane(exp, takers: list[str]) -> str | None:
    """The experiment's first lane that runs on one of the platforms `takers` (those that
    take a machine, in column order: the timing model; or --platform's)."""
    return next((p for p in takers if p in exp.platforms and "not_applicable" not in exp.platform(p)), None)


def plan(exp_id: str, machine: str | None, params: list[str], factors: list[float], platform: str | None = None):
    """(experiment, its lane's platform, machine, [(param, factor, value)]) with every scaled machine checked."""
    takers = platforms.machine_platforms()
    if platform is not None and platform not in takers:
        platforms.check(platform)  # an unknown or unavailable platform: its own one line
        raise UsageError(f"--platform {platform}: sensitivity scales a machine's parameters; valid choices: "
                         f"{', '.join(takers)}")
    exp = experiment.get(exp_id)  # (another experiment's broken file does not stop this one)
    lane = machine_lane(exp, [platform] if platform else takers)
    if lane is None and platform is not None:
        raise UsageError(f"experiment '{exp_id}' has no lane on {platform} to scale; its lanes: "
                         f"{', '.join(p for p in exp.platforms if 'not_applicable' not in exp.platform(p))}")
    if platform is not None:
        platforms.check(platform)
    if lane is None:
        exps = experiment.load_all(broken={})
        with_lane = sorted(e for e, x in exps.items() if machine_lane(x, takers))
        raise UsageError(f"experiment '{exp_id}' has no {' or '.join(takers)} platform; "
                         f"experiments with one: {', '.join(with_lane)}")
    m = machines.load(machine or exp.platform(lane)["machine"])
    sources = m.sources()
    if not params:  # the assumed numbers the lane's simulator reads
        plat = platforms.find(lane)
        unused = plat.engines[plat.lane_class(exp.platform(lane)).mode].unused_fields(m)
        params = sorted(k for k, v in sources.items() if v.startswith("assumed") and k not in unused)
        if not params:
            raise UsageError(f"machine '{m.name}' has no assumed parameters; name some with --param PATH "
                             f"(its numbers: {', '.join(sorted(sources))})")
    cases = []
    for p in params:
        if p not in sources:
            raise UsageError(f"--param {p}: machine '{m.name}' has no such number; valid: {', '.join(sorted(sources))}")
        for f in factors:
            v = scaled(m.raw(p), f, p)
            machines.load(machine or m.name, [(p, v)])  # a scaled value the checks refuse fails here
            cases.append((p, f, v))
    return exp, lane, m, cases


def _headline(e: dict) -> dict:
    return {"reproduced": e.get("reproduced"), "status": e["status"], "metric": e["metric"],
            "claimed": e.get("claimed")}


def sweep(exp_id: str, machine: str | None = None, params: list[str] | None = None,
          factors: list[float] = (0.5, 2.0), quick: bool = False, log=None, scheduler: str | None = None,
          workers: int | None = None, platform: str | None = None) -> dict:
    """The baseline and every (parameter, factor) as the points of one sweep (trapline/sweep:
    Dask, an embedded LocalCluster unless scheduler is given), in a temporary results directory."""
    from trapline import sweep as sweeps
    exp, lane, m, cases = plan(exp_id, machine, list(params or []), list(factors), platform)
    points = [{}] + [{p: v} for p, f, v in cases]
    with tempfile.TemporaryDirectory(prefix="trapline-sensitivity-") as tmp:
        res = sweeps.run(exp_id, points, lane, quick, machine, scheduler, workers, fresh=True, root=Path(tmp),
                         log=log)
    base = _headline(res.entries[0])
    rows = []
    for (p, f, v), e in zip(cases, res.entries[1:]):
        h = _headline(e)
        change = (h["reproduced"] / base["reproduced"] - 1) if h["reproduced"] and base["reproduced"] else None
        rows.append({"param": p, "factor": f, "value": v, "baseline_value": str(m.raw(p)),
                     "source": m.sources()[p], **h, "change": change})
    return {"experiment": exp_id, "machine": m.name, "quick": quick, "baseline": base, "rows": rows,
            "platform_label": res.entries[0]["platform_label"]}


def table(result: dict) -> str:
    b = result["baseline"]
    out = [f"{result['experiment']} on {result['machine']} ({result.get('platform_label', '?')}"
           f"{', quick' if result['quick'] else ''}): "
           f"{b['metric']}, claimed {analysis.fmt(b['claimed'])}, baseline {analysis.fmt(b['reproduced'])} "
           f"({b['status']})", "",
           "| parameter | as described | scaled | headline | change | status |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        ch = "-" if r["change"] is None else f"{r['change'] * 100:+.1f}%"
        out.append(f"| `{r['param']}` | {r['baseline_value']} | x{r['factor']:g} = {r['value']} | "
                   f"{analysis.fmt(r['reproduced'])} | {ch} | {r['status']} |")
    return "\n".join(out) + "\n"
