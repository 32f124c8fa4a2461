"""A machine as typed JSON for gem5 (gem5_configs/run_se.py).

    ./run.sh gem5 --machine x86-2012-server [--set caches.l1d.line=32B ...] [-o machine.json]
    python -m trapline.platforms.gem5 ...            (the same, from the venv)

Loads the machine as every other lane does (trapline.machine.load: same
checks, same --set overrides, same errors) and writes its typed numbers as
JSON: every field with the text as written and, for a number, its kind and its
value in the base unit (bytes, Hz, cycles at the machine's clock), plus gem5's
ISA. Inside gem5, gem5_configs/trapline_gem5/params.py maps that JSON to gem5's
parameters without parsing a unit (gem5's embedded Python needs no PyYAML and
no trapline). Bad input exits 2 with one line naming the valid choices, as
./run.sh does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trapline import arch as arch_table, machine as machines
from trapline.errors import UsageError, exit_status
from trapline.machine import paths, schema
from trapline.paths import GEM5_CONFIGS
from trapline.results import atomic_write

# gem5's side of the machine mapping, trapline_gem5.params (plain Python, no gem5): imported
# as the module run_se.py imports, from gem5_configs/ (its reader of this JSON: FORMAT, MACHINE_KIND)
if str(GEM5_CONFIGS) not in sys.path:
    sys.path.append(str(GEM5_CONFIGS))
from trapline_gem5 import params  # noqa: E402
# gem5.isas.ISA member names (src/python/gem5/isas.py), by architecture
ISA_OF_ARCH = {name: a.gem5_isa for name, a in arch_table.ARCHES.items()}  # the architecture table
# top-level text that is no machine parameter (gem5 could not take it)
_NOT_FIELDS = ("name", "description", "claims", "note")


def _plain(v: Any) -> Any:
    if paths.is_sourced(v):
        return _plain(v["value"])
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def fields(m: machines.Machine) -> dict[str, dict]:
    """Every field of the machine that carries information, by dotted path: {"text": as
    written} and, for a number, "kind" and "value" (its base unit). A list
    (numa.latency_ns) is one field whose value is the list of its numbers."""
    out: dict[str, dict] = {}

    def walk(v: Any, path: str, keys: list) -> None:
        if isinstance(v, dict) and not paths.is_sourced(v):
            for k, sub in v.items():
                if k in paths.PROVENANCE_KEYS or (not path and k in _NOT_FIELDS):
                    continue
                walk(sub, f"{path}.{k}" if path else k, keys + [k])
            return
        f: dict[str, Any] = {"text": _plain(v)}
        kind = schema.unit_at(keys)
        if kind and isinstance(f["text"], list):
            f.update(kind=kind, value=_values(m, path, f["text"]))
        elif kind:
            f.update(kind=kind, value=m.quantity(path).value)
        out[path] = f

    walk(m.data, "", [])
    return out


def _values(m: machines.Machine, path: str, text: list) -> list:
    return [_values(m, f"{path}[{i}]", t) if isinstance(t, list) else m.quantity(f"{path}[{i}]").value
            for i, t in enumerate(text)]


def isa(machine: machines.Machine) -> str:
    """The machine's gem5 ISA (gem5.isas.ISA member name), from the architecture table."""
    if machine.arch not in ISA_OF_ARCH:
        raise UsageError(f"arch: '{machine.arch}' has no gem5 ISA here; valid choices: {', '.join(ISA_OF_ARCH)}")
    return ISA_OF_ARCH[machine.arch]


def export(machine: machines.Machine) -> dict:
    """The JSON-ready typed machine that run_se.py (trapline_gem5.params.from_machine) reads."""
    return {"format": params.FORMAT, "kind": params.MACHINE_KIND, "machine": machine.name, "sets": list(machine.sets),
            "arch": machine.arch, "isa": isa(machine), "clock_hz": machine.clock_hz,
            "fields": fields(machine)}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, no usage dump (as trapline.cli)
        raise UsageError(message)


def add_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options that write a machine as JSON (--machine, --set, -o), on `p`: here and on
    `./run.sh gem5 machine` (trapline.platforms.gem5.commands)."""
    p.add_argument("--machine", required=True, help="a machine name (gem5_configs/machines/) or a YAML file")
    p.add_argument("--set", action="append", default=[], type=machines.pair, metavar="PATH=VALUE",
                   help="override a machine field, e.g. caches.l1d.size=64kB (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the JSON here (default: standard output)")
    return p


def parser() -> argparse.ArgumentParser:
    return add_options(_Parser(prog="python -m trapline.platforms.gem5",
                               description="Write a machine description as typed JSON for gem5_configs/run_se.py"))


def write(machine: str, sets: list[machines.Pair], output: str | None) -> None:
    """Load the machine (with the --set (path, value) pairs) and write its typed JSON to `output`
    atomically (printing its path) or to standard output. Bad input raises
    UsageError naming the field or the valid choices."""
    text = json.dumps(export(machines.load(machine, sets=sets)), indent=2) + "\n"
    if not output:
        sys.stdout.write(text)
        return
    out = Path(output)
    if out.is_dir():
        raise UsageError(f"-o {output}: is a directory; name the file to write, e.g. {out / 'machine.json'}")
    try:
        atomic_write(out, text, parents=False)  # (a failed write leaves no temporary file)
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror}") from None
    print(out)


def cli_status(fn) -> int:
    """Run fn() for a `python -m trapline.platforms.gem5...` command: 0, or the CLI's one line and
    status for an error (trapline.errors.EXIT_STATUSES), as ./run.sh prints them."""
    return exit_status(lambda: fn() and 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv

    def go():
        args = parser().parse_args(argv)
        write(args.machine, args.set, args.output)
    return cli_status(go)


if __name__ == "__main__":
    sys.exit(main())
