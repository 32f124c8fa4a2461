"""The report as data: a title and a list of sections made of blocks (paragraphs,
tables, bullet lists, images, preformatted text). Every layout decision is made here,
once; report/markdown.py and report/html.py only spell the blocks out.

Order: the claim matrix (one row per claim, one column per platform in the run; compact
cells: figure, ratio to the claim, status colour, the sentence on hover and below), the
overview plot, the fidelity table, the simulators side by side (report/sidebyside.py),
one section per experiment and platform (its note in full, its tables and plots), the
manifest, how to cite.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from trapline import analysis
from trapline.entry import Entry
from trapline.report import bounds, fidelity, sidebyside
from trapline.report.plots import group_label

# a run made before the platforms wrote platform_report into its manifest: each
# platform's column from what its entries rest on (a measurement, a functional count,
# else a model's figures), and modelled figures as fidelity.MODELLED_BASES say
LEGACY_COLUMN = {"measurement": 10, "functional count": 20}
LEGACY_LAST = 30


@dataclass
class Cell:
    text: str
    status: str | None = None   # coloured by STATUS_COLOR
    link: str | None = None     # the anchor of a section
    strong: bool = False
    title: str = ""             # the sentence behind a compact cell (a hover title where the format has one)


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
    fold: str = ""              # a caption: shown folded under it where the format can fold (HTML)


@dataclass
class Legend:
    """What each status colour means: (status, meaning) pairs."""
    items: list[tuple[str, str]]


@dataclass
class Image:
    path: str                   # relative to the run directory: plots/<name>.png
    alt: str


@dataclass
class Pre:
    caption: str
    lines: list[str]


Block = Para | Table | Bullets | Image | Pre | Legend


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


def cell_sentence(e: Entry) -> str:
    """A matrix cell in words: the reproduced figure and its platform (and what it rests on), its
    ratio to the claim, the status, and what the platform made the figure measure where it
    changed that (a host that throttles split locks)."""
    if e.reproduced is None:
        text = f"- [{e.label}]; {e.status}"
    else:
        ratio = (f"{analysis.fmt(e.ratio_to_claim)} of the claimed {unit(e.claimed, e.unit)}"
                 if e.ratio_to_claim else "no claimed figure")
        rests = f" ({e.rests_on})" if e.rests_on else ""
        text = f"{unit(e.reproduced, e.unit)} [{e.label}{rests}]; {ratio}; {e.status}"
    if e.platform_facts.get("caveat"):  # the platform changed what the figure measures (the note says how)
        text += f": {e.platform_facts['caveat']}"
    return text


def matrix_cell(e: Entry) -> Cell:
    """A compact cell: the reproduced figure and its ratio to the claim (x claim), coloured by
    status (a cell with no figure: the status); the sentence and the entry's note on hover."""
    if e.reproduced is None:
        text = e.status
    else:
        text = unit(e.reproduced, e.unit) + (f" ({analysis.fmt(e.ratio_to_claim)} x claim)" if e.ratio_to_claim
                                             else "")
    return Cell(text, status=e.status, link=anchor(e), title=f"{cell_sentence(e)}. {e.note}")


def platform_report(manifest: dict, entries: list[Entry]) -> dict[str, dict]:
    """Per platform of the run, what the report needs of it (label, column, modelled,
    lines), as the platform wrote it into manifest.json at run time (Platform.report_facts).
    A run made before that: its column from what its entries rest on, its lines one per
    platform from the manifest's facts; modelled is then left to fidelity.rows."""
    written = manifest.get("platform_report")
    if isinstance(written, dict) and written:
        return written
    out: dict[str, dict] = {}
    for e in entries:
        col = LEGACY_COLUMN.get(e.rests_on or "", LEGACY_LAST)
        info = out.setdefault(e.platform, {"label": e.label, "column": col, "modelled": None, "lines": []})
        info["column"] = min(info["column"], col)
    for name, facts in (manifest.get("platforms") or {}).items():
        if facts and name in out:
            out[name]["lines"] = [_legacy_line(out[name]["label"], facts)]
    return out


def _legacy_line(label: str, facts: dict) -> str:
    """One line of a platform's manifest facts: its plain values, and the keys of the rest
    (facts that are all nested, such as one set per architecture: their keys)."""
    if all(isinstance(v, dict) for v in facts.values()):
        return f"{label}: {', '.join(map(str, facts))} (manifest.json)"
    plain = [f"{k} {v}" for k, v in facts.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    nested = [f"{k}: {', '.join(map(str, v))}" for k, v in facts.items() if isinstance(v, dict) and v]
    return f"{label}: " + ("; ".join(plain + nested) or "(manifest.json)")


def platforms_in(entries: list[Entry], info: dict[str, dict] | None = None) -> list[str]:
    """The platforms of the run in column order (Platform.column), then in run order."""
    seen = list(dict.fromkeys(e.platform for e in entries))
    info = info or {}
    return sorted(seen, key=lambda p: (info.get(p, {}).get("column", LEGACY_LAST), seen.index(p)))


def claim_matrix(entries: list[Entry], summary: dict, info: dict[str, dict] | None = None) -> Section:
    cols = platforms_in(entries, info)
    labels = {e.platform: e.label for e in entries}
    meanings = {e.platform: e.platform_meaning for e in entries}
    by = {(e.id, e.platform): e for e in entries}
    rows = []
    firsts: dict[str, Entry] = {}
    for e in entries:
        firsts.setdefault(e.id, e)
    ordered = sorted(firsts.values(), key=_catalogue_number)
    for first in ordered:
        rows.append([Cell(first.catalogue), Cell(first.id, link=anchor(first))] +
                    [matrix_cell(by[first.id, p]) if (first.id, p) in by else Cell("-") for p in cols])
    words = [Cell(f"{first.catalogue} {first.id} on {by[first.id, p].label}: {cell_sentence(by[first.id, p])}. "
                  f"{by[first.id, p].note}", link=anchor(by[first.id, p]))
             for first in ordered for p in cols if (first.id, p) in by]
    return Section("Claim matrix", "claim-matrix", [
        Table(["claim", "experiment"] + [labels[p] for p in cols], rows, id="claim-matrix"),
        Legend([(s, analysis.STATUS_MEANING[s]) for s in analysis.STATUSES]),
        Para("Each cell: the reproduced headline, and reproduced / claimed (x claim) where the post gives a "
             "figure, coloured by status. Hover a cell (or open the list below) for its sentence: the platform, "
             "what the figure rests on (a measurement, a functional count, or the model's prediction, input - "
             "the claim's own figures are machine parameters - or fitted - a parameter was fitted to this "
             "claim), the status and the entry's note (its criterion or reason).", small=True),
        Bullets([Cell(f"{labels[p]}: {meanings[p]}" if meanings[p] else labels[p]) for p in cols]),
        Bullets(words, fold="Each cell in words"),
        Para("Counts: " + ", ".join(f"{n} {s}" for s, n in summary.get("counts", {}).items())),
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

def platform_lines(manifest: dict, entries: list[Entry] | None = None) -> list[str]:
    """What each platform that produced an entry ran on, in its own words (the lines
    Platform.report_lines wrote into the manifest; the manifest has the rest), by name."""
    info = platform_report(manifest, entries or [])
    return [line for name in sorted(info) for line in info[name].get("lines", [])]


def citation(manifest: dict, manifest_sha256: str) -> str:
    g = manifest.get("git", {})  # (fields a run always writes; the schema makes none of them required)
    return (f"trapline developers. trapline {manifest.get('trapline', '?')} (commit {g.get('commit', '?')[:12]}"
            f"{', dirty tree' if g.get('dirty') else ''}), run {manifest.get('run_id', '?')}, "
            f"{manifest.get('finished', '?')[:10]}. Reproduction of memory-system measurements; "
            f"manifest.json sha256 {manifest_sha256[:16]}. See CITATION.cff.")


def manifest_sections(manifest: dict, manifest_sha256: str, entries: list[Entry]) -> list[Section]:
    shown = {k: v for k, v in manifest.items() if k != "binaries_sha256"}
    return [Section("Manifest", "manifest", [
                Para("Platforms (all inputs, versions and hashes: manifest.json):"),
                Bullets([Cell(line) for line in platform_lines(manifest, entries)]),
                Para(f"Compilers: {manifest.get('compilers', {})}"),
                Pre("manifest.json (without the binaries' hashes)", json.dumps(shown, indent=1).splitlines())]),
            Section("How to cite", "how-to-cite", [Para(citation(manifest, manifest_sha256))])]


def modelled(info: dict[str, dict]) -> set[str] | None:
    """The run's platforms whose figures are modelled (None: a run that did not say; fidelity.rows decides)."""
    if any(i.get("modelled") is None for i in info.values()):
        return None
    return {p for p, i in info.items() if i.get("modelled")}


def fidelity_section(entries: list[Entry], info: dict[str, dict] | None = None) -> Section | None:
    """The fidelity table of the modelled figures (report/fidelity.py), or None
    when the run has no modelled figure with a claim."""
    rs = fidelity.rows(entries, modelled(info or {}) if info else None)
    if not rs:
        return None
    s = fidelity.summary(rs)
    return Section("Fidelity of the modelled figures", "fidelity", [
        Para(fidelity.EXPLAIN, small=True),
        Bullets([Cell(line, strong=line.startswith("Prediction") and bool(s["breaking_rule"]))
                 for line in fidelity.summary_lines(s)]),
        Table(fidelity.HEADER, [[Cell(c) for c in row] for row in fidelity.table_cells(rs)], id="fidelity")])


def sidebyside_sections(entries: list[Entry], info: dict[str, dict] | None = None) -> list[Section]:
    """The simulators side by side (report/sidebyside.py): an introduction, then one section per
    experiment that two or more modelled platforms ran; none when no experiment did."""
    cs = sidebyside.compare(entries, modelled(info or {}) if info else None, platforms_in(entries, info))
    bounded = {t.id: t for t in bounds.tables(entries, platforms_in(entries, info))}
    if not cs and not bounded:
        return []
    out = [Section("Simulators side by side", "side-by-side", [
        Para(sidebyside.EXPLAIN, small=True),
        Bullets([Cell(f"{c.catalogue} {c.id}: {' beside '.join(c.labels)}: {sidebyside.summary_line(c)}",
                      link=f"side-by-side-{c.id}", strong=any(not r.reasons for r in c.differing()))
                 for c in cs])])]

    def bound_blocks(t: bounds.Bounded) -> list[Block]:
        return [Para(bounds.EXPLAIN, small=True),
                Table(bounds.header(t), [[Cell(x) for x in row] for row in bounds.cells(t)],
                      caption=f"{t.id}: ns per access on {', '.join(t.labels)}, beside the machine's bound"),
                Image(f"plots/{t.id}.bounds.png", f"{t.id}: ns per access and the bound")]
    for t in bounded.values():
        if not any(c.id == t.id for c in cs):
            out.append(Section(f"{t.catalogue} {t.id}: {' beside '.join(t.labels)}", f"side-by-side-{t.id}",
                               bound_blocks(t)))
    for c in cs:
        b: list[Block] = [Table(sidebyside.figure_header(c), [[Cell(x) for x in row]
                                                             for row in sidebyside.figure_cells(c)])]
        if c.counts:
            b.append(Para(sidebyside.summary_line(c)))
            n = len(c.labels)
            b.append(Table(sidebyside.count_header(c),
                           [[Cell(x, strong=differs and i >= 2 + n) for i, x in enumerate(row)]
                            for row, differs in sidebyside.count_cells(c)],
                           caption=f"Counts per operation ({len(c.counts)} rows; beyond "
                                   f"{sidebyside.LIMIT:.0%} in bold)", fold=True))
        lines = sidebyside.difference_lines(c)
        if lines:
            b.append(Bullets([Cell(line, strong=flagged) for line, flagged in lines]))
        if c.notes:
            b.append(Bullets([Cell(n) for n in c.notes]))
        if c.id in bounded:
            b += bound_blocks(bounded[c.id])
        out.append(Section(f"{c.catalogue} {c.id}: {' beside '.join(c.labels)}", f"side-by-side-{c.id}", b))
    return out


def build(summary: dict, manifest: dict, manifest_sha256: str, entries: list[Entry], plots: set[str]) -> Report:
    """The whole report, from the run directory's contents and the plots drawn."""
    sets = "".join(f" --set {k}={v}" for k, v in summary.get("sets", {}).items())
    subtitle = (f"Run {summary.get('run_id', '?')}: {summary.get('command', '?')}"
                f"{' --quick' if summary.get('quick') else ''}{sets}; "
                f"finished {summary.get('finished', '?')}; commit {manifest.get('git', {}).get('describe', '?')}.")
    overview = ([Image("plots/overview.png", "overview"),
                 Para("Headline ratios with a claimed figure: claimed (grey) beside reproduced "
                      "(coloured by status), log scale.", small=True)]
                if "plots/overview.png" in plots else [Para("No headline ratio with a claimed figure in this run.")])
    info = platform_report(manifest, entries)
    fid = fidelity_section(entries, info)
    return Report(f"trapline report: {summary.get('run_id', '?')}", subtitle,
                  [claim_matrix(entries, summary, info), Section("Overview", "overview", overview)]
                  + ([fid] if fid else []) + sidebyside_sections(entries, info)
                  + [experiment_section(e, plots) for e in entries]
                  + manifest_sections(manifest, manifest_sha256, entries))
