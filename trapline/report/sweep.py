"""The report of a sweep (trapline/sweep): report.md, report.html and plots/, drawn
from the sweep directory alone (table.json, summary.json, manifest.json), so it is
a pure function of that directory like a run's report.

One section: what was swept and on what platform, the table of every point (its
values, headline, status, rests_on), the headline against each swept key (one line per
combination of the other keys), and for two keys a heatmap. It is spelled with the run
report's section model (report/sections.py) by the same markdown and HTML writers.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from trapline import analysis
from trapline.report import html, markdown
from trapline.report.plots import _png
from trapline.report.sections import Bullets, Cell, Image, Para, Report, Section, Table

_NUM = re.compile(r"^\s*([-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z%]*)\s*$")


def numeric_axis(values: list[str]) -> tuple[list[float], str] | None:
    """The values as numbers when every one is a number in one unit ('32B', '64B' -> B)."""
    out, units = [], set()
    for v in values:
        m = _NUM.match(str(v))
        if not m:
            return None
        out.append(float(m.group(1)))
        units.add(m.group(2))
    return (out, units.pop()) if len(units) == 1 else None


def _values(rows: list[dict], key: str) -> list[str]:
    return list(dict.fromkeys(r["sets"][key] for r in rows if key in r["sets"]))


def plot_key(rows: list[dict], keys: list[str], key: str, metric: str, unit: str, label: str) -> bytes | None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    vals = _values(rows, key)
    if not vals:
        return None
    num = numeric_axis(vals)
    pos = dict(zip(vals, num[0] if num else range(len(vals))))
    others = [k for k in keys if k != key]
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["headline"] is None or key not in r["sets"]:
            continue
        name = " ".join(f"{k}={r['sets'][k]}" for k in others if k in r["sets"]) or metric
        series.setdefault(name, []).append((pos[r["sets"][key]], r["headline"]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=100)
    for name, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if num is None:
        ax.set_xticks(range(len(vals)), vals, rotation=30 if len(vals) > 6 else 0)
    elif len(vals) > 2 and min(num[0]) > 0 and max(num[0]) / min(num[0]) >= 16:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(key + (f" ({num[1]})" if num and num[1] else ""))
    ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
    ax.set_title(f"{label}: headline against {key}", fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def heatmap(rows: list[dict], keys: list[str], metric: str, unit: str, label: str) -> bytes | None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    ky, kx = keys
    ys, xs = _values(rows, ky), _values(rows, kx)
    grid = np.full((len(ys), len(xs)), np.nan)
    for r in rows:
        if r["headline"] is not None and ky in r["sets"] and kx in r["sets"]:
            grid[ys.index(r["sets"][ky]), xs.index(r["sets"][kx])] = r["headline"]
    if np.isnan(grid).all():
        return None
    fig, ax = plt.subplots(figsize=(max(5.5, 2.5 + 0.9 * len(xs)), max(3.2, 1.5 + 0.6 * len(ys))), dpi=100)
    im = ax.imshow(grid, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(kx)
    ax.set_ylabel(ky)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, analysis.fmt(float(grid[i, j])), ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] < (lo + hi) / 2 else "black")
    fig.colorbar(im, ax=ax, label=f"headline ({unit})" if unit else "headline")
    ax.set_title(f"{label}:\n{metric}", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "key"


def draw(rows: list[dict], keys: list[str], metric: str, unit: str, label: str) -> dict[str, bytes]:
    files = {}
    for k in keys:
        png = plot_key(rows, keys, k, metric, unit, label)
        if png:
            files[f"plots/headline-vs-{_slug(k)}.png"] = png
    if len(keys) == 2:
        png = heatmap(rows, keys, metric, unit, label)
        if png:
            files["plots/headline-heatmap.png"] = png
    return files


def section(summary: dict, manifest: dict, manifest_sha256: str, rows: list[dict], files: dict) -> Section:
    keys = summary["keys"]
    plat = rows[0].get("platform_label") or summary["platform"] if rows else summary["platform"]
    figs: list[str] = []
    for r in rows:
        figs += [f for f in r["figures"] if f not in figs]
    blocks = [
        Para(f"{summary['experiment']} on {plat} ({summary['platform']}), {summary['points']} points over "
             f"{', '.join(keys) or 'no key'} ({'quick' if summary['quick'] else 'full'} mode); headline: "
             f"{summary['metric']} ({summary['unit']}). Every figure below is a {plat} figure and says what it "
             f"rests on (rests_on); {summary['computed']} point(s) were computed by this sweep and "
             f"{summary['cached']} came from the point store (same content hash, docs/sweeps.md)."),
    ]
    header = ["#", *keys, "headline", "status", "rests_on", *figs, "hash"]
    trs = []
    for r in rows:
        trs.append([Cell(str(r["point"])), *[Cell(str(r["sets"].get(k, ""))) for k in keys],
                    Cell(analysis.fmt(r["headline"]), strong=True), Cell(r["status"], status=r["status"]),
                    Cell(str(r["rests_on"] or "-")), *[Cell(analysis.fmt(r["figures"].get(f))) for f in figs],
                    Cell(r["hash"][:12])])
    blocks.append(Table(header, trs, id="sweep-table", caption="Every point (table.csv and table.json hold "
                                                              "the same, with full hashes)"))
    for path in sorted(p for p in files if p.startswith("plots/")):
        blocks.append(Image(path, f"{summary['experiment']}: {Path(path).stem}"))
    eng = manifest.get("engine", {})
    blocks.append(Bullets([
        Cell(f"engine: {eng.get('engine', '?')}, {eng.get('scheduler', '?')}"
             + (f", {eng['workers']} worker(s)" if eng.get("workers") else "")),
        Cell(f"trapline {manifest.get('trapline')} at {manifest.get('git', {}).get('describe', '?')}; source tree "
             f"sha256 {manifest.get('point_keys', {}).get('tree_sha256', '?')[:16]}"),
        Cell(f"manifest.json sha256 {manifest_sha256}"),
    ]))
    counts = summary.get("counts", {})
    status = "failed" if counts.get("failed") else None
    return Section(f"Sweep: {summary['experiment']} over {', '.join(keys) or '-'}", "sweep", blocks, status)


def render(sweep_dir: Path) -> dict[str, str | bytes]:
    """Every derived file of the sweep directory, by its path in it."""
    d = Path(sweep_dir)
    from trapline.results import read_json
    summary = read_json(d / "summary.json")
    table = read_json(d / "table.json")
    raw = (d / "manifest.json").read_bytes()
    manifest = json.loads(raw)
    rows = table["rows"]
    label = f"{summary['experiment']} ({summary['platform']})"
    files: dict[str, str | bytes] = dict(draw(rows, summary["keys"], summary["metric"] or "headline",
                                              summary["unit"] or "", label))
    sec = section(summary, manifest, hashlib.sha256(raw).hexdigest(), rows, files)
    rep = Report(f"trapline sweep {summary['sweep_id']}", f"finished {summary['finished']}", [sec])
    files["report.md"] = markdown.render(rep)
    files["report.html"] = html.render(rep, files)
    return files
