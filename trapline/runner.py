"""Run experiments on platforms and produce a finished run directory.

claim (kernels/<id>/experiment.yaml) -> the platform's lane (Lane.run: kernel output) -> analysis.judge
(entry) -> RunDir.save_entry (atomic, resumable) -> report (summary, manifest,
report.md/html, CSV, plots) -> RunDir.finish (one rename).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from trapline import __version__, analysis, arch as arch_table, build, eta, experiment, imagebuilders, paths, \
    platforms, report, results, runfiles
from trapline import entry as entries_mod
from trapline.context import RunContext
from trapline.errors import ExperimentError, RunFailed, UsageError
from trapline.platforms.base import Platform
from trapline.report import plots
from trapline.yamlfile import shown


@dataclass
class Run:
    """The finished run execute made: its directory, summary and entries."""
    path: Path
    summary: dict
    entries: list[dict]

    def entry(self, exp_id: str, platform: str) -> dict:
        return next(e for e in self.entries if e["id"] == exp_id and e["platform"] == platform)


class Step(NamedTuple):
    """One entry of a run's plan: the experiment, its lane's platform (its name, and the
    platform made for the command's run context: None only for a name no platform module
    has, which a file that does not validate may list) and why it cannot run (None: it can)."""
    exp: Any
    name: str
    platform: Platform | None
    reason: str | None


def plan(exps: dict, exp_ids: list[str], platform: str | None, ctx: RunContext, strict: bool = True) -> list[Step]:
    """A Step per entry, each platform looked up once and made for the run context ctx.
    strict (run ID): a platform the experiment lacks is an error; otherwise
    (reproduce-all --platform P) such an experiment gets a not-applicable entry.
    Without --platform, every lane the experiment lists; a lane whose platform cannot
    run here (Platform.why_unavailable) gets a not-applicable entry saying why."""
    made: dict[str, Platform | None] = {}

    def step(exp, name: str, reason: str | None = None, lane: bool = True) -> Step:
        if name not in made:
            cls = platforms.find(name)
            made[name] = cls(ctx) if cls else None
        if lane:
            reason = platforms.why_lane_unavailable(made[name], exp.platform(name))
        return Step(exp, name, made[name], reason)

    if platform:
        platforms.check(platform)  # raises for unknown and unavailable platforms
    out = []
    for eid in exp_ids:
        exp = exps[eid]
        listed = list(exp.platforms)
        if exp.error:  # a file that does not validate (reproduce-all): a failed entry per lane it names
            out += [step(exp, p, lane=False) for p in ([platform] if platform else listed)]
            continue
        if platform:
            if platform not in listed and not strict:
                out.append(step(exp, platform, f"this experiment has no {platform} lane; it runs on: "
                                               f"{', '.join(listed)}", lane=False))
                continue
            if platform not in listed:
                raise UsageError(f"experiment '{eid}' has no platform '{platform}'; valid choices: {', '.join(listed)}")
            out.append(step(exp, platform))
            continue
        out += [step(exp, p) for p in listed]
    return out


def validate(steps: list[Step], ctx: RunContext | None = None) -> None:
    """Every user error is found here, before any experiment runs (and before
    the run directory opens): bad --set keys, and every machine, loaded and
    checked once into the context (ctx: another context than the plan's, as a sweep's
    points have; each platform then made for it)."""
    takers = [c.label for c in platforms.all().values() if c.takes_machine]
    elsewhere = f"machine fields are set on the {' or the '.join(takers)}, {platforms.machine_options()}"
    for exp, name, plat, reason in steps:
        if reason is None and not exp.error and "not_applicable" not in exp.platform(name):
            (plat if ctx is None or ctx is plat.ctx else type(plat)(ctx)).lane(exp).check(elsewhere)


def run_entry(step: Step, ctx: RunContext) -> tuple[dict, str]:
    """One experiment on one platform (a Step of the plan, its platform made for ctx): its
    entry and the raw log. A step with a reason (why it cannot run) gives a not-applicable
    entry. Shared by execute and by the sweep's points (trapline/sweep)."""
    exp, pname, plat, reason = step
    if reason:
        judged = analysis.judge({"not_applicable": reason}, exp.headline, None, None)
        return entries_mod.build(exp, pname, judged, type(plat) if plat else None).to_dict(), ""
    if exp.error:
        judged = analysis.judge({}, exp.headline, None, f"the experiment file does not validate: {exp.error}")
        ctx.log(f"    failed: {exp.error}")
        return entries_mod.build(exp, pname, judged, type(plat) if plat else None).to_dict(), ""
    spec = exp.platform(pname)
    if "not_applicable" in spec:
        prun = None
        judged = analysis.judge(spec, exp.headline, None, None)
    else:
        prun = plat.lane(exp).run()
        judged = analysis.judge(spec, exp.headline, prun.output, prun.error, prun.facts.get("contrast"),
                                counts_prefix=entries_mod.counts_prefix(type(plat)))
    entry = entries_mod.build(exp, pname, judged, type(plat), prun).to_dict()
    ctx.log(f"    {entry['status']}: {entry['metric']} = {analysis.fmt(entry['reproduced'])}"
            f" (claimed {analysis.fmt(entry['claimed'])})")
    return entry, prun.raw if prun else ""


def load(exp_ids: list[str] | None, tolerate_broken: bool) -> tuple[dict, list[str]]:
    """The experiments to run (exp_ids; None: every one, in catalogue order) and their ids.
    An experiment whose file does not validate never stops the others: named, it is an
    error (one line, exit 2) unless tolerate_broken (reproduce-all), which gives it a
    stand-in that becomes failed entries with the reason."""
    broken: dict[str, str] = {}
    exps = experiment.load_all(broken=broken)
    every = exp_ids is None
    exp_ids = list(exps) + list(broken) if every else list(exp_ids)
    for eid in exp_ids:
        if eid in broken:
            if not tolerate_broken:
                raise ExperimentError(broken[eid])
            exps[eid] = experiment.stand_in(eid, broken[eid])
        experiment.get(eid, exps)
    if every:
        exp_ids.sort(key=lambda e: experiment.catalogue_key(exps[e].data["catalogue"], e))
    return exps, exp_ids


def execute(command: str, exp_ids: list[str] | None, platform: str | None, quick: bool, sets: dict[str, str],
            fresh: bool = False, log=None, machine: str | None = None, root: Path | None = None,
            timeout: float | None = None, images: str | None = None) -> Run:
    """Run the experiments (exp_ids; None: every one) and return the finished run. machine:
    --machine (a platform that takes a machine); root: the results directory (default: results.results_root());
    images: --images, who builds the guest lanes' images (default debian)."""
    ctx = RunContext.make(quick, sets, machine, log, timeout, images)
    log = ctx.log
    exps, exp_ids = load(exp_ids, tolerate_broken=command != "run")
    steps = plan(exps, exp_ids, platform, ctx, strict=(command == "run"))
    validate(steps)
    plots.preload()  # the report's matplotlib, while the entries run (docs/performance.md)
    args = {"command": command, "experiment": exp_ids[0] if command == "run" else None,
            "experiments": exp_ids, "platform": platform, "quick": quick, "sets": sets, "machine": machine, "timeout": timeout,
            "commit": results.git_info()["describe"]}
    if ctx.image_builder != imagebuilders.DEFAULT:  # (a resumed run must have been started with the same images)
        args["images"] = ctx.image_builder
    root = root or results.results_root()
    if not fresh:  # the interrupted runs' states, read to find the one to resume: each checked
        runfiles.check_states(root / ".incomplete")
    rd = results.RunDir.open(args, fresh=fresh, root=root, entries=len(steps))
    entries, platform_facts, saved, checked = [], {}, 0, False
    ahead = None
    try:
        # the entries a resumed run already has, checked before anything runs
        done = runfiles.resumable(rd.path, [(st.exp.id, st.name) for st in steps]) if rd.resumed else {}
        checked = True
        if rd.resumed:
            log(f"resuming run {rd.run_id}: {len(done)} of {len(steps)} entries already done")
        else:
            log(f"run {rd.run_id}: {len(steps)} entries ({'quick' if quick else 'full'} mode)")
        by_step: dict[int, dict] = {}
        todo = []
        for i, step in enumerate(steps):
            prev = done.get((step.exp.id, step.name))
            if prev:
                by_step[i] = prev
            else:
                todo.append((i, Schedule.of(step, quick)))
        costs = eta.Costs.load()
        builder = imagebuilders.get(ctx.image_builder)
        guests = list(dict.fromkeys(sc.guest for _, sc in todo if sc.guest))
        to_build = builder.to_build(guests)
        kernels_s = sum(costs.get(f"linux.{a}") or arch_table.get(a).linux.build_s for a in to_build)
        if to_build:  # the lanes that need no guest and measure no real time run while the kernels build
            todo.sort(key=lambda t: t[1].rank(guests))
        expect = eta.Estimate(costs, [eta.Step(sc.key, sc.reference or 0.0, sc.beside_build) for _, sc in todo],
                              kernels_s)
        if todo:
            log(f"expected: {expect.words()}")
        ahead = builder.ahead(ctx, guests, on_built=lambda a, s: s > 20 and costs.record(f"linux.{a}", s)) \
            if to_build else None
        took: dict[str, float] = {}
        t_run = time.monotonic()
        for i, sc in todo:
            step = steps[i]
            if ahead and ahead.busy() and (sc.guest or sc.real_time):
                ahead.wait(sc.guest, log)  # a guest lane: its Linux; a real-time lane: every build done
            left = expect.left(took, _kernels_left(ahead, costs))
            log(f"[{len(by_step) + 1}/{len(steps)}] {step.exp.id} on {step.name} "
                f"({eta.duration(time.monotonic() - t_run)} in, about {eta.duration(left)} left)")
            t0 = time.monotonic()
            entry, raw = run_entry(step, ctx)
            rd.save_entry(entry, raw)
            saved += 1
            by_step[i] = entry
            took[sc.key] = time.monotonic() - t0
            if sc.reference is not None and not (sets or machine or timeout):  # a lane that ran as its file says
                costs.record(sc.key, took[sc.key])
        entries = [by_step[i] for i in range(len(steps))]
        ran = {st.name: st.platform for st in steps if st.reason is None and st.platform}
        for pname in sorted(ran):
            platform_facts[pname] = ran[pname].describe()
        # what the report needs of each platform of the run, from the platform itself (report/sections.py)
        every = {st.name: st.platform for st in steps if st.platform}
        platform_report = {p: every[p].report_facts(platform_facts.get(p)) for p in sorted(every)}
        finished = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
        summary = {
            "run_id": rd.run_id, "command": command, "quick": quick, "sets": sets,
            "started": rd.state["started"], "finished": finished,
            "experiments": [{k: v for k, v in e.items() if k not in ("groups", "binaries") + entries_mod.REPORT_ONLY}
                            for e in entries],
            "counts": {s: sum(1 for e in entries if e["status"] == s) for s in analysis.STATUSES},
        }
        manifest = make_manifest(rd, args, exps, entries, platform_facts, finished, platform_report)
        final = rd.finish(summary, manifest, report.render)
    except BaseException as e:
        # A resumed run refused as found (a damaged entry) is left as it was. Interrupted, or
        # out of space (RunFailed): the run stays to be resumed. Refused or broken (UsageError,
        # a bug) before its first entry: nothing to resume, so it goes. Either way its lock
        # file goes with its owner.
        if not checked:
            rd.release(unchanged=True)
        elif not rd.resumed and not saved and not isinstance(e, (KeyboardInterrupt, RunFailed)):
            rd.discard()
        else:
            rd.release()
        if isinstance(e, KeyboardInterrupt):
            log(f"interrupted: rerun the same command to resume run {rd.run_id}")
        raise
    finally:
        if ahead:
            ahead.cancel()
    rd.release()
    c = summary["counts"]
    log(f"done: {final} ({', '.join(f'{n} {s}' for s, n in c.items() if n)})")
    return Run(final, summary, entries)


def _kernels_left(ahead, costs: eta.Costs) -> float:
    """What is left of the guest kernels' build ahead (seconds, from the estimate)."""
    if not ahead or not ahead.busy():
        return 0.0
    left = 0.0
    for a in ahead.pending():
        s = costs.get(f"linux.{a}") or arch_table.get(a).linux.build_s
        if ahead.current and ahead.current[0] == a:
            s = max(0.0, s - (time.monotonic() - ahead.current[1]))
        left += s
    return left


@dataclass
class Schedule:
    """What the run's schedule and estimate need to know of one entry to run."""
    key: str                # eta.entry_key: id.platform.mode
    reference: float | None  # its reference cost (None: an entry that only says why it cannot run)
    guest: str | None       # the arch of the guest it boots, if any
    real_time: bool         # its platform measures real time: nothing may run beside it
    beside_build: bool      # it may run while the guest kernels build (no guest, no real time)

    @classmethod
    def of(cls, step: Step, quick: bool) -> "Schedule":
        key = eta.entry_key(step.exp.id, step.name, quick)
        plat = step.platform
        spec = {} if (step.reason or step.exp.error or plat is None) else step.exp.platform(step.name)
        if not spec or "not_applicable" in spec:
            return cls(key, None, None, False, True)
        lane = plat.lane(step.exp)
        guest = lane.arch if lane.guest else None
        real = not plat.side_by_side
        return cls(key, plat.expected_seconds(spec, quick), guest, real, guest is None and not real)

    def rank(self, guests: list[str]) -> tuple[int, int]:
        """Its place when the kernels build ahead: what may run beside the build first, then
        the guest lanes in the order their kernels are built, then the real-time lanes."""
        if self.beside_build:
            return (0, 0)
        if self.guest:
            return (1, guests.index(self.guest))
        return (2, 0)


def make_manifest(rd, args, exps, entries, platform_facts, finished, platform_report=None) -> dict:
    used_exps = sorted({e["id"] for e in entries})
    claims = paths.shared("claims.md")
    return {
        "trapline": __version__, "run_id": rd.run_id, "args": args,
        "started": rd.state["started"], "finished": finished,
        "git": results.git_info(),
        "argv": sys.argv,
        "platforms": platform_facts,
        "platform_report": platform_report or {},
        "python": sys.version.split()[0], "python_packages": results.python_packages(),
        "compilers": {a: _safe(build.compiler_version, a) for a in build.ARCHES},
        "experiments": {eid: {"file": shown(exps[eid].path), "sha256": _safe(results.sha256_file, exps[eid].path),
                              **({"error": exps[eid].error} if exps[eid].error else {})} for eid in used_exps},
        "binaries_sha256": {f"{e['id']}.{e['platform']}": e.get("binaries", {}) for e in entries if e.get("binaries")},
        # the exact kernel invocations, with the iteration counts each platform used
        "commands": {f"{e['id']}.{e['platform']}": [" ".join(c) for c in e.get("commands", [])] for e in entries},
        "claims_md_sha256": results.sha256_file(claims) if claims.exists() else None,
        "environment": {k: os.environ[k] for k in ("TRAPLINE_CACHE", "TRAPLINE_RESULTS", "TRAPLINE_KERNELS") if k in os.environ},
    }


def _safe(fn, *a):
    try:
        return fn(*a)
    except Exception as e:  # a missing cross compiler must not lose a finished run
        return f"unavailable: {e}"
