"""Run a static program in gem5's SE mode on a trapline machine.

    python -m trapline.platforms.gem5 --machine x86-2012-server -o machine.json      # trapline side
    gem5 gem5_configs/run_se.py --params machine.json [--cpu timing|minor|o3] [--cores N] -- PROGRAM [ARGS]

``gem5`` is a gem5 binary built for the machine's ISA (build/X86/gem5.opt,
build/SPARC/gem5.opt, build/ARM/gem5.opt, or build/ALL/gem5.opt). The machine
comes as JSON, so gem5's embedded Python needs nothing beyond the standard
library. The JSON is the typed machine (every number already in bytes, Hz or
cycles); trapline_gem5.params maps it to gem5's parameters. The script prints
the fields gem5 does not model (the notes), runs the program to its exit, and
prints where stats.txt is (gem5's --outdir, m5out by default; gem5 writes it as
it exits, src/python/m5/simulate.py registers stats.dump with atexit); the
parameters it ran with are written beside it as trapline-params.json, and how
the run ended as trapline-result.json ({"cause", "code", "tick", ...}). gem5
then exits with the program's exit status.

A program built with -DTL_GEM5 (trapline's gem5 kernel flavour) resets gem5's
statistics where each measured region begins and dumps them where it ends (m5
ops), so stats.txt holds one block per region and a last block from the last
region's start to the exit (trapline.platforms.gem5.stats reads them).

--stdout/--stderr send the program's output to files (gem5's own messages stay
on gem5's stderr); --cores gives the processor that many cores (SE mode runs
each thread of the program on a core of its own); --etc gives the program a
folder of the host as its /etc (a gem5 RedirectPath); --max-ticks stops the run
after that many ticks (0: build and instantiate the board, write config.ini,
and stop before the first instruction).

gem5 API used here, checked against the gem5 sources (v23/v24 stdlib):

    m5.options.outdir           gem5's output directory (as read by configs/example/gem5_library scripts)
    BinaryResource(local_path)  src/python/gem5/resources/resource.py
    board.set_se_binary_workload(binary=..., arguments=[...], stdout_file=..., stderr_file=...)
                                src/python/gem5/components/boards/se_binary_workload.py
    Simulator(board=..., max_ticks=...).run(), get_current_tick(), get_last_exit_event_cause(),
    get_last_exit_event_code()  src/python/gem5/simulate/simulator.py
    CPUTypes                    src/python/gem5/components/processors/cpu_types.py
    RedirectPath(app_path=..., host_paths=[...]), System.redirect_paths
                                src/sim/RedirectPath.py, src/sim/System.py; applied by
                                Process::checkPathRedirect (src/sim/process.cc)
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import m5

from gem5.components.processors.cpu_types import CPUTypes
from gem5.resources.resource import BinaryResource
from gem5.simulate.simulator import Simulator
from m5.objects import RedirectPath

from trapline_gem5.board import TraplineBoard
from trapline_gem5.params import from_machine

CPU_TYPES = {"timing": CPUTypes.TIMING, "minor": CPUTypes.MINOR, "o3": CPUTypes.O3}
# the exit cause when the program's last thread exits (exitSimLoop in src/sim/syscall_emul.cc)
PROGRAM_EXIT = "exiting with last active thread context"


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="gem5 gem5_configs/run_se.py",
        description="Run a static program in SE mode on a trapline machine (JSON from python -m trapline.platforms.gem5).")
    ap.add_argument("--params", required=True, help="machine JSON written by python -m trapline.platforms.gem5")
    ap.add_argument("--cpu", choices=sorted(CPU_TYPES), default="timing",
                    help="gem5 CPU model: timing (default; not pipelined), minor (in-order pipeline), o3")
    ap.add_argument("--mem-size", default=None, help="simulated memory size (default from the JSON, 512MiB)")
    ap.add_argument("--cores", type=int, default=1, help="cores (SE mode: one per thread of the program; default 1)")
    ap.add_argument("--stdout", default=None, help="write the program's standard output to this file")
    ap.add_argument("--stderr", default=None, help="write the program's standard error to this file")
    ap.add_argument("--argv0", default=None,
                    help="the program's argv[0] (default: PROGRAM as given; gem5 loads PROGRAM from its absolute path)")
    ap.add_argument("--etc", default=None,
                    help="a folder the program sees as /etc (trapline: an empty one; default: the host's /etc)")
    ap.add_argument("--max-ticks", type=int, default=None,
                    help="stop after this many ticks (0: instantiate the board, write config.ini, and stop)")
    ap.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    args = ap.parse_args(argv)
    if args.cores < 1:
        ap.error(f"--cores {args.cores}: needs at least 1")
    args.program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not args.program:
        ap.error("needs a program after --: run_se.py --params machine.json -- PROGRAM [ARGS]")
    if args.etc is not None and not os.path.isdir(args.etc):
        ap.error(f"--etc {args.etc}: not a folder")
    if not os.path.isfile(args.program[0]):
        ap.error(f"program '{args.program[0]}' is not a file")
    return args


def trapline_changes():
    """trapline's changes in this gem5 (gem5_configs/changes/; m5.trapline_build, written by
    ./run.sh gem5 build); none in a stock gem5."""
    try:
        from m5 import trapline_build
    except ImportError:
        return []
    return list(trapline_build.CHANGES)


def main(argv):
    args = parse_args(argv)
    with open(args.params) as f:
        params = from_machine(json.load(f), changes=trapline_changes())

    for n in params.notes:
        print(f"trapline: not modelled by gem5: {n.field} = {n.value}: {n.text}", file=sys.stderr)

    board = TraplineBoard(params, cpu_type=CPU_TYPES[args.cpu], mem_size=args.mem_size, num_cores=args.cores)
    board.set_se_binary_workload(
        binary=BinaryResource(local_path=os.path.abspath(args.program[0])),
        arguments=list(args.program[1:]),
        stdout_file=Path(os.path.abspath(args.stdout)) if args.stdout else None,
        stderr_file=Path(os.path.abspath(args.stderr)) if args.stderr else None,
    )

    # argv[0] as --argv0 says (trapline: ./<name>), not the absolute path gem5 loads the program from:
    # gem5 writes argv[0] onto the program's initial stack, also as AT_EXECFN (src/arch/*/process.cc),
    # so a path would move the stack, and with it the figures, with the folder the program sits in
    argv = [args.argv0 if args.argv0 is not None else args.program[0]] + list(args.program[1:])
    for core in board.get_processor().get_cores():
        for process in core.get_simobject().workload:
            process.cmd = argv

    # /etc as --etc says, not the host's (why: trapline.platforms.gem5.run.GUEST_ETC, docs/gem5.md "The
    # program's /etc"); a RedirectPath's paths are folders (src/sim/redirect_path.cc, normalizePath,
    # appends "/"), so the folder is redirected, not /etc/ld.so.cache alone
    if args.etc is not None:
        board.redirect_paths = [RedirectPath(app_path="/etc", host_paths=[os.path.abspath(args.etc)])]

    outdir = m5.options.outdir
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "trapline-params.json"), "w") as f:
        f.write(params.to_json())

    if args.max_ticks is None:
        simulator = Simulator(board=board)
    else:  # gem5 needs at least one tick to stop at
        simulator = Simulator(board=board, max_ticks=max(1, args.max_ticks))
    simulator.run()
    cause, code = simulator.get_last_exit_event_cause(), simulator.get_last_exit_event_code()
    tick = simulator.get_current_tick()
    print(f"trapline: {params.machine} ({args.cpu} CPU, {args.cores} core(s)) exited @ tick {tick}: {cause}",
          file=sys.stderr)
    program_exit = cause == PROGRAM_EXIT
    with open(os.path.join(outdir, "trapline-result.json"), "w") as f:
        json.dump({"cause": cause, "code": code, "tick": tick, "program_exited": program_exit,
                   "machine": params.machine, "cpu": args.cpu, "cores": args.cores}, f)
    print(os.path.join(outdir, "stats.txt"))
    sys.stdout.flush()
    if program_exit and code:
        sys.exit(code)


# gem5 runs a config script with __name__ == "__m5_main__" (src/python/m5/main.py).
if __name__ in ("__m5_main__", "__main__"):
    main(sys.argv[1:])
