"""A machine description as JSON for gem5 (gem5_configs/run_se.py).

    ./run.sh gem5 --machine x86-2012-server [--set caches.l1d.line=32B ...] [-o machine.json]
    python -m trapline.gem5 ...            (the same, from the venv)

Loads the machine as every other lane does (trapline.machine.load: same
checks, same --set overrides, same errors), converts it with
gem5_configs/trapline_gem5/params.py and writes the JSON that run_se.py reads
inside gem5, so gem5's embedded Python needs no PyYAML. What gem5 cannot
model is listed in the JSON's "notes", one per machine field. Bad input exits
2 with one line naming the valid choices, as ./run.sh does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trapline import machine as machines
from trapline.errors import UsageError

GEM5_CONFIGS = Path(__file__).resolve().parent.parent / "gem5_configs"
if str(GEM5_CONFIGS) not in sys.path:
    sys.path.insert(0, str(GEM5_CONFIGS))

from trapline_gem5 import params as gem5_params  # noqa: E402  (pure Python, no gem5)


def params(machine: machines.Machine) -> "gem5_params.Gem5Params":
    """The Gem5Params of a loaded machine."""
    return gem5_params.from_machine(machine)


def export(machine: machines.Machine) -> dict:
    """The JSON-ready dict run_se.py reads (Gem5Params.to_dict)."""
    return params(machine).to_dict()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, no usage dump (as trapline.cli)
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m trapline.gem5",
                description="Write a machine description as JSON for gem5_configs/run_se.py")
    p.add_argument("--machine", required=True, help="a machine name (gem5_configs/machines/) or a YAML file")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a machine field, e.g. caches.l1d.size=64kB (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the JSON here (default: standard output)")
    return p


def write(machine: str, sets: list[str], output: str | None) -> None:
    """Load the machine (with --set overrides), convert it, and write the JSON to
    `output` atomically (printing its path) or to standard output. Bad input
    raises UsageError naming the field or the valid choices."""
    m = machines.load(machine, sets=sets)
    try:
        text = params(m).to_json()
    except gem5_params.ParamsError as e:
        raise UsageError(str(e)) from None
    if not output:
        sys.stdout.write(text)
        return
    out = Path(output)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(out)
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror}") from None
    print(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser().parse_args(argv)
        write(args.machine, args.set, args.output)
    except UsageError as e:
        print(f"trapline: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
