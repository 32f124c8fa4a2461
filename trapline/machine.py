"""Machine descriptions as data: load gem5_configs/machines/<name>.yaml and check it.

One YAML file per modelled machine (clock, caches, TLBs, memory and NUMA,
unaligned accesses, locked RMW, software prefetch, traps, SPARC register
windows), read by the QEMU timing model (through `plugin_args`) and, later, by
gem5 scripts. The structure is checked by gem5_configs/machine.schema.json; the
rest by checks that read as sentences and name the field ("caches.l1d.line
needs to be a power of two (got 48B)").

Units are written out and parsed here:
  sizes        B, kB, KB, KiB, MB, MiB, GB, GiB   kB = KiB = 1024 bytes, as CPU
                                                  manuals write it (not 1000)
  frequencies  Hz, kHz, MHz, GHz
  times        ps, ns, us, ms, cycles (or cycle)  converted to cycles with the clock

Every number carries its provenance: a group's `source` covers its fields, and a
field written as {value, source} has its own. `source: calibrated` needs a
`claim` ("E2: ..." naming the shared/claims.md entry and the figure fitted to);
`source: derived` needs `from` (an expression over other fields, e.g. "2 *
memory.latency", that the value must equal) and `basis` (the citation for the
formula); `source: assumed` needs a `why`. A --set on a field that a derived
number reads recomputes it. A --set override replaces a field's
provenance with the override itself, so a manifest never credits a datasheet
with a number the user typed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from trapline.experiment import _schema_message as experiment_schema_message, _where
from trapline.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
MACHINES_DIR = ROOT / "gem5_configs" / "machines"
SCHEMA_PATH = ROOT / "gem5_configs" / "machine.schema.json"
CLAIMS_PATH = ROOT.parent / "shared" / "claims.md"

SIZE_UNITS = {"B": 1, "kB": 1024, "KB": 1024, "KiB": 1024, "MB": 1024 ** 2, "MiB": 1024 ** 2,
              "GB": 1024 ** 3, "GiB": 1024 ** 3}
FREQ_UNITS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
TIME_UNITS = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3}
CYCLE_UNITS = ("cycles", "cycle")
PROVENANCE_KEYS = ("source", "claim", "why", "note", "from", "basis")
TEXT_KEYS = {"name", "description", "arch", "claims", "note", "source", "claim", "why", "from", "basis", "replacement",
             "write", "inclusion", "kind", "semantics", "w2", "w4", "w8", "interleave"}

_QTY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


class MachineError(UsageError):
    """A machine description (or a --set on it) that does not validate; names the field."""


# ---------------------------------------------------------------- units

def _quantity(text: Any, kind: str, units, where: str) -> tuple[float, str]:
    if isinstance(text, bool) or text is None:
        raise MachineError(f"{where}: needs a {kind} with its unit, not {text!r}")
    if isinstance(text, (int, float)):
        if text == 0:
            return 0.0, ""
        raise MachineError(f"{where}: '{text}' needs a unit; valid units: {', '.join(units)}")
    m = _QTY.match(str(text))
    if not m:
        raise MachineError(f"{where}: '{text}' is not a {kind}; write a number and a unit "
                           f"(valid units: {', '.join(units)})")
    num, unit = float(m.group(1)), m.group(2)
    if unit not in units:
        raise MachineError(f"{where}: unknown unit '{unit}' in '{text}'; valid units: {', '.join(units)}")
    return num, unit


def parse_size(text: Any, where: str = "size") -> int:
    """'32kB' -> 32768. kB = KiB = 1024 bytes (CPU manuals' convention)."""
    num, unit = _quantity(text, "size", list(SIZE_UNITS), where)
    b = num * SIZE_UNITS.get(unit, 1)
    if b != int(b):
        raise MachineError(f"{where}: '{text}' is not a whole number of bytes")
    return int(b)


def parse_freq(text: Any, where: str = "clock") -> float:
    """'1.2GHz' -> 1.2e9 (Hz)."""
    num, unit = _quantity(text, "frequency", list(FREQ_UNITS), where)
    hz = num * FREQ_UNITS.get(unit, 1.0)
    if hz <= 0:
        raise MachineError(f"{where}: needs to be above 0 Hz (got {text})")
    return hz


def parse_time(text: Any, clock_hz: float, where: str = "time") -> float:
    """'90ns' or '4cycles' -> cycles (a float) at clock_hz."""
    num, unit = _quantity(text, "time", list(TIME_UNITS) + list(CYCLE_UNITS), where)
    if unit in CYCLE_UNITS or unit == "":
        return num
    return num * TIME_UNITS[unit] * clock_hz


def to_int(cycles: float) -> int:
    """Round half up (2.5 -> 3), the way the plugin arguments are written."""
    return int(math.floor(cycles + 0.5))


def _fmt_size(b: int) -> str:
    for unit, mult in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("kB", 1024)):
        if b >= mult and b % mult == 0:
            return f"{b // mult}{unit}"
    return f"{b}B"


# ---------------------------------------------------------------- schema

@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def _schema_message(err: jsonschema.ValidationError) -> str:
    where = _where(err.absolute_path)
    # an anyOf (a plain value or a {value, source} mapping): report the most useful branch
    if err.validator == "anyOf" and err.context:
        if isinstance(err.instance, dict):
            subs = [e for e in err.context if e.validator in ("additionalProperties", "required")]
            if subs:
                return _schema_message(subs[0])
        return f"{where}: {err.instance!r} is not valid here ({_schema_node_desc(err.schema)})"
    if err.validator in ("additionalProperties", "enum"):
        return experiment_schema_message(err)  # the same sentences as for experiment files
    return f"{where}: {err.message}"


def _schema_node_desc(node: dict) -> str:
    for branch in node.get("anyOf", []):
        ref = branch.get("$ref", "")
        if ref and ref != "#/$defs/sourced":
            return _resolve(branch).get("description", ref)
    return node.get("description", "see gem5_configs/machine.schema.json")


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        node = _schema()["$defs"][node["$ref"].split("/")[-1]]
    return node


def _object_props(node: dict) -> dict | None:
    """The properties of the object this schema node describes (through $ref/anyOf)."""
    node = _resolve(node)
    if "properties" in node:
        return node["properties"]
    for branch in node.get("anyOf", []) + node.get("oneOf", []):
        props = _object_props(branch)
        if props is not None:
            return props
    return None


def _items(node: dict) -> dict | None:
    node = _resolve(node)
    if "items" in node:
        return node["items"]
    for branch in node.get("anyOf", []):
        it = _items(branch)
        if it is not None:
            return it
    return None


# ---------------------------------------------------------------- provenance and leaves

def _is_sourced(v: Any) -> bool:
    return isinstance(v, dict) and "value" in v and "source" in v


def _unwrap(v: Any) -> Any:
    return v["value"] if _is_sourced(v) else v


def _check_provenance(node: dict, where: str, claim_ids: set[str] | None) -> list[str]:
    errs = []
    src = node.get("source")
    if src == "calibrated":
        claim = node.get("claim")
        if not claim:
            errs.append(f"{where}: source is 'calibrated', so it needs 'claim' naming the claim and figure "
                        "it was fitted to (e.g. \"E2: 1.934 s for 1e8 aligned loads\")")
        elif claim_ids is not None:
            cid = re.match(r"E[0-9]+", claim).group(0)
            if cid not in claim_ids:
                errs.append(f"{where}.claim: '{cid}' is not a claim in shared/claims.md; valid choices: "
                            f"{', '.join(sorted(claim_ids, key=lambda c: int(c[1:])))}")
    elif src == "assumed":
        if not node.get("why"):
            errs.append(f"{where}: source is 'assumed', so it needs 'why' (the reasoning, since no source was found)")
    elif src == "derived":
        for k, what in (("from", "the expression over other fields it equals, e.g. \"2 * memory.latency\""),
                        ("basis", "the citation that justifies the formula")):
            if not node.get(k):
                errs.append(f"{where}: source is 'derived', so it needs '{k}' ({what})")
    owner = {"claim": "calibrated", "why": "assumed", "from": "derived", "basis": "derived"}
    for k, needs in owner.items():
        if k in node and src != needs:
            errs.append(f"{where}.{k}: only goes with source '{needs}' "
                        f"(source here is {src if src in owner.values() else 'a citation'})")
    return errs


# ---------------------------------------------------------------- derived numbers

_PATH_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])*(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])*)*")


def _get_path(data: dict, path: str) -> Any:
    cur: Any = data
    for k in _parse_path(path):
        if isinstance(k, int):
            if not isinstance(cur, list) or k >= len(cur):
                return None
            cur = _unwrap(cur[k])
        else:
            if not isinstance(cur, dict) or k not in cur:
                return None
            cur = _unwrap(cur[k])
    return cur


def _magnitude(text: Any, hz: float, where: str) -> tuple[float, str]:
    """A field's value as (number, kind): times in cycles, sizes in bytes, counts as they are."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text), "count"
    m = _QTY.match(str(text))
    unit = m.group(2) if m else ""
    if unit in SIZE_UNITS:
        return float(parse_size(text, where)), "size"
    if unit in FREQ_UNITS:
        return parse_freq(text, where), "frequency"
    return parse_time(text, hz, where), "time"


def _nodes(v: Any, path: str = ""):
    """Every node of a description with its dotted path (list items as [i]),
    provenance keys left out."""
    yield path, v
    if isinstance(v, dict):
        for k, sub in v.items():
            if k not in PROVENANCE_KEYS:
                yield from _nodes(sub, f"{path}.{k}" if path else k)
    elif isinstance(v, list):
        for i, sub in enumerate(v):
            yield from _nodes(sub, f"{path}[{i}]")


def derived_fields(data: dict) -> list[tuple[str, dict]]:
    """Every {value, source: derived, from, basis} field: (dotted path, the field)."""
    return [(path, v) for path, v in _nodes(data) if _is_sourced(v) and v.get("source") == "derived"]


def evaluate_derived(data: dict, path: str, expr: str, hz: float) -> tuple[float, str]:
    """Evaluate `expr` (+ - * / parentheses, numbers, dotted field paths) -> (number, kind of
    the fields it reads: time in cycles, size in bytes, or count)."""
    import ast
    names: dict[str, float] = {}
    kinds: set[str] = set()

    def sub(m):
        p = m.group(0)
        v = _get_path(data, p)
        if v is None or isinstance(v, (dict, list)):
            raise MachineError(f"{path}.from: '{p}' in \"{expr}\" is not a number of this machine")
        if p == path:
            raise MachineError(f"{path}.from: \"{expr}\" reads the field itself")
        num, kind = _magnitude(v, hz, p)
        kinds.add(kind)
        key = f"_v{len(names)}"
        names[key] = num
        return key
    code = _PATH_TOKEN.sub(sub, expr)
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        raise MachineError(f"{path}.from: \"{expr}\" is not an expression (use + - * / parentheses, numbers "
                           "and dotted field paths)") from None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub,
               ast.Constant, ast.Name, ast.Load)
    for node in ast.walk(tree):
        if not isinstance(node, allowed) or (isinstance(node, ast.Constant)
                                             and not isinstance(node.value, (int, float))):
            raise MachineError(f"{path}.from: \"{expr}\" may only use + - * / parentheses, numbers and field paths")
    if len(kinds - {"count"}) > 1:
        raise MachineError(f"{path}.from: \"{expr}\" mixes {' and '.join(sorted(kinds - {'count'}))}")
    try:
        value = float(eval(compile(tree, "<from>", "eval"), {"__builtins__": {}}, names))
    except ZeroDivisionError:
        raise MachineError(f"{path}.from: \"{expr}\" divides by zero") from None
    return value, next(iter(kinds - {"count"}), "count")


def _check_derived(data: dict) -> list[str]:
    errs = []
    try:
        hz = parse_freq(_g(data, "clock"), "clock")
    except MachineError:
        return errs
    for path, f in derived_fields(data):
        if not f.get("from"):
            continue
        try:
            want, _kind = evaluate_derived(data, path, f["from"], hz)
            have, _ = _magnitude(f["value"], hz, path)
        except MachineError as e:
            errs.append(str(e))
            continue
        if abs(have - want) > 0.01 * max(abs(want), 1e-9):
            errs.append(f"{path}: {f['value']} is derived from \"{f['from']}\", which gives "
                        f"{_in_unit_of(f['value'], want, _kind, hz)}; the value needs to equal it (within 1%)")
    return errs


def _in_unit_of(like: Any, value: float, kind: str, hz: float) -> Any:
    """`value` (cycles, bytes or a count) written in the unit of `like` ("300ns" -> ns)."""
    m = _QTY.match(str(like))
    unit = m.group(2) if m else ""
    if kind == "time" and unit in TIME_UNITS:
        return f"{value / hz / TIME_UNITS[unit]:.6g}{unit}"
    if kind == "time":
        return f"{value:.6g}cycles"
    if kind == "size":
        return _fmt_size(int(round(value)))
    return round(value, 6)


def _rederive(data: dict, set_paths: set[str]) -> None:
    """After --set: recompute every derived field that was not itself set, in its own unit."""
    hz = parse_freq(_g(data, "clock"), "clock")
    for path, f in derived_fields(data):
        if path in set_paths or not f.get("from"):
            continue
        want, kind = evaluate_derived(data, path, f["from"], hz)
        f["value"] = _in_unit_of(f["value"], want, kind, hz)


def numeric_leaves(data: dict) -> list[tuple[str, Any, dict]]:
    """Every number in the description: (dotted path, value as written, provenance dict).

    The provenance is the nearest {value, source} wrapper or enclosing group with a
    'source'. Text fields (names, enums, sources) are not numbers."""
    out: list[tuple[str, Any, dict]] = []

    def walk(v, path, prov):
        if _is_sourced(v):
            out.append((path, v["value"], {k: v[k] for k in PROVENANCE_KEYS if k in v}))
            return
        if isinstance(v, dict):
            here = {k: v[k] for k in PROVENANCE_KEYS if k in v} if "source" in v else prov
            for k, sub in v.items():
                if k in TEXT_KEYS:
                    continue
                walk(sub, f"{path}.{k}" if path else k, here)
        elif isinstance(v, list):
            for i, sub in enumerate(v):
                walk(sub, f"{path}[{i}]", prov)
        elif isinstance(v, bool) or v is None:
            return
        else:
            out.append((path, v, prov))

    walk(data, "", {})
    return out


@lru_cache(maxsize=1)
def claim_ids() -> frozenset[str] | None:
    """Claim ids in shared/claims.md (E1..), or None where the catalogue is not beside the clone."""
    if not CLAIMS_PATH.exists():
        return None
    return frozenset(re.findall(r"^## (E[0-9]+)\b", CLAIMS_PATH.read_text(), flags=re.M))


# ---------------------------------------------------------------- semantic checks

def _g(data: dict, path: str) -> Any:
    cur: Any = data
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = _unwrap(cur[part])
    return cur


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _semantic_checks(data: dict, stem: str | None) -> list[str]:
    errs: list[str] = []
    if stem is not None and data["name"] != stem:
        errs.append(f"name: '{data['name']}' needs to equal the file name '{stem}'")
    ids = claim_ids()
    ids = set(ids) if ids is not None else None
    if ids is not None:
        for i, c in enumerate(data["claims"]):
            if c not in ids:
                errs.append(f"claims[{i}]: '{c}' is not a claim in shared/claims.md; valid choices: "
                            f"{', '.join(sorted(ids, key=lambda x: int(x[1:])))}")

    # provenance: every group with a source, every {value, source} field
    for where, v in _nodes(data):
        if isinstance(v, dict) and "source" in v:
            errs.extend(_check_provenance(v, where, ids))
    errs.extend(_check_derived(data))
    for path, value, prov in numeric_leaves(data):
        if not prov.get("source"):
            errs.append(f"{path}: the number {value!r} has no source; give its group a 'source' or write it "
                        "as {value, source}")

    try:
        hz = parse_freq(_g(data, "clock"), "clock")
    except MachineError as e:
        return errs + [str(e)]

    def size(path):
        return parse_size(_g(data, path), path)

    def cyc(path):
        return parse_time(_g(data, path), hz, path)

    # cpi
    cpi = _g(data, "cpi")
    if isinstance(cpi, bool) or not isinstance(cpi, (int, float)) or cpi <= 0:
        errs.append(f"cpi: needs to be a number of cycles per instruction above 0 (got {cpi!r})")

    # caches
    caches = data["caches"]
    lat: dict[str, float] = {}
    for lvl in ("l1i", "l1d", "l2", "l3"):
        if lvl not in caches:
            continue
        at = f"caches.{lvl}"
        try:
            s, line = size(f"{at}.size"), size(f"{at}.line")
            lat[lvl] = cyc(f"{at}.latency")
        except MachineError as e:
            errs.append(str(e))
            continue
        assoc = _g(data, f"{at}.assoc")
        if not _pow2(line):
            errs.append(f"{at}.line needs to be a power of two (got {_g(data, at + '.line')})")
            continue
        ways = s // line if assoc == "full" else assoc
        if not isinstance(ways, int) or isinstance(ways, bool) or ways < 1:
            errs.append(f"{at}.assoc needs to be a whole number of ways or 'full' (got {assoc!r})")
            continue
        one_set = ways * line
        if s < one_set:
            errs.append(f"{at}.size ({_g(data, at + '.size')}) is smaller than one set "
                        f"(assoc {ways} x line {_g(data, at + '.line')})")
        elif s % one_set:
            errs.append(f"{at}.size ({_g(data, at + '.size')}) needs to be a whole number of sets "
                        f"(assoc {ways} x line {_g(data, at + '.line')} = {_fmt_size(one_set)})")
        elif not _pow2(s // one_set):
            errs.append(f"{at}.size ({_g(data, at + '.size')}) gives {s // one_set} sets of "
                        f"assoc {ways} x line {_g(data, at + '.line')}; the set count needs to be a power of two")
        if lat[lvl] < 0:
            errs.append(f"{at}.latency needs to be at least 0 (got {_g(data, at + '.latency')})")
        if lvl in ("l2", "l3") and "inclusion" not in caches[lvl]:
            errs.append(f"{at}: needs 'inclusion' (inclusive, exclusive or non-inclusive) for a lower level")
    if "l3" in caches and "l2" not in caches:
        errs.append("caches.l3: needs a caches.l2 above it")
    order = [lv for lv in ("l1d", "l2", "l3") if lv in lat]
    for upper, lower in zip(order, order[1:]):
        if lat[lower] <= lat[upper]:
            errs.append(f"caches.{lower}.latency ({_g(data, f'caches.{lower}.latency')}) needs to be more than "
                        f"caches.{upper}.latency ({_g(data, f'caches.{upper}.latency')})")
    for lower in ("l2", "l3"):
        if lower in caches:
            for upper in ("l1i", "l1d"):
                try:
                    if size(f"caches.{lower}.line") < size(f"caches.{upper}.line"):
                        errs.append(f"caches.{lower}.line ({_g(data, f'caches.{lower}.line')}) is smaller than "
                                    f"caches.{upper}.line ({_g(data, f'caches.{upper}.line')}); a lower level "
                                    "needs lines at least as large")
                except MachineError:
                    pass
    try:
        mem = cyc("memory.latency")
        if order and mem <= lat[order[-1]]:
            errs.append(f"memory.latency ({_g(data, 'memory.latency')}{'' if 'cycle' in str(_g(data, 'memory.latency')) else f' = {mem:g} cycles'}) needs to be more than "
                        f"caches.{order[-1]}.latency ({_g(data, f'caches.{order[-1]}.latency')})")
    except MachineError as e:
        errs.append(str(e))

    # NUMA
    numa = data.get("numa")
    if numa is not None:
        n = _unwrap(numa["nodes"])
        m = numa["latency_ns"]
        if len(m) != n or any(len(row) != n for row in m):
            errs.append(f"numa.latency_ns needs {n} rows of {n} (one per node; numa.nodes is {n}), "
                        f"got {len(m)} rows of {', '.join(str(len(r)) for r in m)}")
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                try:
                    if parse_time(_unwrap(v), hz, f"numa.latency_ns[{i}][{j}]") <= 0:
                        errs.append(f"numa.latency_ns[{i}][{j}]: needs to be above 0 (got {_unwrap(v)})")
                except MachineError as e:
                    errs.append(str(e))
        if _unwrap(numa.get("interleave")) is True and "interleave_granularity" not in numa:
            errs.append("numa.interleave is true, so it needs numa.interleave_granularity (e.g. 64B: lines "
                        "alternate between the nodes)")
        if "interleave_granularity" in numa:
            try:
                if not _pow2(size("numa.interleave_granularity")):
                    errs.append(f"numa.interleave_granularity needs to be a power of two "
                                f"(got {_g(data, 'numa.interleave_granularity')})")
            except MachineError as e:
                errs.append(str(e))

    # TLBs
    pages = {}
    for t in ("itlb", "dtlb", "stlb"):
        if t not in data["tlb"]:
            continue
        at = f"tlb.{t}"
        entries, assoc = _g(data, f"{at}.entries"), _g(data, f"{at}.assoc")
        ways = entries if assoc == "full" else assoc
        if isinstance(ways, int) and not isinstance(ways, bool) and ways >= 1 and isinstance(entries, int):
            if entries < ways or entries % ways:
                errs.append(f"{at}.entries needs to be a multiple of its associativity "
                            f"(got {entries} entries, assoc {assoc})")
        else:
            errs.append(f"{at}.assoc needs to be a whole number of ways or 'full' (got {assoc!r})")
        try:
            cyc(f"{at}.latency" if t == "stlb" else f"{at}.miss_penalty")
            if t != "stlb":
                pages[t] = size(f"{at}.page")
                if not _pow2(pages[t]):
                    errs.append(f"{at}.page needs to be a power of two (got {_g(data, at + '.page')})")
        except MachineError as e:
            errs.append(str(e))
    if len(pages) == 2 and pages["itlb"] != pages["dtlb"]:
        errs.append(f"tlb.itlb.page ({_g(data, 'tlb.itlb.page')}) and tlb.dtlb.page ({_g(data, 'tlb.dtlb.page')}) "
                    "differ; the timing model uses one page size")

    # unaligned
    ua = data["unaligned"]
    modes = {ua["w2"], ua["w4"], ua["w8"]}
    if {"hw", "hw-penalty"} <= modes:
        errs.append("unaligned: widths mix 'hw' and 'hw-penalty'; the timing model has one unaligned penalty, "
                    "so use one of them for every width done in hardware")
    try:
        pen = cyc("unaligned.penalty")
        cyc("unaligned.line_cross_penalty")
        if pen and "hw-penalty" not in modes:
            errs.append(f"unaligned.penalty is {_g(data, 'unaligned.penalty')} but no width is 'hw-penalty' "
                        "(set it to 0cycles, or mark the widths that pay it)")
    except MachineError as e:
        errs.append(str(e))

    # the remaining times
    for path in ("atomics.lock_cost", "atomics.split_lock_cost", "prefetch.trap_cost", "traps.cost",
                 "windows.spill_fill_cost"):
        if _g(data, path.split(".")[0]) is None:
            continue
        try:
            if cyc(path) < 0:
                errs.append(f"{path}: needs to be at least 0 (got {_g(data, path)})")
        except MachineError as e:
            errs.append(str(e))
    if data["prefetch"]["semantics"] == "weak":
        try:
            if cyc("prefetch.trap_cost"):
                errs.append(f"prefetch.trap_cost is {_g(data, 'prefetch.trap_cost')} but weak prefetches never trap "
                            "(they are dropped on a TLB miss); set it to 0cycles or make semantics strong")
        except MachineError:
            pass
    if "windows" in data:
        if data["arch"] != "sparc64":
            errs.append(f"windows: register windows are SPARC's; arch is {data['arch']}")
        n = _g(data, "windows.count")
        if not isinstance(n, int) or not 3 <= n <= 32:
            errs.append(f"windows.count needs to be between 3 and 32 (SPARC V9 NWINDOWS), got {n!r}")
    return errs


def validate(data: Any, where: str = "machine", stem: str | None = None) -> None:
    """Raise MachineError with every problem (schema first, then the sentences)."""
    if not isinstance(data, dict):
        raise MachineError(f"{where}: needs to be a mapping of fields, not {type(data).__name__}")
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise MachineError(f"{where}: " + "; ".join(_schema_message(e) for e in errors[:5]))
    errs = _semantic_checks(data, stem)
    if errs:
        raise MachineError(f"{where}: " + "; ".join(errs))


# ---------------------------------------------------------------- --set overrides

_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[[0-9]+\])*)$")


def _parse_path(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.split("."):
        m = _PART.match(part)
        if not m:
            raise MachineError(f"--set {path}: '{part}' is not a field name (letters, digits, _ and [index])")
        out.append(m.group(1))
        out.extend(int(i) for i in re.findall(r"\[([0-9]+)\]", m.group(2)))
    return out


def apply_sets(machine_dict: dict, sets: list[str] | tuple[str, ...]) -> dict:
    """Return a copy of machine_dict with each "dotted.path=value" applied, then revalidated.

    Paths may index lists ("numa.latency_ns[0][1]=150ns"); an unknown field is
    rejected naming the valid fields at that level. The value is read as YAML
    ("4" is a number, "32B" a string). The overridden number's provenance becomes
    the override itself: {value, source: "--set <path>=<value>"}."""
    data = copy.deepcopy(machine_dict)
    for item in sets:
        if "=" not in item:
            raise MachineError(f"--set takes key=value, not '{item}'")
        path, raw = item.split("=", 1)
        path = path.strip()
        keys = _parse_path(path)
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        cur: Any = data
        node: dict | None = _schema()
        done = ""
        for i, k in enumerate(keys):
            last = i == len(keys) - 1
            if isinstance(k, int):
                if not isinstance(cur, list):
                    raise MachineError(f"--set {path}: {done or '(top level)'} is not a list, so [{k}] has nothing to index")
                if k >= len(cur):
                    raise MachineError(f"--set {path}: index {k} is out of range ({done} has {len(cur)} items)")
                node = _items(node) if node is not None else None
                if last:
                    cur[k] = _with_value(cur[k], value, item)
                    break
                cur = cur[k]
                if _is_sourced(cur) and not isinstance(cur["value"], (dict, list)):
                    pass
                done += f"[{k}]"
                continue
            if _is_sourced(cur) and k == "value":
                # clock.value=1GHz: same as clock=1GHz
                cur["value"] = value
                cur.update({"source": f"--set {item}"})
                for extra in ("claim", "why"):
                    cur.pop(extra, None)
                break
            if not isinstance(cur, dict):
                raise MachineError(f"--set {path}: {done} is a value, not a group of fields")
            props = _object_props(node) if node is not None else None
            valid = sorted(set(props or {}) | set(cur))
            if k not in valid:
                raise MachineError(f"--set {path}: unknown field '{k}' under {done or 'the top level'}; "
                                   f"valid fields: {', '.join(valid)}")
            node = (props or {}).get(k)
            if last:
                sub = _object_props(node) if node is not None else None
                if sub is not None and "value" not in sub and not isinstance(value, dict):
                    raise MachineError(f"--set {path}: {done + '.' if done else ''}{k} is a group of fields "
                                       f"({', '.join(sorted(sub))}); set one of them, e.g. "
                                       f"--set {done + '.' if done else ''}{k}.{sorted(sub)[0]}=...")
                if k in PROVENANCE_KEYS or k in TEXT_KEYS or isinstance(value, (dict, list)):
                    cur[k] = value
                    if isinstance(value, dict) and "source" not in value:
                        value["source"] = f"--set {item}"
                else:
                    cur[k] = _with_value(cur.get(k), value, item)
                break
            if k not in cur:
                raise MachineError(f"--set {path}: {done + '.' if done else ''}{k} is not in this machine; "
                                   f"set the whole group at once (--set {done + '.' if done else ''}{k}={{...}})")
            cur = cur[k]
            done = f"{done}.{k}" if done else k
    set_paths = {re.sub(r"\.value$", "", i.split("=", 1)[0].strip()) for i in sets}
    try:
        _rederive(data, set_paths)
    except MachineError as e:
        raise MachineError(f"--set {' '.join(sets)}: {e}") from None
    return data


def _with_value(old: Any, value: Any, item: str) -> Any:
    if isinstance(value, (dict, list)) or isinstance(value, bool):
        return value
    return {"value": value, "source": f"--set {item}"}


# ---------------------------------------------------------------- the machine

@dataclass(frozen=True)
class Machine:
    name: str
    path: Path
    data: dict
    sets: tuple[str, ...] = field(default=())

    # -- reading fields
    def raw(self, path: str) -> Any:
        """The field as written (unwrapped from {value, source}), or None."""
        return _g(self.data, path)

    def has(self, path: str) -> bool:
        return self.raw(path) is not None

    @property
    def arch(self) -> str:
        return self.data["arch"]

    @property
    def clock_hz(self) -> float:
        return parse_freq(self.raw("clock"), "clock")

    @property
    def cpi(self) -> float:
        return float(self.raw("cpi"))

    def bytes(self, path: str) -> int:
        return parse_size(self.raw(path), path)

    def cycles(self, path: str) -> float:
        return parse_time(self.raw(path), self.clock_hz, path)

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
        m = self.data.get("numa", {}).get("latency_ns", [])
        return [[to_int(parse_time(_unwrap(v), self.clock_hz, "numa.latency_ns")) for v in row] for row in m]

    def sources(self) -> dict[str, str]:
        """Every number's provenance, one line each, by dotted path."""
        out = {}
        for path, _v, prov in numeric_leaves(self.data):
            s = prov.get("source", "")
            if s == "calibrated":
                s = f"calibrated: {prov.get('claim', '')}"
            elif s == "assumed":
                s = f"assumed: {prov.get('why', '')}"
            elif s == "derived":
                s = f"derived: {prov.get('from', '')} ({prov.get('basis', '')})"
            out[path] = s
        return out

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
            "plugin_args": plugin_args(self),
            "sources": self.sources(),
        }

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
        parts = [f"{self.name} ({self.arch}, {self.raw('clock')}, CPI {self.cpi:g})", ", ".join(levels),
                 f"mem {self.raw('memory.latency')} ({self.icycles('memory.latency')}cy)"]
        if "numa" in self.data:
            m = self.data["numa"]["latency_ns"]
            parts.append(f"NUMA {len(m)} nodes {'/'.join(str(_unwrap(v)) for v in m[0])}"
                         + (", interleaved" if self.data["numa"]["interleave"] else ""))
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


def _frac(cycles: float) -> str:
    return f"{cycles:.4f}".rstrip("0").rstrip(".") or "0"


def plugin_args(machine: Machine) -> list[str]:
    """The QEMU timing plugin's options (the contract with the plugin): sizes in
    bytes, latencies in whole cycles (the unaligned and line-crossing penalties
    in fractional cycles); l2_size=0 without an L2 (l3 likewise);
    numa_nodes, numa_lat (row-major [vCPU node][memory node]) and numa_interleave
    (0, or the granularity in bytes) with a numa group (the guest's memory
    layout, numa_mem and numa_cpus, is the platform's to add); stlb_*=0 without a
    second translation level, lock costs 0 without 'atomics', nwindows=0 and
    window_trap=0 without register windows. unaligned<N> is hw for 'hw' and
    'hw-penalty' (the penalty is unaligned_penalty)."""
    m = machine
    a: list[tuple[str, Any]] = [("cpi", repr(float(m.cpi)))]
    for lvl in ("l1i", "l1d", "l2", "l3"):
        p = f"caches.{lvl}"
        if m.has(p):
            a += [(f"{lvl}_size", m.bytes(p + ".size")), (f"{lvl}_assoc", m.ways(p)),
                  (f"{lvl}_line", m.bytes(p + ".line")), (f"{lvl}_lat", m.icycles(p + ".latency"))]
        else:
            a += [(f"{lvl}_size", 0), (f"{lvl}_assoc", 0), (f"{lvl}_line", 0), (f"{lvl}_lat", 0)]
        if lvl == "l1d":
            a.append(("l1d_write", "wb" if m.raw(p + ".write") == "write-back" else "wt"))
    a.append(("mem_lat", m.icycles("memory.latency")))
    if "numa" in m.data:
        lat = m.numa_cycles()
        a += [("numa_nodes", len(lat)), ("numa_lat", ":".join(str(c) for row in lat for c in row)),
              ("numa_interleave", m.bytes("numa.interleave_granularity") if m.raw("numa.interleave") else 0)]
    a += [("itlb_entries", m.raw("tlb.itlb.entries")), ("itlb_assoc", m.ways("tlb.itlb")),
          ("dtlb_entries", m.raw("tlb.dtlb.entries")), ("dtlb_assoc", m.ways("tlb.dtlb")),
          ("page", m.bytes("tlb.dtlb.page")), ("tlb_miss", m.icycles("tlb.dtlb.miss_penalty"))]
    if m.has("tlb.stlb"):
        a += [("stlb_entries", m.raw("tlb.stlb.entries")), ("stlb_assoc", m.ways("tlb.stlb")),
              ("stlb_lat", m.icycles("tlb.stlb.latency"))]
    else:
        a += [("stlb_entries", 0), ("stlb_assoc", 0), ("stlb_lat", 0)]
    for w in (2, 4, 8):
        a.append((f"unaligned{w}", "trap" if m.raw(f"unaligned.w{w}") == "trap" else "hw"))
    # the two access penalties are measured averages: fractional cycles (4 decimals)
    a += [("unaligned_penalty", _frac(m.cycles("unaligned.penalty"))),
          ("straddle_penalty", _frac(m.cycles("unaligned.line_cross_penalty"))),
          ("trap_cost", m.icycles("traps.cost"))]
    if "atomics" in m.data:
        a += [("lock_cost", m.icycles("atomics.lock_cost")), ("split_lock_cost", m.icycles("atomics.split_lock_cost"))]
    else:
        a += [("lock_cost", 0), ("split_lock_cost", 0)]
    a += [("prefetch", m.raw("prefetch.semantics")), ("prefetch_trap", m.icycles("prefetch.trap_cost"))]
    if "windows" in m.data:
        a += [("nwindows", m.raw("windows.count")), ("window_trap", m.icycles("windows.spill_fill_cost"))]
    else:
        a += [("nwindows", 0), ("window_trap", 0)]
    return [f"{k}={v}" for k, v in a]


# ---------------------------------------------------------------- loading

def names(directory: Path = MACHINES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def _read(path: Path) -> dict:
    try:
        rel = path.relative_to(ROOT)
    except ValueError:
        rel = path
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise MachineError(f"{rel}: not valid YAML: {e}".replace("\n", " ")) from None
    except OSError as e:
        raise MachineError(f"{rel}: cannot be read ({e.strerror})") from None
    if not isinstance(data, dict):
        raise MachineError(f"{rel}: needs to be a mapping of fields, not {type(data).__name__}")
    return data


def load_file(path: Path | str, sets: list[str] | tuple[str, ...] = ()) -> Machine:
    path = Path(path)
    try:
        rel = str(path.relative_to(ROOT))
    except ValueError:
        rel = str(path)
    data = _read(path)
    validate(data, rel, stem=path.stem)
    if sets:
        data = apply_sets(data, sets)
        validate(data, f"{rel} with --set {' '.join(sets)}", stem=path.stem)
    return Machine(name=data["name"], path=path, data=data, sets=tuple(sets))


def load(name_or_path: str | Path, sets: list[str] | tuple[str, ...] = ()) -> Machine:
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
