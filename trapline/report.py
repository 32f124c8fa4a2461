"""The report of one run: report.md, a standalone report.html with plots,
summary.csv and groups.csv. Everything here is derived from the entries, so
`./run.sh report RUN` can redraw a finished run.

Every figure carries the platform that produced it (see PLATFORM_MEANING).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from pathlib import Path

from trapline import analysis
from trapline.experiment import load_all

PLATFORM_MEANING = {
    "host": "host: measured in real time on this machine's CPU",
    "qemu": "QEMU-functional: counts and checks from an emulated machine; its wall clock is emulation time, not a prediction",
    "model": "timing model: cycles charged by trapline's model for a machine description",
    "gem5": "gem5: simulated cycles from gem5 with the same machine description",
}
STATUS_COLOR = {"reproduced": "#1a7f37", "differs": "#b35900", "not-applicable": "#57606a", "failed": "#cf222e"}


def _unit(v, unit: str) -> str:
    if v is None:
        return "-"
    return f"{analysis.fmt(v)}{'x' if unit == 'x' else ' ' + unit}"


def _ns_header(e: dict) -> str:
    if e["platform"] == "qemu":
        return "median emulated ns/op (QEMU wall clock: emulation time, not a prediction)"
    return "median ns/op"


_LABEL_SKIP = {"variant", "n", "ops_per_sample", "median_sample_ns"}
_STAT_PREFIXES = ("median_", "min_", "max_", "q1_", "q3_", "iqr_")


def _params(g: dict) -> list[str]:
    return [k for k in g if k not in _LABEL_SKIP and not k.startswith(_STAT_PREFIXES)]


def _group_label(g: dict) -> str:
    return " ".join([g["variant"]] + [f"{k}={g[k]}" for k in _params(g)])


def _short_labels(gs: list[dict], width: int = 44) -> list[str]:
    """Plot labels: the variant and only the parameters that differ between the
    groups (the tables keep every parameter), wrapped to `width` characters."""
    import textwrap
    keys = list(dict.fromkeys(k for g in gs for k in _params(g)))
    varying = [k for k in keys if len({str(g.get(k)) for g in gs}) > 1]
    return ["\n".join(textwrap.wrap(" ".join([g["variant"]] + [f"{k}={g[k]}" for k in varying if k in g]), width))
            for g in gs]


# ------------------------------------------------------------------- plots

def _plot_entry(entry: dict, spec: dict):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gs = entry.get("groups") or []
    if not gs or entry["platform"] == "qemu":  # QEMU's clock is emulation time: no timing plots
        return None
    stat = spec.get("stat", "ns_per_op")
    key = "median_" + stat
    x = spec.get("x")
    bars = not (x and any(x in g for g in gs))
    labels = _short_labels([g for g in gs if key in g]) if bars else []
    height = max(3.6, 0.75 + sum(0.22 * (l.count("\n") + 1) + 0.12 for l in labels))
    fig, ax = plt.subplots(figsize=(7.5, height), dpi=110)
    if not bars:
        # groups without the x parameter (e.g. glibc beside the chunk sizes)
        # are drawn as dashed reference lines
        for g in gs:
            if x not in g and key in g:
                ax.axhline(g[key], ls="--", lw=1, color="#777")
                ax.annotate(_group_label(g).split(" ")[0], (0.01, g[key]), xycoords=("axes fraction", "data"),
                            fontsize=7, color="#555", va="bottom")
        gs = [g for g in gs if x in g]
        series = spec.get("series", "variant")
        for s in sorted({str(g.get(series)) for g in gs}):
            pts = sorted((g[x], g[key], g.get("q1_" + stat, g[key]), g.get("q3_" + stat, g[key]))
                         for g in gs if str(g.get(series)) == s and key in g)
            if not pts:
                continue
            xs, ys, lo, hi = zip(*pts)
            ax.errorbar(xs, ys, yerr=[[y - l for y, l in zip(ys, lo)], [h - y for y, h in zip(ys, hi)]],
                        marker="o", ms=3, capsize=2, label=f"{series}={s}" if series != "variant" else s)
        ax.set_xlabel(x)
        ax.legend(fontsize=8)
    else:
        vals = [g[key] for g in gs if key in g]
        ax.barh(range(len(vals)), vals, color="#4c72b0")
        ax.set_yticks(range(len(vals)), labels, fontsize=7)
        ax.invert_yaxis()
        for i, v in enumerate(vals):  # the median, written at the end of its bar
            ax.annotate(analysis.fmt(v), (v, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
        ax.margins(x=0.15)
    line_plot = bool(x) and ax.get_legend() is not None
    if spec.get("logy"):
        (ax.set_yscale if line_plot else ax.set_xscale)("log")
    unit_label = {"ns_per_op": "ns per operation", "user_ns_per_op": "user ns per operation",
                  "sys_ns_per_op": "system ns per operation"}[stat]
    (ax.set_ylabel if line_plot else ax.set_xlabel)(unit_label)
    ax.set_title(spec.get("title", f"{entry['id']} ({PLATFORM_MEANING[entry['platform']].split(':')[0]})"), fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _plot_overview(entries: list[dict]):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [e for e in entries if e.get("claimed") and e.get("reproduced") and e.get("unit") == "x"]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2), dpi=110)
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [e["claimed"] for e in rows], height=0.4, label="claimed (original machine)", color="#999")
    ax.barh([y - 0.2 for y in ys], [e["reproduced"] for e in rows], height=0.4,
            color=[STATUS_COLOR[e["status"]] for e in rows], label="reproduced (colour = status)")
    ax.set_yticks(list(ys), [f"{e['id']} [{e['platform']}]" for e in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("headline ratio (x), log scale")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


# ------------------------------------------------------------------- text

def citation(manifest: dict) -> str:
    g = manifest["git"]
    return (f"trapline developers. trapline {manifest['trapline']} (commit {g['commit'][:12]}"
            f"{', dirty tree' if g['dirty'] else ''}), run {manifest['run_id']}, "
            f"{manifest['finished'][:10]}. Reproduction of memory-system measurements; "
            f"manifest sha256 {manifest.get('_sha256', '?')[:16]}. See CITATION.cff.")


def _csv(rows: list[dict], fields: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (analysis.fmt(v) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def render(run_path: Path, summary: dict, entries: list[dict], manifest: dict) -> dict[str, str | bytes]:
    import hashlib
    manifest["_sha256"] = hashlib.sha256(json.dumps({k: v for k, v in manifest.items() if k != "_sha256"},
                                                    sort_keys=True, default=str).encode()).hexdigest()
    try:
        exps = load_all()
    except Exception:
        exps = {}
    files: dict[str, str | bytes] = {}
    plots: dict[str, bytes] = {}
    for e in entries:
        spec = {}
        if e["id"] in exps and e["platform"] in exps[e["id"]].platforms:
            spec = exps[e["id"]].platform(e["platform"]).get("plot", {})
        png = _plot_entry(e, spec)
        if png:
            plots[f"{e['id']}.{e['platform']}"] = png
            files[f"plots/{e['id']}.{e['platform']}.png"] = png
    ov = _plot_overview(entries)
    if ov:
        files["plots/overview.png"] = ov

    rows = [{k: e.get(k) for k in ("id", "platform", "metric", "unit", "claimed", "reproduced", "ratio_to_claim",
                                   "status", "note")} for e in entries]
    files["summary.csv"] = _csv(rows, ["id", "platform", "metric", "unit", "claimed", "reproduced",
                                       "ratio_to_claim", "status", "note"])
    grows = [{"id": e["id"], "platform": e["platform"], "group": _group_label(g), **g}
             for e in entries for g in e.get("groups", [])]
    gfields = ["id", "platform", "group", "variant", "n", "median_ns_per_op", "q1_ns_per_op", "q3_ns_per_op",
               "min_ns_per_op", "max_ns_per_op", "iqr_percent", "median_user_ns_per_op", "median_sys_ns_per_op",
               "ops_per_sample", "median_sample_ns"]
    files["groups.csv"] = _csv(grows, gfields)
    files["report.md"] = _markdown(summary, entries, manifest, exps)
    files["report.html"] = _html(summary, entries, manifest, exps, plots, ov)
    manifest.pop("_sha256", None)
    return files


def _source(exps, eid) -> str:
    if eid not in exps:
        return ""
    s = exps[eid].data["source"]
    return f"{s['title']} ({s['author']}, {s['date']}); original machine: {exps[eid].data['original_machine']}"


def _markdown(summary, entries, manifest, exps) -> str:
    L = [f"# trapline report: {summary['run_id']}", "",
         f"Command: `{summary['command']}`{' --quick' if summary['quick'] else ''}"
         f"{''.join(f' --set {k}={v}' for k, v in summary['sets'].items())}. "
         f"Finished {summary['finished']}. Commit {manifest['git']['describe']}.", "",
         "Platforms: " + "; ".join(PLATFORM_MEANING[p] for p in sorted({e['platform'] for e in entries})) + ".", "",
         "| experiment | platform | headline | claimed | reproduced | reproduced / claimed | status |",
         "|---|---|---|---|---|---|---|"]
    for e in entries:
        r = e.get("ratio_to_claim")
        L.append(f"| {e['id']} | {e['platform']} | {e['metric']} | {_unit(e['claimed'], e['unit'])} | "
                 f"{_unit(e['reproduced'], e['unit'])} | {analysis.fmt(r) if r else '-'} | **{e['status']}** |")
    L += ["", "Counts: " + ", ".join(f"{n} {s}" for s, n in summary["counts"].items()), ""]
    for e in entries:
        L += [f"## {e['id']} [{e['platform']}]: {e['status']}", "", e.get("description", ""), "",
              f"Source: {_source(exps, e['id'])}.", "", f"Platform: {PLATFORM_MEANING[e['platform']]}.", "",
              f"Headline: {e['metric']}: claimed {_unit(e['claimed'], e['unit'])}, "
              f"reproduced {_unit(e['reproduced'], e['unit'])} [{e['platform']}].", "", f"Note: {e['note']}", ""]
        if e.get("planned"):
            L += ["Planned platforms: " + "; ".join(f"{p}: {w}" for p, w in e["planned"].items()), ""]
        if e.get("figures"):
            L += ["| figure | claimed | reproduced |", "|---|---|---|"]
            L += [f"| {f['name']} | {_unit(f.get('claimed'), f['unit'])} | {_unit(f['value'], f['unit'])} [{e['platform']}] |"
                  for f in e["figures"]]
            L.append("")
        if e.get("checks"):
            L += [f"- check {c['name']}: {'ok' if c['ok'] else 'FAILED'} ({c['detail']})" for c in e["checks"]]
            L.append("")
        if e.get("groups"):
            L += [f"| group | n | {_ns_header(e)} | IQR % |", "|---|---|---|---|"]
            L += [f"| {_group_label(g)} | {g['n']} | {analysis.fmt(g['median_ns_per_op'])} | {analysis.fmt(g['iqr_percent'])} |"
                  for g in e["groups"][:80]]
            L.append("")
        if (Path("plots") / f"{e['id']}.{e['platform']}.png").name and e.get("groups"):
            L += [f"![{e['id']}](plots/{e['id']}.{e['platform']}.png)", ""]
        for w in e.get("warnings", []):
            L.append(f"- warning: {w}")
        if e.get("commands"):
            L += ["Commands:", ""] + [f"    {' '.join(c)}" for c in e["commands"][:10]] + [""]
    L += ["## Manifest", "", "Platforms (all inputs, versions and hashes: manifest.json):", ""]
    L += [f"- {line}" for line in platform_lines(manifest)]
    L += ["", f"Compilers: {manifest['compilers']}", "", "## How to cite", "", citation(manifest), ""]
    return "\n".join(L)


def _guest_line(label: str, g: dict) -> str:
    return (f"{label}: {g.get('qemu', '?')}, {g.get('machine', '?')}, "
            f"guest Linux sha256 {str(g.get('linux_sha256') or '-')[:12]}, "
            f"initramfs sha256 {str(g.get('initrd_sha256') or '-')[:12]}")


def platform_lines(manifest: dict) -> list[str]:
    """One line per platform that produced an entry: what it ran on (the manifest
    has the rest)."""
    out = []
    for name, f in sorted(manifest.get("platforms", {}).items()):
        if not f:
            continue
        if name == "host":
            out.append(f"host: {f.get('cpu', '?')}, {f.get('cores', '?')} cores, {f.get('kernel', '?')}, "
                       f"{f.get('compiler', '?')}")
        elif name == "qemu":
            out += [_guest_line(f"QEMU-functional ({arch})", a) for arch, a in sorted(f.items())]
        elif name == "model":
            plugin = Path(f["plugin"]).parent.name[:12] if f.get("plugin") else "-"
            out.append(f"timing model: plugin build {plugin}" +
                       "".join(f"; user mode: {v}" for v in f.get("qemu", {}).values()))
            out += [_guest_line(f"timing model guest ({arch})", g) for arch, g in sorted(f.get("guests", {}).items())]
            for m in f.get("machines", {}).values():
                sets = f" with {', '.join(m['sets'])}" if m.get("sets") else ""
                out.append(f"timing model machine: {m.get('summary', m.get('name'))}{sets} "
                           f"({m.get('file')}, sha256 {str(m.get('file_sha256') or '-')[:12]})")
        else:
            out.append(f"{name}: {f}")
    return out


def _img(png: bytes) -> str:
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _html(summary, entries, manifest, exps, plots, overview) -> str:
    esc = html.escape
    rows = []
    for e in entries:
        r = e.get("ratio_to_claim")
        rows.append(f"<tr><td><a href='#{esc(e['id'])}-{esc(e['platform'])}'>{esc(e['id'])}</a></td>"
                    f"<td>{esc(e['platform'])}</td><td>{esc(e['metric'])}</td><td>{esc(_unit(e['claimed'], e['unit']))}</td>"
                    f"<td>{esc(_unit(e['reproduced'], e['unit']))}</td><td>{esc(analysis.fmt(r) if r else '-')}</td>"
                    f"<td style='color:{STATUS_COLOR[e['status']]};font-weight:bold'>{esc(e['status'])}</td>"
                    f"<td class=note>{esc(e['note'][:300])}</td></tr>")
    secs = []
    for e in entries:
        key = f"{e['id']}.{e['platform']}"
        figs = "".join(f"<tr><td>{esc(f['name'])}</td><td>{esc(_unit(f.get('claimed'), f['unit']))}</td>"
                       f"<td>{esc(_unit(f['value'], f['unit']))} [{esc(e['platform'])}]</td></tr>" for f in e.get("figures", []))
        checks = "".join(f"<li>{esc(c['name'])}: {'ok' if c['ok'] else '<b>FAILED</b>'} ({esc(c['detail'])})</li>"
                         for c in e.get("checks", []))
        groups = "".join(f"<tr><td>{esc(_group_label(g))}</td><td>{g['n']}</td><td>{analysis.fmt(g['median_ns_per_op'])}</td>"
                         f"<td>{analysis.fmt(g['iqr_percent'])}</td></tr>" for g in e.get("groups", [])[:80])
        warns = "".join(f"<li>{esc(w)}</li>" for w in e.get("warnings", []))
        cmds = esc("\n".join(" ".join(c) for c in e.get("commands", [])[:10]))
        secs.append(f"""<section id="{esc(e['id'])}-{esc(e['platform'])}">
<h2>{esc(e['id'])} [{esc(e['platform'])}] <span style="color:{STATUS_COLOR[e['status']]}">{esc(e['status'])}</span></h2>
<p>{esc(e.get('description', ''))}<br><small>Source: {esc(_source(exps, e['id']))}</small></p>
<p><small>Platform: {esc(PLATFORM_MEANING[e['platform']])}</small></p>
<p><b>{esc(e['metric'])}</b>: claimed {esc(_unit(e['claimed'], e['unit']))}, reproduced
<b>{esc(_unit(e['reproduced'], e['unit']))}</b> [{esc(e['platform'])}]</p><p class=note>{esc(e['note'])}</p>
{'<p class=note>Planned platforms: ' + esc('; '.join(f'{p}: {w}' for p, w in e.get('planned', {}).items())) + '</p>' if e.get('planned') else ''}
{f'<table><tr><th>figure</th><th>claimed</th><th>reproduced</th></tr>{figs}</table>' if figs else ''}
{f'<ul>{checks}</ul>' if checks else ''}
{_img(plots[key]) if key in plots else ''}
{f'<details><summary>groups ({len(e.get("groups", []))})</summary><table><tr><th>group</th><th>n</th><th>{esc(_ns_header(e))}</th><th>IQR %</th></tr>{groups}</table></details>' if groups else ''}
{f'<ul class=warn>{warns}</ul>' if warns else ''}
{f'<details><summary>commands</summary><pre>{cmds}</pre></details>' if cmds else ''}
</section>""")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>trapline {esc(summary['run_id'])}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;font-size:13px;margin:.5em 0}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}}
.note{{font-size:12px;color:#444}}img{{max-width:100%}}section{{border-top:1px solid #ddd;margin-top:1.5em}}.warn{{color:#b35900}}</style></head><body>
<h1>trapline report</h1>
<p>Run <b>{esc(summary['run_id'])}</b>: <code>{esc(summary['command'])}{' --quick' if summary['quick'] else ''}</code>,
finished {esc(summary['finished'])}, commit {esc(manifest['git']['describe'])}.
</p>
<p class="note">{'<br>'.join(esc(l) for l in platform_lines(manifest))}</p>
<p>{'<br>'.join(esc(PLATFORM_MEANING[p]) for p in sorted({e['platform'] for e in entries}))}</p>
<p>{esc(', '.join(f'{n} {s}' for s, n in summary['counts'].items()))}</p>
<table><tr><th>experiment</th><th>platform</th><th>headline</th><th>claimed</th><th>reproduced</th><th>reproduced / claimed</th><th>status</th><th>note</th></tr>
{''.join(rows)}</table>
{_img(overview) if overview else ''}
{''.join(secs)}
<section><h2>How to cite</h2><p>{esc(citation(manifest))}</p>
<details><summary>manifest</summary><pre>{esc(json.dumps({k: v for k, v in manifest.items() if k != 'binaries_sha256'}, indent=1, default=str))}</pre></details></section>
</body></html>
"""
