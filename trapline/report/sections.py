"""The report as data: a title and a list of sections made of blocks (paragraphs,
tables, bullet lists, images, preformatted text). Every layout decision is made here,
once; report/markdown.py and report/html.py only spell the blocks out.

Order: the claim matrix (one row per claim, one column per platform in the run), the
overview plot, one section per experiment and platform (its note in full, its tables
and plots), the manifest, how to cite.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from trapline import analysis
from trapline.entry import Entry
from trapline.report import fidelity
from trapline.report.plots import group_label

# the matrix's columns, for the platforms that appear in the run (others follow in run order)
COLUMN_ORDER = ("host", "qemu", "model", "gem5")


@dataclass
class Cell:
    text: str
    status: str | None = None   # coloured by STATUS_COLOR
    link: str | None = None     # the anchor of a section
    strong: bool = False


@dataclass
class Para:
    text: str
    small: bool = False


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    id: str = ""
    caption: str = ""
    fold: bool = False          # shown folded where the format can fold (HTML)


@dataclass
class Bullets:
    items: list[Cell]


@dataclass
class Image:
    path: str                   # relative to the run directory: plots/<name>.png
    alt: str


@dataclass
class Pre:
    caption: str
    lines: list[str]


Block = Para | Table | Bullets | Image | Pre


@dataclass
class Section:
    title: str
    anchor: str
    blocks: list[Block] = field(default_factory=list)
    status: str | None = None   # shown after the title, coloured


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section]


# ------------------------------------------------------------------ words

def unit(v, u: str) -> str:
    if v is None:
        return "-"
    return f"{analysis.fmt(v)}{'x' if u == 'x' else ' ' + u}"


def _catalogue_number(e: Entry) -> tuple[int, str]:
    m = re.search(r"\d+", e.catalogue or "")
    return (int(m.group()) if m else 10 ** 6, e.id)


def anchor(e: Entry) -> str:
    return f"{e.id}-{e.platform}"


def matrix_cell(e: Entry) -> Cell:
    """The reproduced figure and its platform, its ratio to the claim, the status."""
    if e.reproduced is None:
        text = f"- [{e.label}]; {e.status}"
    else:
        ratio = (f"{analysis.fmt(e.ratio_to_claim)} of the claimed {unit(e.claimed, e.unit)}"
                 if e.ratio_to_claim else "no claimed figure")
        rests = f" ({e.rests_on})" if e.rests_on else ""
        text = f"{unit(e.reproduced, e.unit)} [{e.label}{rests}]; {ratio}; {e.status}"
    return Cell(text, status=e.status, link=anchor(e))


def platforms_in(entries: list[Entry]) -> list[str]:
    seen = list(dict.fromkeys(e.platform for e in entries))
    return [p for p in COLUMN_ORDER if p in seen] + [p for p in seen if p not in COLUMN_ORDER]


def claim_matrix(entries: list[Entry], summary: dict) -> Section:
    cols = platforms_in(entries)
    labels = {e.platform: e.label for e in entries}
    meanings = {e.platform: e.platform_meaning for e in entries}
    by = {(e.id, e.platform): e for e in entries}
    rows = []
    firsts: dict[str, Entry] = {}
    for e in entries:
        firsts.setdefault(e.id, e)
    for first in sorted(firsts.values(), key=_catalogue_number):
        rows.append([Cell(first.catalogue), Cell(first.id, link=anchor(first))] +
                    [matrix_cell(by[first.id, p]) if (first.id, p) in by else Cell("-") for p in cols])
    return Section("Claim matrix", "claim-matrix", [
        Table(["claim", "experiment"] + [labels[p] for p in cols], rows, id="claim-matrix"),
        Para("Each cell: the reproduced headline [platform (what it rests on: a measurement, a functional "
             "count, or the model's prediction, input - the claim's own figures are machine parameters - or "
             "fitted - a parameter was fitted to this claim)]; reproduced / claimed; the status "
             "(colour: " + ", ".join(analysis.STATUSES) + ")."),
        Bullets([Cell(f"{labels[p]}: {meanings[p]}" if meanings[p] else labels[p]) for p in cols]),
        Para("Counts: " + ", ".join(f"{n} {s}" for s, n in summary["counts"].items())),
    ])


def _ns_header(e: Entry) -> str:
    if not e.times_are_real:
        return f"median emulated ns/op ({e.label} wall clock: emulation time, not a prediction)"
    return "median ns/op"


def source_text(e: Entry) -> str:
    s = e.source
    if not s.get("title"):
        return ""
    return f"{s['title']} ({s.get('author', '?')}, {s.get('date', '?')}); original machine: {s.get('original_machine', '?')}"


def experiment_section(e: Entry, plots: set[str]) -> Section:
    b: list[Block] = [Para(e.description)]
    if source_text(e):
        b.append(Para(f"Source: {source_text(e)}.", small=True))
    b.append(Para(f"Platform: {e.label}: {e.platform_meaning}." if e.platform_meaning else f"Platform: {e.label}.",
                  small=True))
    ratio = f" (reproduced / claimed {analysis.fmt(e.ratio_to_claim)})" if e.ratio_to_claim else ""
    b.append(Para(f"Headline: {e.metric}: claimed {unit(e.claimed, e.unit)}, "
                  f"reproduced {unit(e.reproduced, e.unit)} [{e.label}]{ratio}."))
    b.append(Para(f"Note: {e.note}", small=True))
    if e.planned:
        b.append(Para("Planned platforms: " + "; ".join(f"{p}: {w}" for p, w in e.planned.items()), small=True))
    if e.figures:
        b.append(Table(["figure", "claimed", "reproduced"],
                       [[Cell(f["name"]), Cell(unit(f.get("claimed"), f["unit"])),
                         Cell(f"{unit(f['value'], f['unit'])} [{e.label}]")] for f in e.figures]))
    if e.checks:
        b.append(Bullets([Cell(f"check {c['name']}: {'ok' if c['ok'] else 'FAILED'} ({c['detail']})",
                               strong=not c["ok"]) for c in e.checks]))
    if f"plots/{e.key}.png" in plots:
        b.append(Image(f"plots/{e.key}.png", f"{e.id} [{e.label}]"))
    if e.groups:
        b.append(Table(["group", "n", _ns_header(e), "IQR %"],
                       [[Cell(group_label(g)), Cell(str(g["n"])), Cell(analysis.fmt(g["median_ns_per_op"])),
                         Cell(analysis.fmt(g["iqr_percent"]))] for g in e.groups[:80]],
                       caption=f"Sample groups ({len(e.groups)}{', first 80 shown' if len(e.groups) > 80 else ''}):",
                       fold=True))
    if e.warnings:
        b.append(Bullets([Cell(f"warning: {w}") for w in e.warnings]))
    if e.commands:
        b.append(Pre("Commands", [" ".join(c) for c in e.commands[:10]]))
    return Section(f"{e.catalogue} {e.id} [{e.label}]", anchor(e), b, status=e.status)


# ------------------------------------------------------------------ manifest

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


def citation(manifest: dict, manifest_sha256: str) -> str:
    g = manifest["git"]
    return (f"trapline developers. trapline {manifest['trapline']} (commit {g['commit'][:12]}"
            f"{', dirty tree' if g['dirty'] else ''}), run {manifest['run_id']}, "
            f"{manifest['finished'][:10]}. Reproduction of memory-system measurements; "
            f"manifest.json sha256 {manifest_sha256[:16]}. See CITATION.cff.")


def manifest_sections(manifest: dict, manifest_sha256: str) -> list[Section]:
    shown = {k: v for k, v in manifest.items() if k != "binaries_sha256"}
    return [Section("Manifest", "manifest", [
                Para("Platforms (all inputs, versions and hashes: manifest.json):"),
                Bullets([Cell(line) for line in platform_lines(manifest)]),
                Para(f"Compilers: {manifest.get('compilers', {})}"),
                Pre("manifest.json (without the binaries' hashes)", json.dumps(shown, indent=1).splitlines())]),
            Section("How to cite", "how-to-cite", [Para(citation(manifest, manifest_sha256))])]


def fidelity_section(entries: list[Entry]) -> Section | None:
    """The fidelity table of the modelled figures (issue 12, report/fidelity.py), or None
    when the run has no modelled figure with a claim."""
    rs = fidelity.rows(entries)
    if not rs:
        return None
    s = fidelity.summary(rs)
    return Section("Fidelity of the modelled figures", "fidelity", [
        Para(fidelity.EXPLAIN, small=True),
        Bullets([Cell(line, strong=line.startswith("Prediction") and bool(s["breaking_rule"]))
                 for line in fidelity.summary_lines(s)]),
        Table(fidelity.HEADER, [[Cell(c) for c in row] for row in fidelity.table_cells(rs)], id="fidelity")])


def build(summary: dict, manifest: dict, manifest_sha256: str, entries: list[Entry], plots: set[str]) -> Report:
    """The whole report, from the run directory's contents and the plots drawn."""
    sets = "".join(f" --set {k}={v}" for k, v in summary.get("sets", {}).items())
    subtitle = (f"Run {summary['run_id']}: {summary['command']}{' --quick' if summary['quick'] else ''}{sets}; "
                f"finished {summary['finished']}; commit {manifest['git']['describe']}.")
    overview = ([Image("plots/overview.png", "overview"),
                 Para("Headline ratios with a claimed figure: claimed (grey) beside reproduced "
                      "(coloured by status), log scale.", small=True)]
                if "plots/overview.png" in plots else [Para("No headline ratio with a claimed figure in this run.")])
    fid = fidelity_section(entries)
    return Report(f"trapline report: {summary['run_id']}", subtitle,
                  [claim_matrix(entries, summary), Section("Overview", "overview", overview)]
                  + ([fid] if fid else [])
                  + [experiment_section(e, plots) for e in entries]
                  + manifest_sections(manifest, manifest_sha256))
