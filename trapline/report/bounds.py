"""The figures an experiment bounds (its `bounds:`: the machine's Little's-law time per access,
trapline.machine.Machine.little_ns) on every platform that ran it, beside the bound: one table per
such experiment in "Simulators side by side", with a plot (plots.plot_bounds). The host is in it
too: another CPU, real time, where the simulators are the machine.

Built from entries alone (their `bounds` and figures), like report/sidebyside.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from trapline import analysis
from trapline.entry import Entry


@dataclass
class Bounded:
    """One experiment's bounded figures: rows of (figure, value per entry, bound)."""
    id: str
    catalogue: str
    entries: list[Entry]
    rows: list[tuple[str, list[float | None], float]]

    @property
    def labels(self) -> list[str]:
        return [e.label for e in self.entries]


def tables(entries: list[Entry], columns: list[str] | None = None) -> list[Bounded]:
    """Every experiment whose entries carry bounds, with each entry that has a figure of them, in
    `columns`' platform order (default: as given)."""
    order = {p: i for i, p in enumerate(columns or [])}
    by: dict[str, list[Entry]] = {}
    for e in entries:
        if e.bounds and any(f.get("name") in e.bounds and f.get("value") is not None for f in e.figures):
            by.setdefault(e.id, []).append(e)
    out = []
    for es in by.values():
        es = sorted(es, key=lambda e: (order.get(e.platform, len(order)), es.index(e)))
        bounds = es[0].bounds
        named = [{f["name"]: f.get("value") for f in e.figures} for e in es]
        rows = [(name, [n.get(name) for n in named], b) for name, b in bounds.items()]
        out.append(Bounded(es[0].id, es[0].catalogue, es, rows))
    return out


def header(t: Bounded) -> list[str]:
    return ["figure"] + t.labels + ["Little's-law bound"] + [f"{label} / bound" for label in t.labels]


def cells(t: Bounded) -> list[list[str]]:
    def fmt(v):
        return "-" if v is None else analysis.fmt(v)
    return [[name] + [fmt(v) for v in values] + [fmt(b)]
            + [f"{analysis.fmt(v / b)}x" if v is not None and b else "-" for v in values]
            for name, values, b in t.rows]


EXPLAIN = ("The machine's Little's-law bound beside each platform's figure: the time per access when the "
           "lines come from the level named at its latency with that many misses in flight (the chains of a "
           "chase, else as many as the L1D's MSHRs allow), from the machine description the simulators ran. "
           "A figure under its bound comes from a prefetcher that fetched ahead of the misses (its MSHRs are "
           "the L2's), over it from what the bound leaves out (the loop, TLB walks, a window or a channel that "
           "binds first). The host is another CPU: its figures are its own, beside the machine's for order.")
