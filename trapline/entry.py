"""One experiment on one platform, as the run records it: entries/<id>.<platform>.json.

The entry carries everything the report needs (the platform's label and meaning, the
plot spec and the claim's source, both taken from the experiment at run time), so a
report is a pure function of the run directory: it never reads today's experiment
YAMLs or the platform classes. analysis.judge gives the figures and the status;
build() adds who ran what where, and the sentences on what a modelled figure rests on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# judged by analysis.judge; always present
_JUDGED = ("metric", "unit", "claimed", "reproduced", "status", "note", "figures", "checks", "groups", "warnings")
# read by the report from the entry only; summary.json keeps the keys it had without them
REPORT_ONLY = ("platform_meaning", "times_are_real", "plot", "source", "counts_prefix", "known_differences", "bounds")


@dataclass
class Entry:
    """A finished experiment on one platform (to_dict() is the JSON written to entries/)."""
    id: str
    platform: str
    catalogue: str
    description: str
    metric: str
    unit: str
    claimed: float | None
    reproduced: float | None
    status: str
    note: str
    ratio_to_claim: float | None = None
    rests_on: str | None = None      # measurement, functional count, or the model's prediction / input / fitted
    figures: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    planned: dict[str, str] = field(default_factory=dict)
    platform_label: str = ""
    platform_meaning: str = ""       # how this platform's figures must be read
    times_are_real: bool = True      # False: its clock is emulation time, never a prediction
    plot: dict[str, Any] = field(default_factory=dict)    # the experiment's plot spec for this platform
    source: dict[str, str] = field(default_factory=dict)  # the claim's post and its original machine
    commands: list[list[str]] = field(default_factory=list)
    seconds: float = 0.0
    binaries: dict[str, str] = field(default_factory=dict)
    platform_facts: dict[str, Any] = field(default_factory=dict)
    # the prefix of the platform's own counts (its name: model_l1d_misses) when its sample
    # groups carry counts_per_op {suffix: count per operation} (analysis.counts_per_op)
    counts_prefix: str | None = None
    # the lane's known_differences: {count suffix: why this simulator's count differs from
    # another's for the same kernel and machine} (report/sidebyside.py)
    known_differences: dict[str, str] = field(default_factory=dict)
    # the experiment's bounds (its `bounds:`): {figure name: the machine's Little's-law ns per access}
    # (report/bounds.py), with the machine and --set of the lane when it runs that machine
    bounds: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)   # keys this version does not know, kept as read

    @property
    def key(self) -> str:
        return f"{self.id}.{self.platform}"

    @property
    def label(self) -> str:
        return self.platform_label or self.platform

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        if out["ratio_to_claim"] is None:  # absent, as analysis.judge leaves it, when there is no ratio
            del out["ratio_to_claim"]
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Entry":
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in d.items() if k in names}
        return cls(**known, extra={k: v for k, v in d.items() if k not in names})


def source_of(exp) -> dict[str, str]:
    """The claim's post and the machine it was measured on (experiment YAML: source, original_machine)."""
    s = exp.data.get("source", {})
    return {"title": s.get("title", ""), "author": s.get("author", ""), "date": str(s.get("date", "")),
            "original_machine": str(exp.data.get("original_machine", ""))}


def provenance_note(catalogue: str, facts: dict) -> str:
    """What a model's figure rests on: machine parameters fitted to this claim, taken from
    its figures, or with no source at all (the machine descriptions say which)."""
    words = (("calibrated_on_this_claim",
              f"Machine parameters fitted to this claim ({catalogue}): {{}}; a modelled figure that "
              f"depends on them is not an independent reproduction of it, only a check of the "
              f"model's mechanics."),
             ("from_this_claim",
              f"Machine parameters taken from this claim's own figures ({catalogue}, not fitted): {{}}; "
              f"the model adds what decides which of them each access pays."),
             ("assumed",
              "Machine parameters with no source found (assumed; the machine description gives "
              "the reasoning for each): {}."))
    return "".join(" " + w.format(", ".join(facts[k])) for k, w in words if facts.get(k))


def bounds_of(exp, facts: dict) -> dict[str, float]:
    """The experiment's Little's-law bounds on its machine (experiment `bounds:`), by figure name; with
    the lane's --set when the lane ran that machine (facts: its platform facts), else as described."""
    spec = exp.data.get("bounds")
    if not spec:
        return {}
    from trapline import machine
    sets = facts.get("machine_sets", []) if facts.get("machine") == spec["machine"] else []
    m = machine.load(spec["machine"], [machine.pair(s) for s in sets])
    return {name: m.little_ns(b["level"], b["in_flight"]) for name, b in spec["figures"].items()}


def counts_prefix(plat_cls) -> str | None:
    """The prefix of a platform's own counts (Platform.counters: <name>_...): its name; None
    for a platform without counters (or a name no platform module has)."""
    return plat_cls.name if getattr(plat_cls, "counters", ()) else None


def build(exp, platform: str, judged: dict, plat_cls=None, prun=None) -> Entry:
    """The entry for `exp` on `platform` from analysis.judge's result, the platform class
    (None for a name no platform module has) and its PlatformRun (None when nothing ran)."""
    spec = exp.platforms.get(platform, {})
    e = Entry(id=exp.id, platform=platform, catalogue=exp.data["catalogue"], description=exp.description,
              **{k: judged[k] for k in _JUDGED}, ratio_to_claim=judged.get("ratio_to_claim"),
              planned=exp.data.get("planned", {}),
              platform_label=getattr(plat_cls, "label", platform),
              platform_meaning=getattr(plat_cls, "meaning", "not available yet"),
              times_are_real=getattr(plat_cls, "times", "real") != "emulation",
              plot=dict(spec.get("plot", {})), source=source_of(exp),
              counts_prefix=judged.get("counts_prefix"), known_differences=dict(spec.get("known_differences", {})))
    times = getattr(plat_cls, "times", None)
    e.rests_on = {"real": "measurement", "emulation": "functional count"}.get(times)
    if prun is not None:
        e.commands, e.seconds, e.binaries, e.platform_facts = (prun.commands, round(prun.seconds, 3),
                                                              prun.binaries, prun.facts)
        e.rests_on = prun.facts.get("rests_on", e.rests_on)
        e.note += provenance_note(e.catalogue, prun.facts)
        if prun.facts.get("measures"):  # what the host made the figure measure (trapline/hostfacts.py)
            e.note += f" This host: {prun.facts['measures']}"
        for note in prun.facts.get("notes", []):  # e.g. a command that ran out of time (kernelio.SampleWatch)
            e.note += f" {note}"
    e.bounds = bounds_of(exp, prun.facts if prun is not None else {})
    return e
