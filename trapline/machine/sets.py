"""--set overrides: (dotted path, value) pairs, applied once to a description. The
command line's text "path=value" is split into a pair once, here (pair), where the
option is read; from there on a --set travels as its pair.

Paths may index lists ("numa.latency_ns[0][1]=150ns"); an unknown field is
rejected naming the valid fields at that level. The value is read as YAML, by the
files' own reader (trapline.yamlfile: "4" and "1e30" are numbers, "32B" a string,
and a value nested too deeply is refused). A number (a field with an x-unit in the schema)
that is overridden gets the override as its provenance: {value, source: "--set
<path>=<value>"}; a derived number that reads it is recomputed.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from trapline.machine import paths, provenance, schema
from trapline.machine.paths import PROVENANCE_KEYS, is_sourced
from trapline.machine.units import MachineError
from trapline.yamlfile import load_text


def _with_value(value: Any, item: str) -> Any:
    if isinstance(value, (dict, list)) or isinstance(value, bool):
        return value
    return {"value": value, "source": f"--set {item}"}


Pair = tuple[str, str]


def pair(text: str) -> Pair:
    """--set's text "key=value" as its (key, value) pair: the one place it is split."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise MachineError(f"--set takes key=value, not '{text}'")
    return key, value


def shown(sets: list[Pair] | tuple[Pair, ...]) -> tuple[str, ...]:
    """The pairs as the user wrote them ("path=value"), for the manifest, logs and sources."""
    return tuple(f"{k}={v}" for k, v in sets)


def is_machine_key(key: str) -> bool:
    """Whether a --set key names a machine field rather than a kernel argument: a dotted
    or indexed path, or one of a machine's top-level fields (the schema's)."""
    return "." in key or "[" in key or key in schema.top_fields()


def _apply_one(data: dict, path: str, raw: str) -> None:
    item = f"{path}={raw}"
    path = path.strip()
    keys = paths.parse_path(path)
    import yaml
    try:
        value = load_text(raw, f"--set {path}", MachineError) if raw.strip() else ""
    except yaml.constructor.ConstructorError as e:
        raise MachineError(f"--set {path}: {e.problem.replace('on line 1 ', '')}") from None
    except yaml.YAMLError:
        value = raw
    cur: Any = data
    node: dict | None = schema.schema()
    done = ""
    for i, k in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(k, int):
            if not isinstance(cur, list):
                raise MachineError(f"--set {path}: {done or '(top level)'} is not a list, so [{k}] has nothing to index")
            if k >= len(cur):
                raise MachineError(f"--set {path}: index {k} is out of range ({done} has {len(cur)} items)")
            node = schema.items(node)
            if last:
                cur[k] = _with_value(value, item)
                return
            cur = cur[k]
            done += f"[{k}]"
            continue
        if is_sourced(cur) and k == "value":
            # clock.value=1GHz: same as clock=1GHz
            cur["value"] = value
            cur.update({"source": f"--set {item}"})
            for extra in ("claim", "why"):
                cur.pop(extra, None)
            return
        if not isinstance(cur, dict):
            raise MachineError(f"--set {path}: {done} is a value, not a group of fields")
        props = schema.object_props(node)
        valid = sorted(set(props or {}) | set(cur))
        if k not in valid:
            raise MachineError(f"--set {path}: unknown field '{k}' under {done or 'the top level'}; "
                               f"valid fields: {', '.join(valid)}")
        node = (props or {}).get(k)
        here = f"{done + '.' if done else ''}{k}"
        if last:
            sub = schema.object_props(node)
            if sub is not None and "value" not in sub and not isinstance(value, dict):
                raise MachineError(f"--set {path}: {here} is a group of fields ({', '.join(sorted(sub))}); "
                                   f"set one of them, e.g. --set {here}.{sorted(sub)[0]}=...")
            if k in PROVENANCE_KEYS or not schema.unit(node) or isinstance(value, (dict, list)):
                cur[k] = value
                if isinstance(value, dict) and "source" not in value:
                    value["source"] = f"--set {item}"
            else:
                cur[k] = _with_value(value, item)
            return
        if k not in cur:
            raise MachineError(f"--set {path}: {here} is not in this machine; "
                               f"set the whole group at once (--set {here}={{...}})")
        cur = cur[k]
        done = here


def apply_sets(machine_dict: dict, sets: list[Pair] | tuple[Pair, ...]) -> dict:
    """Return a copy of machine_dict with each (dotted path, value) applied (the
    derived numbers recomputed); the caller validates the result."""
    data = copy.deepcopy(machine_dict)
    for path, raw in sets:
        _apply_one(data, path, raw)
    set_paths = {re.sub(r"\.value$", "", path.strip()) for path, _ in sets}
    try:
        provenance.rederive(data, set_paths)
    except MachineError as e:
        raise MachineError(f"--set {' '.join(shown(sets))}: {e}") from None
    return data
