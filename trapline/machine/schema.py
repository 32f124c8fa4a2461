"""gem5_configs/machine.schema.json: the structure of a machine, the kind of each
number ("x-unit": size, frequency, time, rate, count, ways, ratio), and its errors as
one sentence each.

The schema is the one place that says which fields are numbers and in what
unit; the typed machine, numeric_leaves, --set and the gem5 export read it here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import jsonschema

from trapline.machine.paths import PROVENANCE_KEYS, is_sourced
from trapline.paths import ROOT
from trapline.yamlfile import schema_message as file_schema_message, where as _where

SCHEMA_PATH = ROOT / "gem5_configs" / "machine.schema.json"


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def top_fields() -> frozenset[str]:
    """The fields a machine description may have at its top level (from the schema):
    what tells a --set on the machine from a kernel argument."""
    return frozenset(schema()["properties"])


def message(err: jsonschema.ValidationError) -> str:
    """One sentence for a schema error, naming the field (the file sentences of trapline.yamlfile)."""
    where = _where(err.absolute_path)
    # an anyOf (a plain value or a {value, source} mapping): report the most useful branch
    if err.validator == "anyOf" and err.context:
        if isinstance(err.instance, dict):
            subs = [e for e in err.context if e.validator in ("additionalProperties", "required")]
            if subs:
                return message(subs[0])
        shown = str(err.instance).lower() if isinstance(err.instance, bool) else repr(err.instance)
        return f"{where}: {shown} is not valid here ({_node_desc(err.schema)})"
    if err.validator == "type" and isinstance(err.instance, bool):
        return f"{where}: {str(err.instance).lower()} is not valid here; it needs a number (with its unit)"
    if err.validator in ("additionalProperties", "enum"):
        return file_schema_message(err)  # the same sentences as for experiment files
    return f"{where}: {err.message}"


def _node_desc(node: dict) -> str:
    for branch in node.get("anyOf", []):
        ref = branch.get("$ref", "")
        if ref and ref != "#/$defs/sourced":
            return resolve(branch).get("description", ref)
    return node.get("description", "see gem5_configs/machine.schema.json")


def resolve(node: dict) -> dict:
    while "$ref" in node:
        node = schema()["$defs"][node["$ref"].split("/")[-1]]
    return node


def _find(node: dict | None, key: str) -> dict | None:
    """`key` ("properties", "items") of the schema node, through $ref and anyOf/oneOf branches."""
    if node is None:
        return None
    node = resolve(node)
    if key in node:
        return node[key]
    for branch in node.get("anyOf", []) + node.get("oneOf", []):
        found = _find(branch, key)
        if found is not None:
            return found
    return None


def object_props(node: dict | None) -> dict | None:
    """The properties of the object this schema node describes (through $ref/anyOf)."""
    return _find(node, "properties")


def items(node: dict | None) -> dict | None:
    """The schema of a list's items."""
    return _find(node, "items")


def unit(node: dict | None) -> str | None:
    """The x-unit of a property (size, frequency, time, rate, count, ways, ratio), None for text."""
    return node.get("x-unit") if isinstance(node, dict) else None


def quantities(data: dict) -> Iterator[tuple[str, str, Any, dict, bool]]:
    """Every number of a description, in the order written: (dotted path, x-unit,
    value as written, provenance, whole) - `whole` is True for the field as the
    schema names it (numa.latency_ns is one field of many numbers). The provenance
    is the nearest {value, source} wrapper or enclosing group with a 'source'."""
    def leaf(v, path, kind, prov, whole):
        if is_sourced(v):
            yield path, kind, v["value"], {k: v[k] for k in PROVENANCE_KEYS if k in v}, whole
        elif isinstance(v, list):
            for i, sub in enumerate(v):
                yield from leaf(sub, f"{path}[{i}]", kind, prov, False)
        elif not (isinstance(v, bool) or v is None or isinstance(v, dict)):
            yield path, kind, v, prov, whole

    def walk(v, path, node, prov):
        here = {k: v[k] for k in PROVENANCE_KEYS if k in v} if "source" in v else prov
        props = object_props(node) or {}
        for k, sub in v.items():
            if k in PROVENANCE_KEYS:
                continue
            at = f"{path}.{k}" if path else k
            kind = unit(props.get(k))
            if kind:
                yield from leaf(sub, at, kind, here, True)
            elif isinstance(sub, dict):
                yield from walk(sub, at, props.get(k), here)
    yield from walk(data, "", schema(), {})


def unit_at(path_keys: list) -> str | None:
    """The x-unit of the field at a parsed path (list indices step into items)."""
    node: dict | None = schema()
    for k in path_keys:
        if isinstance(k, int):
            node = items(node)
            continue
        props = object_props(node) or {}
        if k not in props:
            return None
        node = props[k]
        if unit(node):
            return unit(node)
    return unit(node)
