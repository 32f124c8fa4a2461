"""A sweep's grid: `--set key=v1,v2,...` per key, the cartesian product of the values,
and the check of every value (and every machine the grid makes) before any point runs.

A value that itself holds commas (a `[list]` kernel argument) is written with `;`
between the values instead: `--set 'sizes=1,2;3,4'` is two values, "1,2" and "3,4".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from trapline import experiment, platforms, runner
from trapline.context import RunContext
from trapline.errors import UsageError
from trapline.platforms.base import Platform


def parse(pairs: list[str] | None) -> dict[str, list[str]]:
    """--set key=v1,v2 (repeatable) -> {key: [v1, v2]}, in the order given."""
    grid: dict[str, list[str]] = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"--set takes key=v1,v2,... (a sweep's values), not '{p}'")
        if k in grid:
            raise UsageError(f"--set {k} is given twice; give all its values in one: --set {k}=v1,v2,...")
        vals = [v] if v == "" else [x.strip() for x in v.split(";" if ";" in v else ",")]
        if any(x == "" for x in vals):
            raise UsageError(f"--set {k}: an empty value in '{v}'; separate values with ',' (or ';' when a "
                             f"value holds commas)")
        seen = set()
        for x in vals:
            if x in seen:
                raise UsageError(f"--set {k}: value '{x}' is given twice")
            seen.add(x)
        grid[k] = vals
    return grid


def product(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every point of the grid, the last key varying fastest; one point (no --set) for an empty grid."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def label(sets: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sets.items()) or "(as described)"


@dataclass
class Checked:
    """A sweep whose every point passed the checks: the experiment, its lane's platform (made
    for the checks' own run context), and per point the run context it validated in (with
    its machine loaded once)."""
    exp: object
    platform: Platform
    points: list[dict[str, str]]
    contexts: list[RunContext] = field(default_factory=list)


def default_platform(exp) -> str:
    """The experiment's first lane on a platform that takes a machine (in column order: the
    timing model) when it can run here, else its first lane that can."""
    listed = list(exp.platforms)
    runnable = [p for p in listed if platforms.why_unavailable(p) is None]
    takers = [p for p in platforms.machine_platforms() if p in runnable]
    if takers:
        return takers[0]
    if not runnable:
        raise UsageError(f"experiment '{exp.id}' has no platform available to sweep on; it lists: {', '.join(listed)}")
    return runnable[0]


def check(exp_id: str, platform: str | None, points: list[dict[str, str]], quick: bool, machine: str | None,
          timeout: float | None, quiet=lambda msg: None) -> Checked:
    """Every value of every key alone, then every distinct machine the points make, checked
    with the checks `run --set` uses (the machine package's set/check, the kernel
    arguments' declared types and ranges); the first bad one is a UsageError naming it."""
    path = experiment.kernels_dir() / exp_id / experiment.EXPERIMENT_FILE
    if "/" not in exp_id and path.is_file():
        exp = experiment.load_file(path)  # only this one parsed (the others take a second)
        exps = {exp.id: exp}
    else:
        exp = experiment.get(exp_id)  # unknown: the error lists the valid ids
        exps = {exp.id: exp}
    platform = platform or default_platform(exp)
    if machine and not platforms.check(platform).takes_machine:
        raise UsageError(f"--machine is for {platforms.machine_options()}")

    def ctx_for(sets: dict[str, str]) -> RunContext:
        return RunContext.make(quick, sets, machine, quiet, timeout)

    steps = runner.plan(exps, [exp_id], platform, ctx_for({}), strict=True)
    if steps[0].reason:
        raise UsageError(f"{exp_id} cannot run on {platform}: {steps[0].reason}")
    runner.validate(steps)
    keys: dict[str, list[str]] = {}
    for p in points:
        for k, v in p.items():
            if v not in keys.setdefault(k, []):
                keys[k].append(v)
    for k, vals in keys.items():
        for v in vals:
            try:
                runner.validate(steps, ctx_for({k: v}))
            except UsageError as e:
                raise UsageError(f"--set {k}={v}: {e}") from None
    # the machine of each distinct combination of machine fields (a cross-field check, such
    # as a line larger than its cache, only shows in the combination), loaded once
    by_machine: dict[tuple, RunContext] = {}
    contexts = []
    for p in points:
        ctx = ctx_for(p)
        if ctx.machine_sets not in by_machine:
            try:
                runner.validate(steps, ctx)
            except UsageError as e:
                raise UsageError(f"sweep point {label(p)}: {e}") from None
            by_machine[ctx.machine_sets] = ctx
        else:
            ctx.machines = by_machine[ctx.machine_sets].machines
        contexts.append(ctx)
    return Checked(exp, steps[0].platform, points, contexts)
