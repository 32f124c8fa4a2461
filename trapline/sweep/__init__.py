"""Sweeps: one experiment run over a grid of --set values, on Dask distributed.

    ./run.sh sweep ID [--platform P] --set key=v1,v2,... [--set key2=...] [--quick]
                      [--machine M] [--scheduler tcp://host:8786] [--workers N] [--fresh]

grid.py parses the grid and checks every value (and every machine it makes) before
any point runs; points.py names each point by the content hash of what decides it and
keeps finished points in a store (results/sweeps/.points/); engine.py computes the
points not in the store on Dask (an embedded LocalCluster, or --scheduler). The sweep
directory is then built from the store alone, atomically like a run directory
(results.RunDir: .incomplete/<id>/, one rename):

    results/sweeps/<sweep-id>/
      table.json table.csv      every point: its values, headline, figures, status, rests_on, hash
      points/<hash>.json        each point's entry (as a run's entries/ hold them)
      summary.json manifest.json report.md report.html plots/
    results/sweeps/latest -> <sweep-id>

A rerun computes nothing; an extended grid computes only its new points; an interrupted
sweep resumes from the points already stored. docs/sweeps.md has the user's side.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from trapline import __version__, analysis, build, paths, results
from trapline.context import Progress
from trapline.errors import RunFailed
from trapline.sweep import engine, grid, points as points_mod

SWEEPS = "sweeps"
STORE = ".points"


@dataclass
class Sweep:
    """A finished sweep: its directory, its table (one row per point, in grid order) and
    how many points this call computed (the others came from the store)."""
    path: Path
    rows: list[dict]
    computed: int
    entries: list[dict]


def sweeps_root(root: Path | None = None) -> Path:
    return (root or results.results_root()) / SWEEPS


def _row(i: int, sets: dict, rec: dict, computed: bool) -> dict:
    e = rec["entry"]
    return {"point": i, "sets": sets, "status": e["status"], "metric": e["metric"], "unit": e["unit"],
            "headline": e.get("reproduced"), "claimed": e.get("claimed"),
            "ratio_to_claim": e.get("ratio_to_claim"), "rests_on": e.get("rests_on"),
            "figures": {f["name"]: f.get("value") for f in e.get("figures", [])},
            "figure_units": {f["name"]: f.get("unit") for f in e.get("figures", [])},
            "platform": e["platform"], "platform_label": e.get("platform_label"),
            "hash": rec["hash"], "computed_now": computed, "worker": rec.get("worker"),
            "seconds": rec.get("seconds")}


def table_csv(rows: list[dict], keys: list[str]) -> str:
    import csv
    import io
    figs: list[str] = []
    for r in rows:
        figs += [f for f in r["figures"] if f not in figs]
    fields = ["point", *keys, "status", "headline", "unit", "claimed", "rests_on",
              *[f"figure: {f}" for f in figs], "platform", "hash"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        d = {"point": r["point"], **{k: r["sets"].get(k) for k in keys}, "status": r["status"],
             "headline": r["headline"], "unit": r["unit"], "claimed": r["claimed"], "rests_on": r["rests_on"],
             **{f"figure: {f}": r["figures"].get(f) for f in figs}, "platform": r["platform"], "hash": r["hash"]}
        w.writerow({k: (analysis.fmt(v) if isinstance(v, float) else v) for k, v in d.items()})
    return buf.getvalue()


def run(exp_id: str, point_sets: list[dict[str, str]], platform: str | None = None, quick: bool = False,
        machine: str | None = None, scheduler: str | None = None, workers: int | None = None,
        timeout: float | None = None, fresh: bool = False, root: Path | None = None, log=None,
        grid_spec: dict[str, list[str]] | None = None, progress_stream=sys.stderr, images: str | None = None) -> Sweep:
    """Check every point, compute the ones not stored, write the sweep directory.
    point_sets: each point's --set values (grid.product of a grid, or any list: sensitivity);
    images: --images, who builds a guest lane's image (default debian; the image's
    hashes are in every point's key)."""
    log = log or Progress(sys.stderr)
    quiet = lambda msg: None  # noqa: E731 - the checks build nothing and say nothing
    checked = grid.check(exp_id, platform, point_sets, quick, machine, timeout, quiet)
    if scheduler:
        engine.probe(scheduler)
    exp, plat = checked.exp, checked.platform
    pname = plat.name
    keys = list(grid_spec) if grid_spec else list(dict.fromkeys(k for p in point_sets for k in p))
    # what every point shares (kernels, plugin, guest image: built here once if missing)
    from trapline.context import RunContext
    shared_ctx = RunContext.make(quick, {}, machine, log, timeout, images)
    shared = points_mod.shared_keys(exp, type(plat)(shared_ctx))
    specs, hashes = [], []
    for sets, ctx in zip(point_sets, checked.contexts):
        material = points_mod.key_material(exp, plat, ctx, shared)
        h = points_mod.point_hash(material)
        hashes.append(h)
        specs.append({"hash": h, "experiment": exp_id, "experiment_sha256": material["experiment_sha256"],
                      "platform": pname, "quick": quick, "sets": sets, "machine": machine, "timeout": timeout,
                      "tree_sha256": shared["tree_sha256"], "label": grid.label(sets),
                      "images": shared_ctx.image_builder})
    # two points with the same hash (e.g. a value written two ways) are one computation
    sroot = sweeps_root(root)
    store = points_mod.Store(sroot / STORE)
    todo, seen = [], set()
    for s in specs:
        if not store.reusable(s["hash"]) and s["hash"] not in seen:
            todo.append(s)
            seen.add(s["hash"])
    cached = len(specs) - len(todo)
    args = {"command": "sweep", "experiment": exp_id, "platform": pname, "quick": quick, "machine": machine,
            "grid": grid_spec or {}, "points": point_sets if not grid_spec else None, "timeout": timeout,
            "tree_sha256": shared["tree_sha256"]}
    if shared_ctx.image_builder != "debian":
        args["images"] = shared_ctx.image_builder
    rd = results.RunDir.open(args, fresh=fresh, root=sroot)
    try:  # (however it ends, its lock file goes with it: results.RunDir.release)
        log(f"sweep {rd.run_id}: {exp_id} on {pname}, {len(specs)} point(s) "
            f"({len(specs) - len(todo)} in the store, {len(todo)} to compute; {'quick' if quick else 'full'} mode)")
        computed_now: set[str] = set()

        def on_result(rec: dict) -> None:
            raw = rec.pop("raw", "")
            if store.put(rec, raw):
                computed_now.add(rec["hash"])

        if not plat.side_by_side and not scheduler and not workers and len(todo) > 1:
            workers = 1  # e.g. host points measure real time: side by side they would disturb each other
            log(f"{pname} lane: one point at a time (--workers N to change): {plat.one_at_a_time}")
        progress = engine.ProgressLine(len(specs), cached, progress_stream)
        try:
            desc = engine.run(todo, scheduler, workers, on_result, progress, log)
        except KeyboardInterrupt:
            log(f"interrupted: rerun the same command to resume sweep {rd.run_id} "
                f"({len(computed_now)} new point(s) stored)")
            raise
        # the table comes from the store alone
        rows, entries = [], []
        for i, (sets, h) in enumerate(zip(point_sets, hashes)):
            rec = store.get(h)
            if rec is None:
                raise RunFailed(f"sweep point {grid.label(sets)} ({h[:12]}) is missing from the store {store.path}")
            rows.append(_row(i, sets, rec, h in computed_now))
            entries.append(rec["entry"])
            results.atomic_json(rd.path / "points" / f"{h}.json", rec)
        finished = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
        counts = {s: sum(1 for r in rows if r["status"] == s) for s in analysis.STATUSES}
        summary = {"sweep_id": rd.run_id, "run_id": rd.run_id, "kind": "sweep", "experiment": exp_id,
                   "platform": pname, "quick": quick, "machine": machine, "keys": keys, "grid": grid_spec or {},
                   "points": len(rows), "computed": len(computed_now), "cached": len(rows) - len(computed_now),
                   "started": rd.state["started"], "finished": finished, "counts": counts,
                   "metric": rows[0]["metric"] if rows else None, "unit": rows[0]["unit"] if rows else None}
        table = {"sweep_id": rd.run_id, "experiment": exp_id, "platform": pname, "keys": keys, "rows": rows}
        results.atomic_json(rd.path / "table.json", table)
        results.atomic_write(rd.path / "table.csv", table_csv(rows, keys))
        manifest = make_manifest(rd, args, exp, pname, shared, desc, rows, finished)
        from trapline.report import sweep as sweep_report
        final = rd.finish(summary, manifest, sweep_report.render)
    finally:
        rd.release()
    c = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    log(f"done: {final} ({len(rows)} points: {c}; {len(computed_now)} computed, "
        f"{len(rows) - len(computed_now)} from the store)")
    return Sweep(final, rows, len(computed_now), entries)


def make_manifest(rd, args, exp, pname, shared, engine_desc, rows, finished) -> dict:
    """The sweep's manifest, in the style of a run's (runner.make_manifest)."""
    from importlib import metadata
    claims = paths.shared("claims.md")
    pk = results.python_packages()
    for name in ("dask", "distributed"):
        try:
            pk[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    workers = sorted({r["worker"] for r in rows if r["computed_now"] and r["worker"]})
    return {
        "trapline": __version__, "run_id": rd.run_id, "kind": "sweep", "args": args,
        "started": rd.state["started"], "finished": finished,
        "git": results.git_info(), "argv": sys.argv,
        "python": sys.version.split()[0], "python_packages": pk,
        "compilers": {a: _safe(build.compiler_version, a) for a in shared.get("kernels", {})},
        "experiments": {exp.id: {"file": str(Path(exp.path).relative_to(results.ROOT))
                                 if Path(exp.path).is_relative_to(results.ROOT) else str(exp.path),
                                 "sha256": results.sha256_file(exp.path)}},
        "platform": pname,
        "point_keys": shared,  # what every point shares (the tree, kernel build, plugin, image keys)
        "engine": {**engine_desc, "workers_used": workers},
        "points": {r["hash"]: {"sets": r["sets"], "computed_now": r["computed_now"], "worker": r["worker"],
                               "seconds": r["seconds"]} for r in rows},
        "claims_md_sha256": results.sha256_file(claims) if claims.exists() else None,
    }


def _safe(fn, *a):
    try:
        return fn(*a)
    except Exception as e:
        return f"unavailable: {e}"
