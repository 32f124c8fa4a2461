"""The fidelity table: every quantitative figure a post gives that a
simulated lane models, modelled against claimed, with |log2(modelled / claimed)| per
row and the median and the worst over the rows.

A row is an entry's headline or one of its figures, on a simulated platform (one whose
times are predicted: the timing model; the run's manifest says which), with a numeric claimed figure and a modelled
value, both positive (a log needs them). |log2| is 0 for a match, 1 for a factor of
two either way. Each headline row also says what it rests on (prediction, input,
fitted) and whether it keeps the rule: a `prediction` headline is within
2x of its claim or its entry says `differs` (with the reason, in its note).

Built from entries alone, like the rest of the report: the rows and lines here, laid out
as a section of the report by report/sections.py (`fidelity_section`), and `markdown()` for `./run.sh fidelity [RUN ...]` and docs/methodology.md.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from trapline import analysis
from trapline.entry import Entry

# what a modelled figure rests on (Entry.rests_on: the machine's provenance), as opposed to
# a measurement or a functional count: which entries are modelled, where a run does not say
MODELLED_BASES = ("prediction", "input", "fitted")
WITHIN = 1.0                   # |log2| of a factor of two


@dataclass
class Row:
    catalogue: str
    id: str
    platform: str
    kind: str              # "headline" or "figure"
    name: str
    unit: str
    claimed: float
    modelled: float
    rests_on: str | None   # the entry's (its headline's) rests_on
    status: str | None     # the headline's status; None for a figure

    @property
    def log2(self) -> float:
        return abs(math.log2(self.modelled / self.claimed))

    @property
    def keeps_rule(self) -> bool:
        """A prediction headline is within 2x of its claim or reported differs."""
        if self.kind != "headline" or self.rests_on != "prediction":
            return True
        return self.log2 <= WITHIN or self.status == "differs"


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _order(e: Entry) -> tuple[int, str]:
    digits = "".join(c for c in (e.catalogue or "") if c.isdigit())
    return (int(digits) if digits else 10 ** 6, e.id)


def is_modelled(e: Entry, modelled: set[str] | None) -> bool:
    """Whether an entry's figures are modelled. modelled: the platforms whose figures are
    (as the run's platforms said, report/sections.py); None: an entry whose rests_on is one
    of MODELLED_BASES."""
    return e.platform in modelled if modelled is not None else e.rests_on in MODELLED_BASES


def rows(entries: list[Entry], modelled: set[str] | None = None) -> list[Row]:
    """The table's rows, in catalogue order: each modelled entry's headline, then its figures.
    modelled: as is_modelled takes it."""
    out = []
    for e in sorted((e for e in entries if is_modelled(e, modelled)), key=_order):
        c, m = _num(e.claimed), _num(e.reproduced)
        if c and m:
            out.append(Row(e.catalogue, e.id, e.platform, "headline", e.metric, e.unit, c, m, e.rests_on, e.status))
        for f in e.figures:
            c, m = _num(f.get("claimed")), _num(f.get("value"))
            if c and m:
                out.append(Row(e.catalogue, e.id, e.platform, "figure", f["name"], f.get("unit", ""), c, m,
                               e.rests_on, None))
    return out


def summary(rs: list[Row]) -> dict:
    """Median and worst |log2| over all rows and over the headlines; the rows that break the rule."""
    def stats(sub: list[Row]) -> dict:
        if not sub:
            return {"n": 0, "median": None, "worst": None, "worst_row": None}
        worst = max(sub, key=lambda r: r.log2)
        return {"n": len(sub), "median": statistics.median(r.log2 for r in sub), "worst": worst.log2,
                "worst_row": f"{worst.id}: {worst.name}"}
    heads = [r for r in rs if r.kind == "headline"]
    return {"all": stats(rs), "platforms": {p: stats([r for r in rs if r.platform == p])
                                            for p in dict.fromkeys(r.platform for r in rs)}, "headlines": stats(heads), "timed": stats([r for r in rs if r.unit != "count"]),
            "within_2x": sum(r.log2 <= WITHIN for r in rs),
            "fitted_headlines": sorted(r.id for r in heads if r.rests_on == "fitted"),
            "breaking_rule": [f"{r.id} [{r.platform}]" for r in heads if not r.keeps_rule]}


def _f(v: float) -> str:
    return analysis.fmt(v)


def _u(v: float, unit: str) -> str:
    """A figure with its unit: 43.1x, 370 ns, 1.00 (a count)."""
    return _f(v) + ("x" if unit == "x" else "" if unit in ("", "count") else f" {unit}")


HEADER = ["claim", "experiment", "figure", "claimed", "modelled", "modelled / claimed", "|log2|", "rests on",
          "status"]


def table_cells(rs: list[Row]) -> list[list[str]]:
    return [[r.catalogue, f"{r.id} [{r.platform}]", ("headline: " if r.kind == "headline" else "") + r.name,
             _u(r.claimed, r.unit), _u(r.modelled, r.unit), _f(r.modelled / r.claimed), f"{r.log2:.2f}",
             r.rests_on or "-" if r.kind == "headline" else "",
             (r.status or "") + ("" if r.keeps_rule else " (BREAKS the 2x rule)")] for r in rs]


def summary_lines(s: dict) -> list[str]:
    def one(what: str, d: dict) -> str:
        if not d["n"]:
            return f"{what}: none"
        return (f"{what}: {d['n']} row{'' if d['n'] == 1 else 's'}, median |log2| {d['median']:.2f} (x{2 ** d['median']:.2f}), "
                f"worst {d['worst']:.2f} (x{2 ** d['worst']:.2f}, {d['worst_row']})")
    return [one("All figures", s["all"]), one("Headlines", s["headlines"]),
            one("Times and ratios (without the counts: traps, calls or reads per operation)", s["timed"])] + [
            one(f"On {p}", d) for p, d in s.get("platforms", {}).items()] + [
            f"Within a factor of two: {s['within_2x']} of {s['all']['n']} rows.",
            "Fitted headlines: " + (", ".join(s["fitted_headlines"]) or "none") + ".",
            "Prediction headlines beyond 2x and not reported differs: " + (", ".join(s["breaking_rule"]) or "none")
            + "."]


EXPLAIN = ("Every figure with a claimed number that a simulated lane models: the headline, then the entry's "
           "secondary figures. |log2(modelled / claimed)| is 0 for a match and 1 for a factor of two either way. "
           "'rests on' is the headline's (computed from the machine's provenance): prediction, input (the "
           "claim's own figures are machine parameters) or fitted. A prediction headline must be within 2x of "
           "its claim or be reported differs, with the reason in its note.")


def markdown(entries: list[Entry], modelled: set[str] | None = None) -> str:
    """The table and its summary as markdown (./run.sh fidelity; docs/methodology.md)."""
    rs = rows(entries, modelled)
    if not rs:
        return "No modelled figure with a claimed number in these runs.\n"
    esc = lambda t: t.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(c) for c in HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in table_cells(rs)]
    return "\n".join(lines + [""] + [f"- {x}" for x in summary_lines(summary(rs))]) + "\n"


def merge(runs: list[list[Entry]]) -> list[Entry]:
    """Entries of several runs, the later run's entry winning for the same experiment and platform."""
    by: dict[tuple[str, str], Entry] = {}
    for entries in runs:
        for e in entries:
            by[(e.id, e.platform)] = e
    return list(by.values())
