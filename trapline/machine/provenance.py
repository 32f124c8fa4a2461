"""Provenance: where every number of a machine comes from.

A group's `source` covers its fields, and a field written as {value, source}
has its own. `source: calibrated` needs a `claim` ("E2: ..." naming the
shared/claims.md entry and the figure fitted to); `source: derived` needs `from`
(an expression over other fields, e.g. "2 * memory.latency", that the value
must equal) and `basis` (the citation for the formula); `source: assumed` needs
a `why`. A --set on a field that a derived number reads recomputes it
(`rederive`); a --set override replaces a field's provenance with the override
itself, so a manifest never credits a datasheet with a number the user typed.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Any

from trapline.machine import paths, schema
from trapline.paths import shared
from trapline.machine.units import MachineError, in_unit_of, parse, parse_freq

CLAIMS_PATH = shared("claims.md")
_OWNER = {"claim": "calibrated", "why": "assumed", "from": "derived", "basis": "derived"}


@lru_cache(maxsize=1)
def claim_ids() -> frozenset[str] | None:
    """Claim ids in shared/claims.md (E1..), or None where the catalogue is not beside the clone."""
    if not CLAIMS_PATH.exists():
        return None
    return frozenset(re.findall(r"^## (E[0-9]+)\b", CLAIMS_PATH.read_text(), flags=re.M))


def numeric_leaves(data: dict) -> list[tuple[str, Any, dict]]:
    """Every number in the description: (dotted path, value as written, provenance dict).

    The numbers are the fields with an x-unit in the schema (list items each on
    their own); the provenance is the nearest {value, source} wrapper or
    enclosing group with a 'source'."""
    return [(path, value, prov) for path, _kind, value, prov, _whole in schema.quantities(data)]


def line(prov: dict) -> str:
    """One number's provenance as one line (the manifests' `sources`)."""
    s = prov.get("source", "")
    if s == "calibrated":
        return f"calibrated: {prov.get('claim', '')}"
    if s == "assumed":
        return f"assumed: {prov.get('why', '')}"
    if s == "derived":
        return f"derived: {prov.get('from', '')} ({prov.get('basis', '')})"
    return s


def check(node: dict, where: str, ids: set[str] | None) -> list[str]:
    """The provenance of one group or {value, source} field, as sentences."""
    errs = []
    src = node.get("source")
    if src == "calibrated":
        claim = node.get("claim")
        if not claim:
            errs.append(f"{where}: source is 'calibrated', so it needs 'claim' naming the claim and figure "
                        "it was fitted to (e.g. \"E2: 1.934 s for 1e8 aligned loads\")")
        elif ids is not None:
            cid = re.match(r"E[0-9]+", claim).group(0)
            if cid not in ids:
                errs.append(f"{where}.claim: '{cid}' is not a claim in shared/claims.md; valid choices: "
                            f"{', '.join(sorted(ids, key=lambda c: int(c[1:])))}")
    elif src == "assumed":
        if not node.get("why"):
            errs.append(f"{where}: source is 'assumed', so it needs 'why' (the reasoning, since no source was found)")
    elif src == "derived":
        for k, what in (("from", "the expression over other fields it equals, e.g. \"2 * memory.latency\""),
                        ("basis", "the citation that justifies the formula")):
            if not node.get(k):
                errs.append(f"{where}: source is 'derived', so it needs '{k}' ({what})")
    for k, needs in _OWNER.items():
        if k in node and src != needs:
            errs.append(f"{where}.{k}: only goes with source '{needs}' "
                        f"(source here is {src if src in _OWNER.values() else 'a citation'})")
    return errs


# ---------------------------------------------------------------- derived numbers

def derived_fields(data: dict) -> list[tuple[str, dict]]:
    """Every {value, source: derived, from, basis} field: (dotted path, the field)."""
    return [(path, v) for path, v in paths.nodes(data) if paths.is_sourced(v) and v.get("source") == "derived"]


def _magnitude(path: str, text: Any, hz: float) -> tuple[float, str]:
    """A field's value as (number, kind): times in cycles, sizes in bytes, counts as they are;
    the kind is the field's x-unit."""
    kind = schema.unit_at(paths.parse_path(path))
    q = parse(path, kind, text, hz) if kind else None
    if q is None or isinstance(q.value, bool) or not isinstance(q.value, (int, float)):
        raise MachineError(f"{path}: {text!r} is not a number")
    return float(q.value), (kind if kind in ("size", "time", "frequency", "rate") else "count")


def evaluate_derived(data: dict, path: str, expr: str, hz: float) -> tuple[float, str]:
    """Evaluate `expr` (+ - * / parentheses, numbers, dotted field paths) -> (number, kind of
    the fields it reads: time in cycles, size in bytes, or count)."""
    names: dict[str, float] = {}
    kinds: set[str] = set()

    def sub(m):
        p = m.group(0)
        v = paths.get(data, p)
        if v is None or isinstance(v, (dict, list)):
            raise MachineError(f"{path}.from: '{p}' in \"{expr}\" is not a number of this machine")
        if p == path:
            raise MachineError(f"{path}.from: \"{expr}\" reads the field itself")
        try:
            num, kind = _magnitude(p, v, hz)
        except MachineError as e:
            if schema.unit_at(paths.parse_path(p)) is None:
                raise MachineError(f"{path}.from: '{p}' in \"{expr}\" is not a number of this machine") from None
            raise e from None
        kinds.add(kind)
        key = f"_v{len(names)}"
        names[key] = num
        return key
    code = paths.PATH_TOKEN.sub(sub, expr)
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


def check_derived(data: dict) -> list[str]:
    """Every derived number equals its expression (within 1%), as sentences."""
    errs: list[str] = []
    try:
        hz = parse_freq(paths.get(data, "clock"), "clock")
    except MachineError:
        return errs
    for path, f in derived_fields(data):
        if not f.get("from"):
            continue
        try:
            want, kind = evaluate_derived(data, path, f["from"], hz)
            have, _ = _magnitude(path, f["value"], hz)
        except MachineError as e:
            errs.append(str(e))
            continue
        if abs(have - want) > 0.01 * max(abs(want), 1e-9):
            errs.append(f"{path}: {f['value']} is derived from \"{f['from']}\", which gives "
                        f"{in_unit_of(f['value'], want, kind, hz)}; the value needs to equal it (within 1%)")
    return errs


def rederive(data: dict, set_paths: set[str]) -> None:
    """After --set: recompute every derived field that was not itself set, in its own unit."""
    hz = parse_freq(paths.get(data, "clock"), "clock")
    for path, f in derived_fields(data):
        if path in set_paths or not f.get("from"):
            continue
        want, kind = evaluate_derived(data, path, f["from"], hz)
        f["value"] = in_unit_of(f["value"], want, kind, hz)
