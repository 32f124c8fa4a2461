"""How long a run should take on this machine, and how long is left: the "expected:
about N min" line a run starts with and the time left on each progress line.

What an entry costs, best source first:
  - what the same lane took in the same mode on this machine before: the cache's
    costs.json, written after every entry of every run (Costs.record);
  - the lane's reference cost, measured on a 2-vCPU machine and kept with the
    experiment (`cost_s: {full: S, quick: S}` in its experiment.yaml), scaled by how much
    faster or slower this machine was on the lanes it has a record of;
  - its platform's default (Platform.expected_seconds).
A guest Linux that is not in the cache yet adds its build (Image builders'
`to_build`; the reference figure is the arch table's Linux.build_s). The kernels of
the run's guests are built in the background while the lanes that need no guest run
(runner.execute), so their build overlaps those lanes.

    costs = Costs.load()
    plan = Estimate(costs, steps_with_seconds, kernels_s)   # plan.total, plan.words()
    left = plan.left({key: seconds it took, ...}, kernels_left)   # scaled by the pace so far
"""

from __future__ import annotations

import json
import os
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path

from trapline import paths

FILE = "costs.json"


def mode(quick: bool) -> str:
    return "quick" if quick else "full"


def duration(s: float) -> str:
    """'45 s', '3.5 min', '1 h 05 min'."""
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min" if s < 600 else f"{s / 60:.0f} min"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


@dataclass
class Costs:
    """Seconds per key on this machine: '<id>.<platform>.<full|quick>' for an entry,
    'linux.<arch>' for a guest kernel's build. Kept in the cache (one file, rewritten
    atomically); a file that cannot be read or written is no record at all."""
    path: Path | None
    seconds: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the build ahead records too

    @classmethod
    def load(cls, path: Path | None = None) -> "Costs":
        path = path or paths.cache_root() / FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        good = {k: float(v) for k, v in data.items()
                if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e7}
        return cls(path, good)

    def get(self, key: str) -> float | None:
        return self.seconds.get(key)

    def record(self, key: str, seconds: float) -> None:
        """Keep seconds for key, in this object and in the file (merged with what other runs
        wrote there meanwhile)."""
        with self.lock:
            self.seconds[key] = round(float(seconds), 1)
            if self.path is not None:
                self._write(key)

    def _write(self, key: str) -> None:
        on_disk = Costs.load(self.path).seconds
        on_disk[key] = self.seconds[key]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(on_disk, indent=1, sort_keys=True) + "\n")
                tmp.replace(self.path)
            finally:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass  # a cache the user cannot write: estimates from the reference table only


def entry_key(exp_id: str, platform: str, quick: bool) -> str:
    return f"{exp_id}.{platform}.{mode(quick)}"


@dataclass
class Step:
    """One entry of the plan: its key, its reference cost, and whether it can run while the
    guest kernels build (it needs no guest and measures no real time)."""
    key: str
    reference: float
    beside_build: bool = False


class Estimate:
    """A run's expected duration from its steps (in the order they run) and the guest
    kernels still to build (seconds, built beside the steps marked beside_build)."""

    def __init__(self, costs: Costs, steps: list[Step], kernels_s: float = 0.0):
        self.costs = costs
        self.steps = steps
        self.kernels_s = kernels_s
        pairs = [(costs.get(s.key), s.reference) for s in steps if s.reference > 0]
        ratios = [c / r for c, r in pairs if c is not None and c > 0]
        # this machine against the reference machine, from the lanes it has a record of
        self.pace = min(4.0, max(0.25, statistics.median(ratios))) if ratios else 1.0
        self.known = sum(1 for s in steps if costs.get(s.key) is not None)
        self.each = {s.key: self.cost(s) for s in steps}
        beside = sum(self.each[s.key] for s in steps if s.beside_build)
        rest = sum(self.each[s.key] for s in steps if not s.beside_build)
        # the kernels build while the beside_build steps run: whichever takes longer
        self.total = max(beside, self.kernels_s) + rest

    def cost(self, s: Step) -> float:
        c = self.costs.get(s.key)
        return c if c is not None else s.reference * self.pace

    def words(self) -> str:
        """'about 12 min on this machine (20 of 27 entries from earlier runs here, ...)'."""
        n = len(self.steps)
        src = (f"{self.known} of {n} entries timed by earlier runs here, the rest from the experiments' "
               f"reference costs" if self.known else "from the experiments' reference costs on 2 vCPUs")
        if self.known and self.known < n and self.pace != 1.0:
            src += f" x {self.pace:.2f} (this machine's pace)"
        if self.kernels_s:
            src += f"; guest kernels to build first: about {duration(self.kernels_s)}, beside the lanes that need none"
        return f"about {duration(self.total)} on this machine ({src})"

    def left(self, took: dict[str, float], kernels_left: float = 0.0) -> float:
        """Seconds left once the steps in took (key -> the seconds each took) have run: the
        rest's estimates, scaled by how the finished steps kept to theirs, plus what is left
        of the kernels' build beyond the steps that run beside it."""
        spent_est = sum(self.each[k] for k in took if k in self.each)
        spent = sum(v for k, v in took.items() if k in self.each)
        rest = [s for s in self.steps if s.key not in took]
        scale = min(3.0, max(0.33, spent / spent_est)) if spent_est > 30 and spent > 30 else 1.0
        beside = sum(self.each[s.key] for s in rest if s.beside_build) * scale
        other = sum(self.each[s.key] for s in rest if not s.beside_build) * scale
        return max(beside, kernels_left) + other
