"""./run.sh gem5 ...: trapline's gem5 from the command line.

    gem5 build [--source TARBALL] [-j N]      build trapline's gem5 into the cache (from_source.py)
    gem5 which [--gem5 PATH]                  the gem5 trapline would run, and what it is (binary.py)
    gem5 machine --machine M [--set k=v ...] [-o FILE]
                                              a machine as JSON for gem5_configs/run_se.py (machine_json.py)

`gem5 --machine M ...` (no word after gem5) is `gem5 machine --machine M ...`
(trapline.cli.DEFAULT_WORDS).
"""

from __future__ import annotations

import argparse
import json


def add_arguments(g: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The gem5 command's words and options, on its parser `g`."""
    from trapline.platforms.gem5 import from_source, machine_json
    gs = g.add_subparsers(dest="gem5_command", metavar="{build,which,machine}", parser_class=type(g))
    gs.required = True
    from_source.parser(gs.add_parser("build", help="build trapline's gem5 (gem5 v24.0.0.1 and trapline's "
                                                    "changes) into the cache"))
    w = gs.add_parser("which", help="the gem5 the gem5 platform would run, and what it is (JSON)")
    w.add_argument("--gem5", metavar="PATH", help="this binary instead of the one found")
    machine_json.add_options(gs.add_parser("machine", help="a machine description as JSON for gem5_configs/run_se.py"))
    return g


def run(args) -> int:
    from trapline.platforms.gem5 import binary, from_source, machine_json
    if args.gem5_command == "build":
        print(from_source.build(args.source, args.jobs))
    elif args.gem5_command == "which":
        print(json.dumps(binary.facts(binary.find(args.gem5)), indent=2))
    else:
        machine_json.write(args.machine, args.set, args.output)
    return 0
