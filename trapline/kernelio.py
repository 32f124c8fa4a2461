"""Parse the kernels' machine-readable lines (format: kernels/common/trapline.h).

    TL exp=<id> kind=<kind> key=value ...

Everything else on the output is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Keys of a sample line that describe the measurement, not the group it belongs to.
SAMPLE_KEYS = {"exp", "kind", "variant", "rep", "ops", "ns", "user_ns", "sys_ns", "iters", "cycles"}
# The timer of samples whose times a simulator computed (its cycles / clock), not the
# kernel's clock: no tick for a sample to be short against (analysis.timer_warnings).
MODELLED_TIMER = {"source": "simulator", "modelled": True, "res_ns": 0, "min_delta_ns": 0}


@dataclass
class KernelOutput:
    timer: dict = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    counts: list[dict] = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)
    skips: list[dict] = field(default_factory=list)

    def extend(self, other: "KernelOutput") -> None:
        if other.timer:
            self.timer = other.timer
        for name in ("samples", "checks", "counts", "infos", "skips"):
            getattr(self, name).extend(getattr(other, name))


def _value(v: str):
    try:
        return int(v, 10)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def parse_line(line: str) -> dict | None:
    if not line.startswith("TL "):
        return None
    rec = {}
    for tok in line[3:].split():
        k, sep, v = tok.partition("=")
        if sep:
            rec[k] = _value(v) if k not in ("variant", "value", "exp", "kind") else v
    return rec if "kind" in rec else None


def parse(text: str) -> KernelOutput:
    out = KernelOutput()
    for line in text.splitlines():
        rec = parse_line(line.rstrip("\r"))
        if rec is None:
            continue
        kind = rec["kind"]
        if kind == "timer":
            out.timer = rec
        elif kind == "sample":
            if not isinstance(rec.get("ops"), int) or not isinstance(rec.get("ns"), int) or rec["ops"] <= 0:
                continue
            out.samples.append(rec)
        elif kind == "check":
            out.checks.append(rec)
        elif kind == "count":
            rec["value"] = _value(str(rec.get("value")))
            out.counts.append(rec)
        elif kind == "skip":
            out.skips.append(rec)
        else:
            out.infos.append(rec)
    return out


def group_key(sample: dict) -> tuple:
    """Samples of the same variant with the same parameters form one group."""
    params = tuple(sorted((k, v) for k, v in sample.items() if k not in SAMPLE_KEYS))
    return (sample.get("variant", ""),) + params
