"""Reading the project's YAML files (experiments, machines) and wording their
schema errors: one reader and one set of sentences for every kind of file.

`read_mapping` refuses what YAML alone would let through: a key written twice
in one mapping (YAML's "last one wins" silently ran a machine at the second
clock), a file that is not text, a path that is missing or a directory, and a
hostile shape: nesting deeper than MAX_DEPTH or aliases that expand to more than
MAX_NODES nodes (or refer to themselves). The shape is read from libyaml's event
stream, counting as it goes and before any object is built (`_check_shape`): a
document of any depth is refused without recursing into it (the composer is
recursive C and a 50,000-deep file crashed it), and an alias bomb is refused
in the time it takes to read its few lines, not to walk its expansion.

`load_text` is the same reader for one value (a --set on a machine); both read
numbers the way YAML 1.2 does ("1e30" is a number, not the string YAML 1.1
makes of it). Each error is one line naming the file, and the key or line
where there is one.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

# PyYAML is imported when a file is read (a description the cache knows is not: trapline.checked)

from trapline.paths import ROOT


def shown(path: Path) -> str:
    """A path as the user should read it: relative to the clone where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


@lru_cache(maxsize=1)
def _loader():
    """The project's YAML loader class (built once, on first use)."""
    import yaml

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

        def construct_yaml_int(self, node):
            """An integer, or one error naming its line when it has more digits than Python
            converts (4,300: a ValueError, then a traceback)."""
            try:
                return super().construct_yaml_int(node)
            except ValueError:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the number on line {node.start_mark.line + 1} has {len(node.value):,} digits, "
                    f"more than any machine or experiment has", node.start_mark) from None


    _UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
    # YAML 1.2's floats without a dot ("1e30", "2E-3"), which YAML 1.1 reads as strings (so
    # "--set cpi=1e30" was told it needs a number, "got '1e30'"); after 1.1's own resolvers.
    _UniqueKeyLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return _UniqueKeyLoader


MAX_DEPTH = 100       # the project's YAML files nest at most 8 deep
MAX_NODES = 100_000   # nodes after alias expansion; the largest project file has about 1,000


def _check_shape(text: str, rel: str, error: type[Exception]) -> None:
    """Refuse a document nested deeper than MAX_DEPTH, or whose aliases expand to more than
    MAX_NODES nodes or into themselves, from libyaml's events (no recursion, no expansion):
    each open collection counts its expanded nodes and height, each anchor keeps its own,
    and an alias adds its anchor's. A YAML syntax error is raised as yaml.YAMLError."""
    stack: list[list] = []                            # per open collection: [nodes, height, anchor]
    anchors: dict[str, tuple[int, int] | None] = {}  # anchor -> (nodes, height); None while open
    total = 0
    import yaml
    from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
    for ev in yaml.parse(text, Loader=_loader()):
        if isinstance(ev, CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise error(f"{rel}: nested more than {MAX_DEPTH} levels deep (line {ev.start_mark.line + 1}); "
                            f"a description nests a few levels")
            stack.append([1, 1, ev.anchor])
            if ev.anchor:
                anchors[ev.anchor] = None
            total += 1
        else:
            if isinstance(ev, CollectionEndEvent):
                nodes, height, anchor = stack.pop()
                if anchor:
                    anchors[anchor] = (nodes, height)
            elif isinstance(ev, ScalarEvent):
                nodes, height = 1, 0
                if ev.anchor:
                    anchors[ev.anchor] = (1, 0)
                total += 1
            elif isinstance(ev, AliasEvent):
                if ev.anchor in anchors and anchors[ev.anchor] is None:
                    raise error(f"{rel}: the alias *{ev.anchor} (line {ev.start_mark.line + 1}) is inside its own "
                                f"anchor &{ev.anchor}, which would make it endless")
                nodes, height = anchors.get(ev.anchor) or (1, 0)  # (an undefined alias: the loader says so)
                if len(stack) + height > MAX_DEPTH:
                    raise error(f"{rel}: nested more than {MAX_DEPTH} levels deep once the alias *{ev.anchor} "
                                f"(line {ev.start_mark.line + 1}) is expanded; a description nests a few levels")
                total += nodes
            else:
                continue
            if stack:
                parent = stack[-1]
                parent[0] += nodes
                parent[1] = max(parent[1], height + 1)
        if total > MAX_NODES:
            raise error(f"{rel}: more than {MAX_NODES:,} values once its aliases are expanded "
                        f"(line {ev.start_mark.line + 1}); a description has a few thousand at most")


def load_text(text: str, rel: str, error: type[Exception]) -> Any:
    """The YAML document in `text` (`rel` names it in messages): its shape checked first
    (`_check_shape`, one line as `error`), then loaded. A YAML syntax error, or a key
    written twice, is raised as yaml.YAMLError for the caller to word."""
    _check_shape(text, rel, error)
    import yaml
    return yaml.load(text, Loader=_loader())  # noqa: S506 (a SafeLoader subclass)


def read_mapping(path: Path, error: type[Exception]) -> dict:
    """The YAML mapping in `path`, or `error` with one line naming the file and what is wrong."""
    import yaml
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
        data = load_text(text, rel, error)
    except yaml.constructor.ConstructorError as e:
        raise error(f"{rel}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise error(f"{rel}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise error(f"{rel}: needs to be a mapping of fields, not {type(data).__name__}")
    return data


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
    import jsonschema  # (imported when a file is checked, not by every command: docs/performance.md)
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
