"""Reading the project's YAML files (experiments, machines) and wording their
schema errors: one reader and one set of sentences for every kind of file.

`read_mapping` refuses what YAML alone would let through: a key written twice
in one mapping (YAML's "last one wins" silently ran a machine at the second
clock), a file that is not text, nesting deep enough to exhaust the parser,
and a path that is missing or a directory. Each error is one line naming the
file, and the key or line where there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from trapline.paths import ROOT


def shown(path: Path) -> str:
    """A path as the user should read it: relative to the clone where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that rejects a key written twice in one mapping. With
    libyaml's parser where PyYAML has it (CSafeLoader: the same documents, the
    same constructor; the 11 experiment files in 0.02 s instead of 0.15 s, read
    by every run: docs/performance.md)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' is written twice (lines {seen[key]} and {line}); keep one",
                    key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_mapping(path: Path, error: type[Exception]) -> dict:
    """The YAML mapping in `path`, or `error` with one line naming the file and what is wrong."""
    rel = shown(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except IsADirectoryError:
        raise error(f"{rel}: is a directory, not a YAML file") from None
    except FileNotFoundError:
        raise error(f"{rel}: does not exist") from None
    except OSError as e:
        raise error(f"{rel}: cannot be read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise error(f"{rel}: is not a text file (not UTF-8); a YAML file is needed") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.constructor.ConstructorError as e:
        raise error(f"{rel}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise error(f"{rel}: not valid YAML: {e}".replace("\n", " ")) from None
    except RecursionError:
        raise error(f"{rel}: nested too deeply to be a description") from None
    if _depth(data) > MAX_DEPTH:  # (libyaml's parser takes any depth; PyYAML's own ran out of stack)
        raise error(f"{rel}: nested too deeply to be a description")
    if not isinstance(data, dict):
        raise error(f"{rel}: needs to be a mapping of fields, not {type(data).__name__}")
    return data


MAX_DEPTH = 100  # the project's YAML files nest at most 8 deep


def _depth(data) -> int:
    """How deeply lists and mappings nest in data (a scalar: 0), without recursion."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        d, n = todo.pop()
        kids = d.values() if isinstance(d, dict) else d if isinstance(d, list) else None
        if kids is None:
            continue
        deepest = max(deepest, n)
        if n <= MAX_DEPTH:
            todo.extend((k, n + 1) for k in kids)
    return deepest


def where(path) -> str:
    """A JSON-schema path as a dotted field name: platforms.host.runs[0].binary."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def schema_message(err: jsonschema.ValidationError) -> str:
    """One sentence for a schema error, naming the field and, for a closed set, the valid choices."""
    at = where(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        return f"{at}: unknown field {', '.join(repr(e) for e in extra)}; valid fields: {', '.join(allowed)}"
    if err.validator == "enum":
        return f"{at}: {err.instance!r} is not valid; choose one of: {', '.join(map(str, err.validator_value))}"
    if err.validator == "required":
        return f"{at}: {err.message}"
    if err.validator == "oneOf" and isinstance(err.instance, dict):
        return f"{at}: a metric needs exactly one of 'ratio' or 'value'"
    return f"{at}: {err.message}"


def schema_errors(data: Any, schema: dict) -> list[jsonschema.ValidationError]:
    """Every schema error in `data`, in field order."""
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
