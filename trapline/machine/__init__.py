"""Machine descriptions as typed data: load gem5_configs/machines/<name>.yaml, check
it, and read its numbers in base units.

One YAML file per modelled machine (clock, caches, TLBs, memory and NUMA,
unaligned accesses, locked RMW, software prefetch, traps, SPARC register
windows), read by the QEMU timing model (through the plugin's option table) and by gem5
(trapline/platforms/gem5/machine_json.py writes the typed machine as JSON). The package,
one concept a module:

  units.py       sizes, frequencies, times; parse once into bytes / Hz / cycles (Quantity)
  paths.py       the one dotted-path walker ("numa.latency_ns[0][1]")
  schema.py      machine.schema.json: structure, each number's "x-unit", error sentences
  typed.py       every number of a machine as a Quantity, keyed by path
  provenance.py  source / calibrated / assumed / derived; derived expressions; claim ids
  checks.py      the sentence checks, by component, and validate()
  sets.py        --set overrides, applied once
  options.py     the timing plugin's option table: a machine as its options, and their ranges

A field's kind is written once, as "x-unit" in the schema: adding a number
to the machines is adding it to the schema (and the YAMLs); the typed machine
picks it up.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from trapline import checked
from trapline.machine import options, paths, schema
from trapline.machine.checks import validate
from trapline.machine.paths import PROVENANCE_KEYS
from trapline.machine.provenance import (CLAIMS_PATH, claim_ids, derived_fields, evaluate_derived,
                                         numeric_leaves)
from trapline.machine.provenance import line as _source_line
from trapline.machine.schema import ROOT, SCHEMA_PATH, top_fields
from trapline.machine.sets import Pair, apply_sets, is_machine_key, pair, shown as shown_sets
from trapline.machine.typed import Quantities, build
from trapline.machine.units import (CYCLE_UNITS, FREQ_UNITS, SIZE_UNITS, TIME_UNITS, MachineError, Quantity,
                                    parse_freq, parse_size, parse_time, to_int)
from trapline.paths import MACHINES
from trapline.yamlfile import read_mapping, shown

MACHINES_DIR = MACHINES

__all__ = ["Machine", "MachineError", "Quantity", "top_fields", "pair", "is_machine_key", "load", "load_file", "load_all", "names", "validate",
           "apply_sets", "parse_size", "parse_freq", "parse_time", "to_int", "derived_fields",
           "evaluate_derived", "numeric_leaves", "claim_ids", "MACHINES_DIR", "SCHEMA_PATH", "CLAIMS_PATH", "ROOT",
           "SIZE_UNITS", "FREQ_UNITS", "TIME_UNITS", "CYCLE_UNITS", "PROVENANCE_KEYS"]


@dataclass(frozen=True)
class Machine:
    """One loaded, validated machine: the description as written (`data`, after any
    --set), and its numbers typed once (`quantities`: bytes, Hz, cycles, counts)."""
    name: str
    path: Path
    data: dict
    sets: tuple[str, ...] = field(default=())  # the --set pairs applied, as written ("path=value")
    quantities: Quantities = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self):
        if self.quantities is None:
            object.__setattr__(self, "quantities", build(self.data))

    # -- reading fields
    def raw(self, path: str) -> Any:
        """The field as written (unwrapped from {value, source}), or None."""
        return paths.get(self.data, path)

    def has(self, path: str) -> bool:
        return self.raw(path) is not None

    def quantity(self, path: str) -> Quantity:
        """The typed number at `path` (value in its base unit, kind, text, provenance)."""
        return self.quantities.get(path)

    @property
    def arch(self) -> str:
        return self.data["arch"]

    @property
    def clock_hz(self) -> float:
        return self.quantities.value("clock")

    @property
    def cpi(self) -> float:
        return float(self.raw("cpi"))

    def bytes(self, path: str) -> int:
        return self.quantities.bytes(path)

    def cycles(self, path: str) -> float:
        return self.quantities.cycles(path)

    def icycles(self, path: str) -> int:
        return to_int(self.cycles(path))

    def ways(self, path: str) -> int:
        """Associativity of a cache or TLB at `path` (caches.l1d, tlb.dtlb); 'full' -> entries."""
        a = self.raw(f"{path}.assoc")
        if a != "full":
            return int(a)
        if path.startswith("caches."):
            return self.bytes(f"{path}.size") // self.bytes(f"{path}.line")
        return int(self.raw(f"{path}.entries"))

    def numa_cycles(self) -> list[list[int]]:
        rows = self.data.get("numa", {}).get("latency_ns", [])
        return [[to_int(self.cycles(f"numa.latency_ns[{i}][{j}]")) for j in range(len(row))]
                for i, row in enumerate(rows)]

    def little_ns(self, level: str, in_flight: int | str) -> float:
        """Little's law on this machine: the time per access (ns) of accesses whose lines come from
        `level` (l2, l3 or memory) with `in_flight` misses outstanding ('mshrs': as many as the
        L1D's MSHRs allow; never more than those): the level's load-to-use latency over them."""
        lat = self.cycles("memory.latency" if level == "memory" else f"caches.{level}.latency")
        cap = int(self.raw("caches.l1d.mshrs")) if self.has("caches.l1d.mshrs") else 1
        n = cap if in_flight == "mshrs" else min(int(in_flight), cap)
        return lat / self.clock_hz * 1e9 / n

    @cached_property
    def plugin_args(self) -> tuple[str, ...]:
        """The timing plugin's key=value options for this machine (options.args), mapped once
        per loaded machine: its load's bounds check, every run of a lane and its manifest
        facts read these."""
        return tuple(options.args(self))

    def sources(self) -> dict[str, str]:
        """Every number's provenance, one line each, by dotted path."""
        return {q.path: _source_line(q.provenance) for q in self.quantities.fields.values()}

    # -- views
    def to_dict(self) -> dict:
        """For manifests: what was loaded, the overrides, the plugin arguments, every source."""
        try:
            rel = str(self.path.relative_to(ROOT))
        except ValueError:
            rel = str(self.path)
        return {
            "name": self.name,
            "file": rel,
            "file_sha256": hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path.exists() else None,
            "sets": list(self.sets),
            "arch": self.arch,
            "summary": self.summary(),
            "data": copy.deepcopy(self.data),
            "plugin_args": list(self.plugin_args),
            "sources": self.sources(),
        }

    def rests_on(self, catalogue: str, unused: frozenset[str] | set[str] = frozenset()) -> dict:
        """What a lane's modelled figures rest on, for the claim `catalogue` (E3), as the lane's
        facts: the parameters fitted to this claim (calibrated_on_this_claim), taken from its
        figures (from_this_claim), assumed, and so `rests_on` (fitted, input or prediction).
        unused: the fields the lane's simulator does not read (the model and gem5 each name theirs)."""
        srcs = self.sources()
        # the claim line names the claim first ("E3: ...", "E3 (post): ..."); E1 must not match E10
        calibrated = sorted(k for k, v in srcs.items()
                            if re.match(rf"calibrated: {catalogue}\b", str(v)) and k not in unused)
        # numbers the machine file takes from the claim itself (its own figures, not fitted)
        from_claim = sorted(k for k, v in srcs.items() if k not in unused and not str(v).startswith("calibrated")
                            and re.search(rf"claims\.md {catalogue}\b", str(v)))
        # numbers no source was found for that the simulator reads (docs/machines.md lists them with the reasoning)
        assumed = sorted(k for k, v in srcs.items() if str(v).startswith("assumed:") and k not in unused)
        rests = "fitted" if calibrated else "input" if from_claim else "prediction"
        return {"machine": self.name, "machine_sets": list(self.sets), "machine_file_sha256": self.to_dict().get("file_sha256"),
                "clock_hz": self.clock_hz, "calibrated_on_this_claim": calibrated, "from_this_claim": from_claim,
                "assumed": assumed, "rests_on": rests}

    def summary(self) -> str:
        """One line: the figures that matter for the claims."""
        def cache(lvl):
            p = f"caches.{lvl}"
            a = self.raw(f"{p}.assoc")
            s = f"{lvl.upper()} {self.raw(p + '.size')}/{'full' if a == 'full' else str(a) + 'w'}/{self.raw(p + '.line')}"
            s += f" {self.icycles(p + '.latency')}cy"
            if lvl == "l1d":
                s += " wb" if self.raw(p + ".write") == "write-back" else " wt"
            return s
        levels = [cache(lv) for lv in ("l1i", "l1d", "l2", "l3") if self.has(f"caches.{lv}")]
        if not self.has("caches.l2"):
            levels.append("no L2")
        mem = f"mem {self.raw('memory.latency')} ({self.icycles('memory.latency')}cy)"
        if self.has("memory.channels"):
            mem += (f", {self.raw('memory.channels')} x {self.raw('memory.channel_width')} at "
                    f"{self.raw('memory.transfer_rate')}")
        parts = [f"{self.name} ({self.arch}, {self.raw('clock')}, CPI {self.cpi:g})", ", ".join(levels), mem]
        if "numa" in self.data:
            m = self.data["numa"]["latency_ns"]
            parts.append(f"NUMA {len(m)} nodes {'/'.join(str(paths.unwrap(v)) for v in m[0])}"
                         + (", interleaved" if self.data["numa"]["interleave"] else ""))
        if self.has("core"):
            k = self.raw("core.kind")
            core = (f"out of order, ROB {self.raw('core.rob')} LQ {self.raw('core.load_queue')} SB "
                    f"{self.raw('core.store_buffer')}" if k == "out-of-order" else f"in order, {self.raw('core.on_miss')} on a miss")
            mshrs = "/".join(str(self.raw(f"caches.{lv}.mshrs")) for lv in ("l1d", "l2", "l3")
                             if self.has(f"caches.{lv}.mshrs"))
            pfs = [f"{lv.upper()} {kind}" for lv in ("l1d", "l2") for kind in ("next-line", "adjacent-line", "ip-stride", "stream")
                   if self.raw(f"caches.{lv}.prefetch.{kind}.degree")]
            parts.append(core + (f", MSHRs {mshrs}" if mshrs else "") + "; hw prefetch " + (" + ".join(pfs) or "none"))
        t = f"ITLB {self.raw('tlb.itlb.entries')} DTLB {self.raw('tlb.dtlb.entries')}"
        if self.has("tlb.stlb"):
            t += f" + {self.raw('tlb.stlb.kind')} {self.raw('tlb.stlb.entries')}"
        parts.append(f"{t}, page {self.raw('tlb.dtlb.page')}")
        parts.append("unaligned 2/4/8: " + "/".join(self.raw(f"unaligned.w{w}") for w in (2, 4, 8)))
        if "atomics" in self.data:
            parts.append(f"lock +{self.icycles('atomics.lock_cost')}cy, split lock +{self.icycles('atomics.split_lock_cost')}cy")
        pf = self.raw("prefetch.semantics")
        parts.append(f"prefetch {pf}" + (f" (trap {self.icycles('prefetch.trap_cost')}cy)" if pf == "strong" and self.cycles("prefetch.trap_cost") else ""))
        parts.append(f"trap {self.icycles('traps.cost')}cy")
        if "windows" in self.data:
            parts.append(f"{self.raw('windows.count')} windows, spill/fill {self.icycles('windows.spill_fill_cost')}cy")
        if self.sets:
            parts.append("--set " + " ".join(self.sets))
        return "; ".join(parts)


def report_lines(label: str, machines_facts: dict) -> list[str]:
    """The report's lines for the machines a platform ran (Machine.to_dict() by name, as its
    manifest facts hold them), with the --set values applied and the file's hash."""
    out = []
    for m in machines_facts.values():
        sets = f" with {', '.join(m['sets'])}" if m.get("sets") else ""
        out.append(f"{label} machine: {m.get('summary', m.get('name'))}{sets} "
                   f"({m.get('file')}, sha256 {str(m.get('file_sha256') or '-')[:12]})")
    return out


# ---------------------------------------------------------------- loading

def names(directory: Path = MACHINES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def load_file(path: Path | str, sets: list[Pair] | tuple[Pair, ...] = ()) -> Machine:
    """The machine in `path`, validated, with the --set overrides ((path, value) pairs)
    applied once and validated again."""
    path = Path(path)
    rel = shown(path)
    written = shown_sets(sets)
    # what decides the checks besides their code (trapline.checked): the file, the --set values, the schema
    try:
        key = ("machine", path.stem, path.read_bytes(), "\0".join(written), json.dumps(schema.schema(), sort_keys=True))
    except OSError:
        key = None
    data = checked.recall(*key) if key else None
    known = data is not None
    if not known:
        data = read_mapping(path, MachineError)
    loaded = data  # (apply_sets works on a copy)
    q = build(data) if known else validate(data, rel, stem=path.stem)
    if sets:
        data = apply_sets(data, sets)
        q = build(data) if known else validate(data, f"{rel} with --set {' '.join(written)}", stem=path.stem)
    m = Machine(name=data["name"], path=path, data=data, sets=written, quantities=q)
    try:
        options.check(m)  # the timing plugin's own bounds (options.def), before any work
    except MachineError as e:
        raise MachineError(f"{rel}{' with --set ' + ' '.join(written) if sets else ''}: {e}") from None
    if not known and key:
        checked.remember(*key, data=loaded)  # the file as read, before --set
    return m


def load(name_or_path: str | Path, sets: list[Pair] | tuple[Pair, ...] = ()) -> Machine:
    """A machine by name (gem5_configs/machines/<name>.yaml) or by file path."""
    s = str(name_or_path)
    p = Path(s)
    if "/" in s or s.endswith((".yaml", ".yml")) or (p.exists() and p.is_file()):
        if not p.exists():
            raise MachineError(f"machine file '{s}' does not exist")
        return load_file(p, sets)
    known = names()
    if s not in known:
        raise MachineError(f"unknown machine '{s}'; valid choices: {', '.join(known)} (or a path to a .yaml file)")
    return load_file(MACHINES_DIR / f"{s}.yaml", sets)


def load_all(directory: Path = MACHINES_DIR) -> dict[str, Machine]:
    return {n: load_file(Path(directory) / f"{n}.yaml") for n in names(directory)}
