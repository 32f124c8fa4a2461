"""The report of one run: report.md, a standalone report.html with its plots,
summary.csv and groups.csv.

render(run_dir) is a pure function of the run directory: it reads summary.json,
manifest.json and entries/*.json (never the experiment YAMLs or the platform
classes), so `./run.sh report RUN` redraws a finished run byte for byte. The report
is built once as data (report/sections.py) and spelled twice (report/markdown.py,
report/html.py); the plots come from report/plots.py.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from trapline import analysis
from trapline.entry import Entry
from trapline.report import html, markdown, plots, sections
from trapline.report.plots import STATUS_COLOR, group_label
from trapline.report.sections import citation, platform_lines

__all__ = ["render", "load", "STATUS_COLOR", "citation", "platform_lines"]

SUMMARY_FIELDS = ["id", "platform", "metric", "unit", "claimed", "reproduced", "ratio_to_claim", "status", "note"]
GROUP_FIELDS = ["id", "platform", "group", "variant", "n", "median_ns_per_op", "q1_ns_per_op", "q3_ns_per_op",
                "min_ns_per_op", "max_ns_per_op", "iqr_percent", "median_user_ns_per_op", "median_sys_ns_per_op",
                "ops_per_sample", "median_sample_ns"]


def load(run_dir: Path) -> tuple[dict, dict, str, list[Entry]]:
    """summary.json, manifest.json (and its sha256) and the entries, in the summary's order,
    each checked against its schema first (trapline/runfiles.py: one line naming the file
    and the field of a damaged one)."""
    from trapline import runfiles
    summary, manifest, sha, entries = runfiles.load(run_dir)
    return summary, manifest, sha, [Entry.from_dict(e) for e in entries]


def _csv(rows: list[dict], fields: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (analysis.fmt(v) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def render(run_dir: Path) -> dict[str, str | bytes]:
    """Every derived file of the run, by its path in the run directory."""
    summary, manifest, manifest_sha256, entries = load(run_dir)
    files: dict[str, str | bytes] = dict(plots.draw(entries))
    dicts = [e.to_dict() for e in entries]
    files["summary.csv"] = _csv([{k: d.get(k) for k in SUMMARY_FIELDS} for d in dicts], SUMMARY_FIELDS)
    files["groups.csv"] = _csv([{"id": e.id, "platform": e.platform, "group": group_label(g), **g}
                                for e in entries for g in e.groups], GROUP_FIELDS)
    model = sections.build(summary, manifest, manifest_sha256, entries, set(files))
    files["report.md"] = markdown.render(model)
    files["report.html"] = html.render(model, files)
    return files
