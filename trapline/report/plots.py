"""The report's plots, drawn from the entries alone: one per entry whose platform's
times are real and that has sample groups (a clock that is emulation time is never
plotted), and the overview of headline ratios against the claims.

draw(entries) returns {"plots/<id>.<platform>.png": bytes, "plots/overview.png": bytes, and
"plots/<id>.bounds.png" for an experiment with bounds (report/bounds.py)}
for the plots that exist; the report links exactly these.
"""

from __future__ import annotations

import io
import textwrap
import threading

from trapline import analysis
from trapline.entry import Entry

STATUS_COLOR = {"reproduced": "#1a7f37", "differs": "#b35900", "not-applicable": "#57606a", "failed": "#cf222e"}
_LABEL_SKIP = {"variant", "n", "ops_per_sample", "median_sample_ns", "counts_per_op"}
_STAT_PREFIXES = ("median_", "min_", "max_", "q1_", "q3_", "iqr_")


def params(g: dict) -> list[str]:
    """A group's parameters (what distinguishes it), without its statistics."""
    return [k for k in g if k not in _LABEL_SKIP and not k.startswith(_STAT_PREFIXES)]


def group_label(g: dict) -> str:
    return " ".join([g["variant"]] + [f"{k}={g[k]}" for k in params(g)])


def _short_labels(gs: list[dict], width: int = 44) -> list[str]:
    """Plot labels: the variant and only the parameters that differ between the
    groups (the tables keep every parameter), wrapped to `width` characters."""
    keys = list(dict.fromkeys(k for g in gs for k in params(g)))
    varying = [k for k in keys if len({str(g.get(k)) for g in gs}) > 1]
    return ["\n".join(textwrap.wrap(" ".join([g["variant"]] + [f"{k}={g[k]}" for k in varying if k in g]), width))
            for g in gs]


def preload() -> threading.Thread:
    """Import matplotlib (about 0.5 s of CPU) in a thread of its own, so that it
    loads while a run's QEMU works on the other core; plot_entry's import then
    finds it loaded (or waits for it: Python's import lock). Not a daemon: an
    interpreter that exits does not stop it half-way through an import."""
    def load():
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401
        except Exception:  # noqa: BLE001 (plot_entry imports it again and says what fails)
            pass
    t = threading.Thread(target=load, name="matplotlib-preload")
    t.start()
    return t


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def plot_entry(entry: Entry) -> bytes | None:
    """The entry's sample groups against its plot spec (x, series, stat, logy, title)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gs = entry.groups
    if not gs or not entry.times_are_real:
        return None
    spec = entry.plot
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
                ax.annotate(group_label(g).split(" ")[0], (0.01, g[key]), xycoords=("axes fraction", "data"),
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
    ax.set_title(spec.get("title", f"{entry.id} ({entry.label})"), fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def plot_overview(entries: list[Entry]) -> bytes | None:
    """Every headline ratio with a claimed figure: claimed beside reproduced, coloured by status."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [e for e in entries if e.claimed and e.reproduced and e.unit == "x"]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2), dpi=110)
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [e.claimed for e in rows], height=0.4, label="claimed (original machine)", color="#999")
    ax.barh([y - 0.2 for y in ys], [e.reproduced for e in rows], height=0.4,
            color=[STATUS_COLOR[e.status] for e in rows], label="reproduced (colour = status)")
    ax.set_yticks(list(ys), [f"{e.id} [{e.label}]" for e in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("headline ratio (x), log scale")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return _png(fig)


def plot_bounds(t) -> bytes | None:
    """A bounded experiment (report/bounds.Bounded): each figure's value per platform, as bars, with
    the machine's Little's-law bound as a black tick across them; log scale."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in t.rows if any(v for v in r[1])]
    if not rows:
        return None
    n = len(t.labels)
    fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=110)
    width = 0.8 / n
    colors = ("#8c8c8c", "#4c72b0", "#dd8452", "#55a868", "#c44e52")
    for i, label in enumerate(t.labels):
        xs = [k + (i - (n - 1) / 2) * width for k in range(len(rows))]
        ys = [r[1][i] or 0 for r in rows]
        ax.bar(xs, ys, width, label=label, color=colors[i % len(colors)])
    for k, (_, _, b) in enumerate(rows):
        ax.hlines(b, k - 0.45, k + 0.45, colors="black", lw=1.5, label="Little's-law bound" if k == 0 else None)
    ax.set_xticks(range(len(rows)), [r[0].split(":")[0] for r in rows], fontsize=8, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("ns per access")
    ax.set_title(f"{t.id}: ns per access beside the machine's Little's-law bound", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return _png(fig)


def draw(entries: list[Entry]) -> dict[str, bytes]:
    """Every plot the report shows, by its path in the run directory."""
    from trapline.report import bounds
    out = {}
    for e in entries:
        png = plot_entry(e)
        if png:
            out[f"plots/{e.key}.png"] = png
    for t in bounds.tables(entries):
        png = plot_bounds(t)
        if png:
            out[f"plots/{t.id}.bounds.png"] = png
    ov = plot_overview(entries)
    if ov:
        out["plots/overview.png"] = ov
    return out
