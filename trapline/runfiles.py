"""A run folder's files, read and checked: the one reader of every command that reads a
run (report, fidelity, cite, bundle, verify, and a run that resumes).

Each file is checked against its schema (schema/run-*.schema.json) before anyone
uses it, so a damaged or foreign file is one line naming the file, the field and
what was expected (UsageError: exit 2), never a traceback half-way through a
report, and nothing is written on its account:

    summary.json    run-summary    a finished run: its entries, in the report's order
    manifest.json   run-manifest   what made it (a run or a sweep)
    entries/*.json  run-entry      one experiment on one platform
    state.json      run-state      a run in progress or interrupted (.incomplete/<run-id>/)

A file is damaged when it is missing, not a regular file (a directory, a FIFO), not
UTF-8 text, not JSON (truncated), or JSON that its schema refuses (a list where an
object belongs, a field missing, a dict where a number belongs). An entry is foreign
when its own id and platform are not the ones its file name says.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from trapline.errors import UsageError

SCHEMAS = Path(__file__).resolve().parent / "schema"
KINDS = {"summary": "run-summary", "manifest": "run-manifest", "entry": "run-entry", "state": "run-state"}
# what a damaged file of a finished run needs (a resumed run's and a bundle's say their own)
RERUN = "the run is damaged; rerun it"
JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "true or false", int: "a whole number",
              float: "a number", type(None): "null"}
SCHEMA_TYPES = {"object": "an object", "array": "an array", "string": "a string", "number": "a number",
                "integer": "a whole number", "boolean": "true or false", "null": "null"}


class Damaged(UsageError):
    """A file of a run folder that is missing, unreadable or not what its schema says."""


@lru_cache(maxsize=None)
def schema(kind: str) -> dict:
    return json.loads((SCHEMAS / f"{KINDS[kind]}.schema.json").read_text())


def _brief(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]


def _expected(sub: dict) -> str:
    """What a schema (of one field) asks for, in words."""
    if "enum" in sub:
        return "one of " + ", ".join(map(str, sub["enum"]))
    kinds = sub.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    return " or ".join(SCHEMA_TYPES.get(k, k) for k in kinds) or "a value"


def problem(err) -> str:
    """One schema error as 'field: what is wrong (what was expected)'."""
    from trapline.yamlfile import where
    path = list(err.absolute_path)
    inst = err.instance
    if err.validator == "required":
        missing = [k for k in err.validator_value if isinstance(inst, dict) and k not in inst]
        k = missing[0] if missing else "?"
        return f"{where(path + [k])}: missing (expected {_expected(err.schema.get('properties', {}).get(k, {}))})"
    at = where(path)
    if err.validator == "type":
        return f"{at}: is {JSON_TYPES.get(type(inst), type(inst).__name__)} ({_brief(inst)}), expected {_expected(err.schema)}"
    if err.validator == "enum":
        return f"{at}: {_brief(inst)} is not valid, expected {_expected(err.schema)}"
    if err.validator == "pattern":
        return f"{at}: {_brief(inst)} is not valid, expected {err.schema.get('description') or 'to match ' + err.validator_value}"
    if err.validator == "minimum":
        return f"{at}: {_brief(inst)} is below {err.validator_value}"
    return f"{at}: {err.message}"


def check(data: Any, kind: str, name: str, fix: str = RERUN) -> Any:
    """`data` (of the file `name`) if its schema takes it; else Damaged naming the first
    problem (the shallowest), how many more there are, and `fix`."""
    from trapline.yamlfile import schema_errors
    errors = sorted(schema_errors(data, schema(kind)), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise Damaged(f"{name}: {problem(errors[0])}{more}; {fix}")
    return data


def read_bytes(path: Path, fix: str = RERUN) -> bytes:
    """A regular file's bytes, or Damaged: missing, a directory or another kind of file
    (never opened in a way that could block: a FIFO), or unreadable."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Damaged(f"{path}: missing; {fix}") from None
    except OSError as e:
        raise Damaged(f"{path}: cannot be read ({e.strerror}); {fix}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise Damaged(f"{path}: is {kind}, expected a JSON file; {fix}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError as e:
        raise Damaged(f"{path}: cannot be read ({e.strerror}); {fix}") from None
    finally:
        os.close(fd)


def parse(raw: bytes, name: str, fix: str = RERUN) -> Any:
    """The JSON in `raw` (the file `name`), or Damaged: not UTF-8 text (a binary file),
    not JSON (a truncated file: where it stops), nested too deep to read, or holding what
    trapline never writes and a report could not show (unwritable).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Damaged(f"{name}: is not a text file (byte {e.start} is not UTF-8), expected JSON; {fix}") from None
    if not text.strip():
        raise Damaged(f"{name}: is empty, expected JSON; {fix}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        cut = (" (it ends early: truncated)" if e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
               else "")
        raise Damaged(f"{name}: is not valid JSON{cut}: {e.msg} at line {e.lineno} column {e.colno}; {fix}") from None
    except RecursionError:
        raise Damaged(f"{name}: is JSON nested too deep to read; {fix}") from None
    bad = unwritable(data)
    if bad:
        raise Damaged(f"{name}: {bad}; {fix}")
    return data


def unwritable(data: Any, path: tuple = ()) -> str | None:
    """The first value of parsed JSON that a run file never holds and a report cannot show,
    as 'field: what it is' (None when there is none): a number that is not finite (NaN, or
    beyond what a float holds, such as 1e400, read as infinity), or text that is not Unicode
    (an escaped lone surrogate, such as \\udc80, which no UTF-8 file can hold)."""
    from trapline.yamlfile import where
    if isinstance(data, float) and not math.isfinite(data):
        return f"{where(list(path))}: is {data!r} (NaN or a number beyond what a float holds), expected a finite number"
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as e:
            return (f"{where(list(path))}: holds {data[e.start]!r} at character {e.start}, a lone surrogate "
                    f"that is not text (no UTF-8 file can hold it)")
        return None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        if isinstance(k, str) and unwritable(k):
            return f"{where(list(path))}: a field's name {unwritable(k).split(': ', 1)[1]}"
        bad = unwritable(v, path + (k,))
        if bad:
            return bad
    return None


def read(path: Path, kind: str, fix: str = RERUN) -> Any:
    """The file at `path`, read and checked against the schema of `kind` (KINDS)."""
    return check(parse(read_bytes(path, fix), str(path), fix), kind, str(path), fix)


def entry_name(exp_id: str, platform: str) -> str:
    return f"entries/{exp_id}.{platform}.json"


def check_entry(data: Any, name: str, exp_id: str, platform: str, fix: str = RERUN) -> dict:
    """An entry (of the file `name`) checked against its schema and its file name."""
    check(data, "entry", name, fix)
    for field, want in (("id", exp_id), ("platform", platform)):
        if data[field] != want:
            raise Damaged(f"{name}: {field}: is {_brief(data[field])}, expected {_brief(want)} "
                          f"(the entry's file name); {fix}")
    return data


def entry(path: Path, exp_id: str, platform: str, fix: str = RERUN) -> dict:
    """entries/<exp_id>.<platform>.json at `path`, read and checked."""
    return check_entry(parse(read_bytes(path, fix), str(path), fix), str(path), exp_id, platform, fix)


def manifest(run_dir: Path, fix: str = RERUN) -> tuple[dict, str]:
    """manifest.json, checked, and the sha256 of its bytes."""
    path = Path(run_dir) / "manifest.json"
    raw = read_bytes(path, fix)
    return check(parse(raw, str(path), fix), "manifest", str(path), fix), hashlib.sha256(raw).hexdigest()


def load(run_dir: Path) -> tuple[dict, dict, str, list[dict]]:
    """A finished run folder: summary.json, manifest.json (and its sha256) and the entries
    the summary names, in its order, every one checked first."""
    run_dir = Path(run_dir)
    summary = read(run_dir / "summary.json", "summary")
    man, sha = manifest(run_dir)
    entries = []
    for e in summary["experiments"]:
        p = run_dir / entry_name(e["id"], e["platform"])
        if not p.exists() and not p.is_symlink():
            raise Damaged(f"run {run_dir.name} is missing {entry_name(e['id'], e['platform'])} (named in its "
                          f"summary.json); {RERUN}")
        entries.append(entry(p, e["id"], e["platform"]))
    return summary, man, sha, entries


def resumable(run_dir: Path, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """The entries an interrupted run already has, of those keyed (id, platform), each
    checked; a damaged one is Damaged saying how to go on."""
    fix = (f"move it away to run that entry again, or start a new run with --fresh "
           f"(the interrupted run is {run_dir})")
    out = {}
    for exp_id, platform in keys:
        p = Path(run_dir) / entry_name(exp_id, platform)
        if p.exists() or p.is_symlink():
            out[exp_id, platform] = entry(p, exp_id, platform, fix)
    return out


def check_states(incomplete: Path) -> None:
    """Every state.json of the interrupted runs a run may resume (results/.incomplete/*/),
    checked: one that cannot be read would be skipped, and its run never resumed."""
    for st in sorted(Path(incomplete).glob("*/state.json")):
        read(st, "state", f"move {st.parent} away (or start a new run with --fresh)")
