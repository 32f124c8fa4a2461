"""Run experiments on platforms and produce a finished run directory.

claim (experiments/<id>.yaml) -> platform.run (kernel output) -> analysis.judge
(entry) -> RunDir.save_entry (atomic, resumable) -> report (summary, manifest,
report.md/html, CSV, plots) -> RunDir.finish (one rename).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path

from trapline import __version__, analysis, build, experiment, platforms, report, results
from trapline.errors import UsageError


class Progress:
    """One line per step on stderr, with the elapsed time."""

    def __init__(self, stream=sys.stderr):
        self.t0 = time.monotonic()
        self.stream = stream

    def __call__(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", file=self.stream, flush=True)


def plan(exps: dict, exp_ids: list[str], platform: str | None, strict: bool = True) -> list[tuple]:
    """(experiment, platform name or None, reason if not runnable) per entry.
    strict (run ID): a platform the experiment lacks is an error; otherwise
    (reproduce-all --platform P) such an experiment gets a not-applicable entry."""
    out = []
    for eid in exp_ids:
        exp = exps[eid]
        listed = list(exp.platforms)
        if platform:
            platforms.get(platform)  # raises for unknown/planned platforms
            if platform not in listed and not strict:
                out.append((exp, platform, f"this experiment has no {platform} lane; it runs on: {', '.join(listed)}"))
                continue
            if platform not in listed:
                raise UsageError(f"experiment '{eid}' has no platform '{platform}'; valid choices: {', '.join(listed)}")
            out.append((exp, platform, None))
            continue
        runnable = [p for p in listed if p in platforms.PLATFORMS]
        if runnable:
            out += [(exp, p, None) for p in runnable]
        else:
            reasons = "; ".join(f"{p}: {platforms.PLANNED.get(p, 'unknown platform')}" for p in listed)
            out.append((exp, listed[0], f"needs a platform not available yet ({reasons})"))
    return out


def validate(steps: list[tuple], sets: dict[str, str]) -> None:
    """Every user error is found here, before any experiment runs."""
    for exp, pname, reason in steps:
        if reason is None and sets:
            platforms.get(pname).validate_sets(exp, sets)


def execute(command: str, exp_ids: list[str], platform: str | None, quick: bool, sets: dict[str, str],
            fresh: bool = False, log=None) -> Path:
    log = log or Progress()
    exps = experiment.load_all()
    for eid in exp_ids:
        experiment.get(eid, exps)
    steps = plan(exps, exp_ids, platform, strict=(command == "run"))
    validate(steps, sets)
    args = {"command": command, "experiment": exp_ids[0] if command == "run" else None,
            "experiments": exp_ids, "platform": platform, "quick": quick, "sets": sets,
            "commit": results.git_info()["describe"]}
    rd = results.RunDir.open(args, fresh=fresh)
    if rd.resumed:
        n = sum(1 for e, p, _ in steps if rd.done(e.id, p))
        log(f"resuming run {rd.run_id}: {n} of {len(steps)} entries already done")
    else:
        log(f"run {rd.run_id}: {len(steps)} entries ({'quick' if quick else 'full'} mode)")
    entries, platform_facts = [], {}
    try:
        for i, (exp, pname, reason) in enumerate(steps):
            prev = rd.done(exp.id, pname)
            if prev:
                entries.append(prev)
                continue
            log(f"[{i + 1}/{len(steps)}] {exp.id} on {pname}")
            base = {"id": exp.id, "platform": pname, "catalogue": exp.data["catalogue"],
                    "description": exp.description,
                    "planned": exp.data.get("planned", {})}
            if reason:
                entry = analysis.judge({"not_applicable": reason}, exp.headline, None, None)
                entry.update(base, platform_label=pname, commands=[], seconds=0.0, binaries={})
                rd.save_entry(entry, "")
                entries.append(entry)
                continue
            plat = platforms.get(pname)
            spec = exp.platform(pname)
            if "not_applicable" in spec:
                prun = None
                entry = analysis.judge(spec, exp.headline, None, None)
            else:
                prun = plat.run(exp, quick, sets, log)
                entry = analysis.judge(spec, exp.headline, prun.output, prun.error)
            entry.update(base, platform_label=plat.label,
                         commands=prun.commands if prun else [], seconds=round(prun.seconds, 3) if prun else 0.0,
                         binaries=prun.binaries if prun else {},
                         platform_facts=prun.facts if prun else {})
            # what the model's figure rests on: parameters fitted to this claim, taken
            # from its figures, or with no source at all (machine descriptions say which)
            cat = exp.data["catalogue"]
            for key, words in (("calibrated_on_this_claim",
                                f"Machine parameters fitted to this claim ({cat}): {{}}; a modelled figure that "
                                f"depends on them is not an independent reproduction of it, only a check of the "
                                f"model's mechanics."),
                               ("from_this_claim",
                                f"Machine parameters taken from this claim's own figures ({cat}, not fitted): {{}}; "
                                f"the model adds what decides which of them each access pays."),
                               ("assumed",
                                "Machine parameters with no source found (assumed; the machine description gives "
                                "the reasoning for each): {}.")):
                names = (prun.facts.get(key) if prun else None) or []
                if names:
                    entry["note"] += " " + words.format(", ".join(names))
            log(f"    {entry['status']}: {entry['metric']} = {analysis.fmt(entry['reproduced'])}"
                f" (claimed {analysis.fmt(entry['claimed'])})")
            rd.save_entry(entry, prun.raw if prun else "")
            entries.append(entry)
    except KeyboardInterrupt:
        log(f"interrupted: rerun the same command to resume run {rd.run_id}")
        raise
    for pname in sorted({p for _, p, r in steps if r is None}):
        platform_facts[pname] = platforms.get(pname).describe()
    finished = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    summary = {
        "run_id": rd.run_id, "command": command, "quick": quick, "sets": sets,
        "started": rd.state["started"], "finished": finished,
        "experiments": [{k: v for k, v in e.items() if k not in ("groups", "binaries")} for e in entries],
        "counts": {s: sum(1 for e in entries if e["status"] == s) for s in analysis.STATUSES},
    }
    manifest = make_manifest(rd, args, exps, entries, platform_facts, finished)
    files = report.render(rd.path, summary, entries, manifest)
    final = rd.finish(summary, manifest, files)
    c = summary["counts"]
    log(f"done: {final} ({', '.join(f'{n} {s}' for s, n in c.items() if n)})")
    return final


def make_manifest(rd, args, exps, entries, platform_facts, finished) -> dict:
    used_exps = sorted({e["id"] for e in entries})
    claims = results.ROOT.parent / "shared" / "claims.md"
    return {
        "trapline": __version__, "run_id": rd.run_id, "args": args,
        "started": rd.state["started"], "finished": finished,
        "git": results.git_info(),
        "argv": sys.argv,
        "platforms": platform_facts,
        "python": sys.version.split()[0], "python_packages": results.python_packages(),
        "compilers": {a: _safe(build.compiler_version, a) for a in build.ARCHES},
        "experiments": {eid: {"file": str(exps[eid].path.relative_to(results.ROOT)),
                              "sha256": results.sha256_file(exps[eid].path)} for eid in used_exps},
        "binaries_sha256": {f"{e['id']}.{e['platform']}": e.get("binaries", {}) for e in entries if e.get("binaries")},
        # the exact kernel invocations, with the iteration counts each platform used
        "commands": {f"{e['id']}.{e['platform']}": [" ".join(c) for c in e.get("commands", [])] for e in entries},
        "claims_md_sha256": results.sha256_file(claims) if claims.exists() else None,
        "environment": {k: os.environ[k] for k in ("TRAPLINE_CACHE", "TRAPLINE_RESULTS") if k in os.environ},
    }


def _safe(fn, *a):
    try:
        return fn(*a)
    except Exception as e:  # a missing cross compiler must not lose a finished run
        return f"unavailable: {e}"
