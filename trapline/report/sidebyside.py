"""Simulators side by side: for every experiment that two or more
modelled platforms ran (Platform.report_facts' `modelled`, as the run's manifest says),
their headline figures (and the figures both name) with each one's ratio to the first
column's, and per sample group the counts per operation both produce for the same
kernel and machine, side by side by suffix (each entry's `counts_prefix` stripped:
<a>_l1d_misses beside <b>_l1d_misses), with a line for every count where they differ by
more than 25% and why: the reason a lane gives (its `known_differences`), or "no reason
recorded", flagged.

The first platform in column order is the reference (its ratio is 1); the others are
divided by it. Built from entries alone, like report/fidelity.py: the data here, laid
out as a section of the report by report/sections.py (`sidebyside_section`), and
`markdown()` for `./run.sh fidelity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trapline import analysis
from trapline.entry import Entry
from trapline.report import fidelity
from trapline.report.plots import group_label

LIMIT = 0.25          # two counts differ when |other / reference - 1| is beyond this
NOISE = 1e-3          # ... and one of them is at least this many per operation (one event in a thousand
                      # operations: below it, a cold miss or two decide the ratio)
NO_REASON = "no reason recorded"
MAX_LINES = 40        # differing counts listed per experiment (the table has them all)


def ratio(v: float | None, ref: float | None) -> float | None:
    """v / ref; inf for a count the reference does not have (ref 0, v not); None when
    either is missing or both are 0."""
    if v is None or ref is None:
        return None
    if ref == 0:
        return None if v == 0 else math.inf
    return v / ref


def beyond(r: float | None) -> bool:
    """A ratio that says the two differ by more than LIMIT."""
    return r is not None and (math.isinf(r) or abs(r - 1) > LIMIT)


@dataclass
class FigureRow:
    name: str
    unit: str
    values: list[float | None]            # per platform, in the comparison's order

    @property
    def ratios(self) -> list[float | None]:
        return [ratio(v, self.values[0]) for v in self.values]


@dataclass
class CountRow:
    group: str
    suffix: str
    values: list[float | None]            # per operation, per platform
    reasons: list[str] = field(default_factory=list)   # "why [label]", where it differs

    @property
    def ratios(self) -> list[float | None]:
        return [ratio(v, self.values[0]) for v in self.values]

    @property
    def differs(self) -> bool:
        return max((v for v in self.values if v is not None), default=0) >= NOISE and \
            any(beyond(r) for r in self.ratios[1:])


@dataclass
class Comparison:
    """One experiment on two or more modelled platforms."""
    id: str
    catalogue: str
    entries: list[Entry]                  # in column order: the reference first
    figures: list[FigureRow]
    counts: list[CountRow]
    notes: list[str]

    @property
    def labels(self) -> list[str]:
        return [e.label for e in self.entries]

    def differing(self) -> list[CountRow]:
        return [r for r in self.counts if r.differs]


def _matched_groups(entries: list[Entry]) -> tuple[list[tuple[str, list[dict | None]]], list[str]]:
    """The reference's sample groups, each with the other entries' group of the same variant
    and parameters; where the others ran other sizes, the group of the same variant (when
    each has one group of it), said in a note."""
    notes: list[str] = []
    out = []
    by_label = [{group_label(g): g for g in e.groups} for e in entries]
    by_variant = []
    for e in entries:
        vs: dict[str, list[dict]] = {}
        for g in e.groups:
            vs.setdefault(g.get("variant", ""), []).append(g)
        by_variant.append({v: gs[0] for v, gs in vs.items() if len(gs) == 1})
    for g in entries[0].groups:
        label = group_label(g)
        row: list[dict | None] = [g]
        for i, e in enumerate(entries[1:], 1):
            other = by_label[i].get(label)
            if other is None and g.get("variant", "") in by_variant[i] and g.get("variant", "") in by_variant[0]:
                other = by_variant[i][g["variant"]]
                notes.append(f"{label} [{entries[0].label}] is compared with {group_label(other)} [{e.label}] "
                             f"(the same variant; the lanes ran other sizes)")
            row.append(other)
        if any(o is not None for o in row[1:]):
            out.append((label, row))
    return out, notes


def _counts(e: Entry, g: dict | None) -> dict[str, float]:
    return (g or {}).get("counts_per_op") or {} if e.counts_prefix else {}


def _compare(entries: list[Entry]) -> Comparison:
    first = entries[0]
    figures = [FigureRow(f"headline: {first.metric}", first.unit, [e.reproduced for e in entries])]
    named = [{f["name"]: f for f in e.figures} for e in entries]
    for f in first.figures:
        if all(f["name"] in n for n in named[1:]):
            figures.append(FigureRow(f["name"], f.get("unit", ""), [n[f["name"]].get("value") for n in named]))
    matched, notes = _matched_groups(entries)
    counts = []
    for label, gs in matched:
        per = [_counts(e, g) for e, g in zip(entries, gs)]
        suffixes = list(dict.fromkeys(s for p in per for s in p))
        for s in suffixes:
            values = [p.get(s) for p in per]
            if sum(v is not None for v in values) < 2 or not any(values):
                continue  # one simulator's count alone, or zero in every one: nothing to set side by side
            row = CountRow(label, s, values)
            if row.differs:
                row.reasons = [f"{e.known_differences[s]} [{e.label}]" for e in entries if e.known_differences.get(s)]
            counts.append(row)
    if not counts:
        without = [e.label for e in entries if not any(g.get("counts_per_op") for g in e.groups)]
        notes.append("no count per operation to set side by side"
                     + (f": {', '.join(without)} recorded none" if without else ": the lanes' groups do not match"))
    return Comparison(first.id, first.catalogue, entries, figures, counts, notes)


def compare(entries: list[Entry], modelled: set[str] | None = None,
            columns: list[str] | None = None) -> list[Comparison]:
    """Every experiment with entries of two or more modelled platforms (fidelity.is_modelled)
    that ran (a figure or sample groups), in catalogue order; each one's entries in
    `columns`' order (the claim matrix's; default: as given)."""
    order = {p: i for i, p in enumerate(columns or [])}
    by: dict[str, list[Entry]] = {}
    for e in entries:
        if fidelity.is_modelled(e, modelled) and (e.reproduced is not None or e.groups):
            by.setdefault(e.id, []).append(e)
    out = []
    for es in by.values():
        if len(es) >= 2:
            es = sorted(es, key=lambda e: (order.get(e.platform, len(order)), es.index(e)))
            out.append(_compare(es))
    return sorted(out, key=lambda c: fidelity._order(c.entries[0]))


# ------------------------------------------------------------ words

def value_text(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    return analysis.fmt(v) + ("x" if unit == "x" else f" {unit}" if unit and unit not in ("count", "none") else "")


def ratio_text(r: float | None) -> str:
    return "-" if r is None else "only here" if math.isinf(r) else f"{analysis.fmt(r)}x"


def figure_header(c: Comparison) -> list[str]:
    return (["figure"] + c.labels
            + [f"{label} / {c.labels[0]}" for label in c.labels[1:]])


def figure_cells(c: Comparison) -> list[list[str]]:
    return [[f.name] + [value_text(v, f.unit) for v in f.values] + [ratio_text(r) for r in f.ratios[1:]]
            for f in c.figures]


def count_header(c: Comparison) -> list[str]:
    return (["sample group", "count per operation"] + c.labels
            + [f"{label} / {c.labels[0]}" for label in c.labels[1:]])


def count_cells(c: Comparison) -> list[tuple[list[str], bool]]:
    """The rows of the counts table, each with whether it differs by more than LIMIT."""
    return [([r.group, r.suffix] + [value_text(v) for v in r.values] + [ratio_text(x) for x in r.ratios[1:]],
             r.differs) for r in c.counts]


def difference_lines(c: Comparison) -> list[tuple[str, bool]]:
    """One line per count that differs by more than LIMIT, with its reason; True where no
    lane recorded one (flagged)."""
    out = []
    for r in c.differing():
        pairs = "; ".join(f"{c.labels[i]} {value_text(v)} against {c.labels[0]} {value_text(r.values[0])} "
                          f"({ratio_text(x)})" for i, (v, x) in enumerate(zip(r.values, r.ratios)) if i and beyond(x))
        why = "; ".join(r.reasons) if r.reasons else f"{NO_REASON.upper()} (known_differences.{r.suffix} on a lane)"
        out.append((f"{r.group}: {r.suffix} per operation differs by more than {LIMIT:.0%}: {pairs}. Why: {why}",
                    not r.reasons))
    if len(out) > MAX_LINES:
        out = out[:MAX_LINES] + [(f"... and {len(out) - MAX_LINES} more (the table has them all)", False)]
    return out


def summary_line(c: Comparison) -> str:
    d = c.differing()
    unexplained = sum(1 for r in d if not r.reasons)
    return (f"{len(c.counts)} counts per operation compared over {len({r.group for r in c.counts})} sample "
            f"group(s); {len(d)} differ by more than {LIMIT:.0%}"
            + (f" ({unexplained} with {NO_REASON})" if unexplained else "") + ".")


EXPLAIN = ("Every experiment that two or more simulators ran: their headline figures and the figures both "
           "name, each beside the first column's with the ratio, then per sample group the counts per "
           "operation both simulators produce for the same kernel and machine (their own counters, by name "
           "without the simulator's prefix). A count that differs by more than "
           f"{LIMIT:.0%} (and is at least {NOISE:g} per operation in one of them) gets a line with the reason a "
           f"lane records (known_differences in its experiment file), or '{NO_REASON}'.")


def markdown(entries: list[Entry], modelled: set[str] | None = None, columns: list[str] | None = None) -> str:
    """The side-by-side tables and lines as markdown (./run.sh fidelity)."""
    cs = compare(entries, modelled, columns)
    if not cs:
        return "No experiment ran on two or more simulators in these runs.\n"
    esc = lambda t: t.replace("|", "\\|")  # noqa: E731

    def table(header: list[str], rows: list[list[str]]) -> list[str]:
        return (["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
                + ["| " + " | ".join(map(esc, r)) + " |" for r in rows])
    out = []
    for c in cs:
        out += [f"### {c.catalogue} {c.id}: {' beside '.join(c.labels)}", ""]
        out += table(figure_header(c), figure_cells(c)) + [""]
        if c.counts:
            out += [summary_line(c), ""]
            out += table(count_header(c), [r for r, _ in count_cells(c)]) + [""]
        out += [f"- {line}" for line, _ in difference_lines(c)] + [f"- {n}" for n in c.notes]
        out.append("")
    return "\n".join(out)
