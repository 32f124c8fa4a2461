"""The one dotted-path walker: "caches.l1d.line", "numa.latency_ns[0][1]".

Used by Machine.raw, --set, derived expressions and the checks. A field
written as {value, source} reads as its value.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from trapline.machine.units import MachineError

PROVENANCE_KEYS = ("source", "claim", "why", "note", "from", "basis")

_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\[[0-9]+\])*)$")
# a path inside a derived expression ("2 * memory.latency")
PATH_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])*(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])*)*")


def is_sourced(v: Any) -> bool:
    """A field written as {value, source, ...}."""
    return isinstance(v, dict) and "value" in v and "source" in v


def unwrap(v: Any) -> Any:
    return v["value"] if is_sourced(v) else v


def parse_path(path: str) -> list[str | int]:
    """"numa.latency_ns[0][1]" -> ["numa", "latency_ns", 0, 1]; MachineError (as a --set) if malformed."""
    out: list[str | int] = []
    for part in path.split("."):
        m = _PART.match(part)
        if not m:
            raise MachineError(f"--set {path}: '{part}' is not a field name (letters, digits, _, - and [index])")
        out.append(m.group(1))
        out.extend(int(i) for i in re.findall(r"\[([0-9]+)\]", m.group(2)))
    return out


def get(data: Any, path: str) -> Any:
    """The field at `path` as written (unwrapped from {value, source}), or None."""
    try:
        keys = parse_path(path)
    except MachineError:
        return None
    cur: Any = data
    for k in keys:
        if isinstance(k, int):
            if not isinstance(cur, list) or k >= len(cur):
                return None
        elif not isinstance(cur, dict) or k not in cur:
            return None
        cur = unwrap(cur[k])
    return cur


def nodes(v: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of a description with its dotted path (list items as [i]),
    provenance keys left out."""
    yield path, v
    if isinstance(v, dict):
        for k, sub in v.items():
            if k not in PROVENANCE_KEYS:
                yield from nodes(sub, f"{path}.{k}" if path else k)
    elif isinstance(v, list):
        for i, sub in enumerate(v):
            yield from nodes(sub, f"{path}[{i}]")

