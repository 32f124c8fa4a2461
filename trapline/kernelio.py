"""Parse the kernels' machine-readable lines (format: kernels/common/trapline.h).

    TL exp=<id> kind=<kind> key=value ...

Everything else on the output is ignored.
"""

from __future__ import annotations

import math

import time
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
    """A field's value: a whole number, a finite number, else the text (nan and inf stay
    text: a run file holds finite numbers only, trapline/runfiles.py)."""
    try:
        return int(v, 10)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return v
    return f if math.isfinite(f) else v


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


# what a sample is besides its parameters, for the counts a simulator pairs with it
NOT_PARAMS = ("exp", "kind", "rep", "ns", "user_ns", "sys_ns", "cycles", "iters")


def pair_regions(out: KernelOutput, regions: list[dict], what: str, mismatch: str, ns, counts, timer: dict
                 ) -> str | None:
    """Give sample i a simulator's region i: its time (ns(region), at least 1 ns), its
    cycles, and its counts (counts(region, ops): {name: value}) as counters with the
    sample's parameters (repetitions collapse to their median); the kernel's clock is not
    what times a sample (out.timer = timer). An error message if they do not pair one to
    one: "WHAT: <mismatch, with {regions} and {samples}>". The model's and gem5's lanes."""
    if len(regions) != len(out.samples):
        return f"{what}: " + mismatch.format(regions=len(regions), samples=len(out.samples))
    out.timer = dict(timer)
    for s, g in zip(out.samples, regions):
        s["ns"] = max(1, round(ns(g)))
        s["cycles"] = g["cycles"]
        s.pop("user_ns", None)
        s.pop("sys_ns", None)
        params = {k: v for k, v in s.items() if k not in NOT_PARAMS}
        for name, value in counts(g, s["ops"]).items():
            out.counts.append({**params, "kind": "count", "name": name, "value": value})
    return None


def group_key(sample: dict) -> tuple:
    """Samples of the same variant with the same parameters form one group."""
    params = tuple(sorted((k, v) for k, v in sample.items() if k not in SAMPLE_KEYS))
    return (sample.get("variant", ""),) + params


class SampleWatch:
    """A kernel's samples as they arrive, for a command that runs under a time limit
    (host lanes): each is counted (and logged when samples are slow, so a long lane
    shows progress), the time the next one will take is estimated from those measured
    (the longest gap between two sample lines, or the first sample's own time), and
    `stop()` says when the next cannot end before the limit: the command is then
    stopped at once with the samples it has, rather than killed at the limit with a
    sample half done. `note()` says, for the entry, what a command that ran out of
    time reports. For on_line= and stop= of proc.run_command."""

    LOG_EVERY_S = 5.0   # a sample line is logged when this long has passed since the last log

    def __init__(self, label: str, limit: float, log=None, clock=time.monotonic):
        self.label, self.limit, self.log, self.clock = label, limit, log, clock
        self.t0 = self.last_log = clock()
        self.arrivals: list[float] = []
        self.first_ns: int | None = None
        self.stopped_early = False

    def line(self, line: str) -> None:
        rec = parse_line(line.rstrip("\r\n"))
        if rec is None or rec["kind"] != "sample" or not isinstance(rec.get("ns"), int):
            return
        now = self.clock()
        self.arrivals.append(now)
        if self.first_ns is None:
            self.first_ns = rec["ns"]
        if self.log and now - self.last_log >= self.LOG_EVERY_S:
            self.last_log = now
            self.log(f"    sample {len(self.arrivals)} ({rec.get('variant', '')}): {rec['ns'] / 1e9:.1f} s, "
                     f"{now - self.t0:.0f} s of {self.limit:.0f} s")

    def next_sample_s(self) -> float | None:
        """The time the next sample is expected to take (None before the first)."""
        if not self.arrivals:
            return None
        gaps = [b - a for a, b in zip(self.arrivals, self.arrivals[1:])]
        return max(gaps[-3:] + [self.first_ns / 1e9])

    def stop(self) -> bool:
        """True once the next sample would end after the limit (then it is not started)."""
        nxt = self.next_sample_s()
        if nxt is not None and self.arrivals[-1] + nxt > self.t0 + self.limit:
            self.stopped_early = True  # the sample under way began at the last arrival
        return self.stopped_early

    def note(self) -> str:
        """For the entry: the command ran out of time and what it reports."""
        n = len(self.arrivals)
        each = f"each took about {self.next_sample_s():.0f} s" if n else "none arrived"
        if self.stopped_early:
            return (f"{self.label} was stopped after {n} sample{'s' if n != 1 else ''} ({each}): another would "
                    f"have ended after its {self.limit:.0f} s limit; the figures use the samples it took.")
        return (f"{self.label} ran out of time ({self.limit:.0f} s) after {n} sample{'s' if n != 1 else ''} "
                f"({each}); the figures use the samples it took.")
