"""`./run.sh simulate`: a static program of the user's on a platform, with a machine,
printed in the one stats format (trapline/simstats.py, schema
trapline/schema/simulate.schema.json).

    simulate --machine M [--platform P | --compare P1,P2] [--guest] [--set k=v ...]
             [--timeout S] [--format table|json] -- PROGRAM [ARGS]

The architecture follows from the machine (--arch, when given, must agree). Every
check runs before any work, each one line and exit 2: the machine and its --set
fields, the platform (unknown, unavailable here, or one that cannot run a program
in this mode: it says why, problem and Engine.problem), the program (missing, not
ELF, another arch, not static: trapline/program.py). A program that does not exit
0, or that did not end (killed at --timeout, a guest that crashed), exits 1 with
the tail of its output or of the guest's console; the stats are still printed.
"""

from __future__ import annotations

import sys

from trapline import arch as arch_table, machine as machines, program as programs, simstats
from trapline.errors import UsageError

DEFAULT_TIMEOUT_S = 900
GUEST = "guest"  # the mode --guest asks for (base.Platform.engines)
FORMATS = ("table", "json")


def _platforms(args) -> list[str]:
    from trapline import platforms
    if args.compare and args.platform:
        raise UsageError("simulate: --compare names the platforms; give it or --platform, not both")
    names = [n.strip() for n in args.compare.split(",")] if args.compare else [args.platform]
    if args.compare and (len(names) < 2 or not all(names) or len(set(names)) != len(names)):
        raise UsageError(f"simulate --compare takes two or more different platforms separated by commas, "
                         f"not '{args.compare}'; valid choices: {', '.join(platforms.names())}")
    return [n or platforms.machine_platforms()[0] for n in names]


def problem(cls, machine, mode: str) -> str | None:
    """Why platform `cls` cannot run a program of `machine` in `mode` (one sentence naming
    what would work), or None when it can: it has no engine for the mode, runs another
    architecture, or its engine says why (Engine.problem). Asked before anything runs."""
    if not cls.engines:
        return f"platform '{cls.name}' does not run a user's program"
    if mode not in cls.engines:
        return f"platform '{cls.name}' runs a program only in {' or '.join(cls.engines)} mode, not {mode}"
    if cls.arch and machine.arch != cls.arch:
        return f"platform '{cls.name}' runs only {cls.arch} programs and machine '{machine.name}' is {machine.arch}"
    return cls.engines[mode].problem(machine)


def prepare(args) -> tuple:
    """Everything checked, nothing run: (machine, program, argv, [engine]), each platform
    looked up once and its engine made for the machine and mode, in one run context."""
    from trapline import platforms
    from trapline.context import RunContext
    if args.arch:
        arch_table.get(args.arch)
    sets = list(dict(args.set).items())  # (path, value) pairs, as the command line split them
    m = machines.load(args.machine, sets=sets)
    if args.arch and m.arch != args.arch:
        raise UsageError(f"machine '{m.name}' describes a {m.arch} machine, not {args.arch}")
    chosen = []
    ctx = RunContext.make()
    for name in _platforms(args):
        cls = platforms.check(name)
        mode = GUEST if args.guest else next(iter(cls.engines), GUEST)
        why = problem(cls, m, mode)
        if why:
            able = [n for n, c in platforms.all().items() if c.engines]
            raise UsageError(f"simulate --platform {name}: {why}; platforms that run a program: {', '.join(able)}")
        if sets and not cls.takes_machine:
            raise UsageError(f"simulate --set: platform '{name}' does not model a machine, so machine fields do not "
                             f"apply to it; they apply to {platforms.machine_options()}")
        chosen.append((cls(ctx), mode))
    prog = list(args.program[1:] if args.program[:1] == ["--"] else args.program)
    if not prog:
        raise UsageError("simulate needs a program after --: simulate --machine M -- PROGRAM [ARGS]")
    p = programs.check(prog[0], m.arch)
    argv = [p.path, *prog[1:]]
    if any(mode == GUEST for _, mode in chosen):
        from trapline import guest
        guest.program_command(p.path, argv[1:])  # arguments the guest's init can take, checked first
    return m, p, argv, [plat.engine(m, mode) for plat, mode in chosen]


def main(args) -> int:
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    m, p, argv, engines = prepare(args)
    runs, failed = [], False
    for engine in engines:
        r = engine.simulate(p, argv, args.timeout or DEFAULT_TIMEOUT_S)
        sys.stderr.write(r.stdout + r.stderr)
        if r.error:
            print(f"trapline: failed: {engine.platform.name}: {r.error}", file=sys.stderr)
        failed |= bool(r.error) or r.stats["exit_status"] != 0
        r.stats["program_counts"] = simstats.program_counts(r.stdout)
        runs.append(r.stats)
    if len(runs) == 1:
        sys.stdout.write(simstats.dumps(runs[0]) if fmt == "json" else simstats.table(runs[0]))
    else:
        sys.stdout.write(simstats.dumps({"runs": runs, "compare": simstats.compare(runs)}) if fmt == "json"
                         else simstats.compare_table(runs))
    return 1 if failed else 0
