"""The commands behind ./run.sh.

    list                                   every experiment id, then its description
    run ID [--platform P] [--set k=v ...] [--quick] [--fresh] [--images B]
    reproduce-all [--quick] [--platform P] [--fresh] [--images B]
    report [RUN-ID]                        redraw a finished run's report
    fidelity [RUN ...]                     the fidelity table of the runs' modelled figures, as markdown,
                                           and the simulators side by side
    build [--arch A ...]                   build the kernels (cached)
    images [--arch A ...] [--builder B] [--buildroot DIR]
                                           build the guest images (cached; B: debian or buildroot)
    simulate --machine M [--platform P | --compare P1,P2] [--guest] [--set k=v ...] [--timeout S]
             [--format table|json] -- PROGRAM [ARGS]
                                           a static program of yours on a platform, in one stats format
    sensitivity ID [--param PATH ...] [--factors 0.5,2] [--quick]
                                           the modelled headline against scaled machine parameters
    sweep ID [--platform P] --set k=v1,v2 [--set k2=...] [--quick] [--machine M]
             [--scheduler ADDRESS] [--workers N] [--fresh] [--images B]
                                           the experiment over a grid of values, on Dask (docs/sweeps.md)
    gem5 build [--source TARBALL] [-j N]   build trapline's gem5 into the cache (docs/gem5.md)
    gem5 which [--gem5 PATH]               the gem5 the gem5 platform runs, and what it is
    gem5 machine --machine M [--set k=v ...] [-o FILE]
                                           a machine as JSON for gem5_configs/run_se.py
    cite [RUN]                             BibTeX for trapline and a run (default: latest)
    bundle [RUN] [-o FILE]                 the run as a tarball with SHA256SUMS and .zenodo.json
    verify BUNDLE                          re-check a bundle's hashes, rerun its deterministic lanes
    test [pytest args]                     the test suite

Exit status: 0 when every entry ran (reproduced, differs or not-applicable); 1 when any
entry failed (or simulate's program failed); 2 for bad input, with one line that names
the field or argument and the valid choices, before any work starts; 130 when interrupted
(the errors' statuses: trapline.errors.EXIT_STATUSES; each command's handler: COMMANDS).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from trapline import arch, imagebuilders
from trapline.errors import UsageError, exit_status

# Each command imports what it uses (the schema validator, the report's matplotlib, Dask,
# the platforms), so that `list` or `simulate` does not pay for the others: docs/performance.md.


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, no usage dump
        raise UsageError(message)


# Commands made of words whose older form had none (`gem5 --machine M`): the word it meant.
DEFAULT_WORDS = {"gem5": "machine"}


def _with_default_word(argv: list[str]) -> list[str]:
    """argv with the command's default word put in when an option follows the command."""
    cmd = argv[0] if argv else None
    if cmd in DEFAULT_WORDS and len(argv) > 1 and argv[1].startswith("-") and argv[1] not in ("-h", "--help"):
        return [cmd, DEFAULT_WORDS[cmd], *argv[1:]]
    return argv


def _set(text: str) -> tuple[str, str]:
    """--set KEY=VALUE as its (key, value) pair (trapline.machine.sets.pair: the one split)."""
    from trapline.machine.sets import pair
    return pair(text)


def _seconds(text: str) -> float:
    """--timeout: a positive, finite number of seconds."""
    import math
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"--timeout takes a positive number of seconds, not '{text}'")
    return v


def _count(text: str) -> int:
    """--workers: a positive whole number."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a positive whole number, not '{text}'")
    return int(text)


def _images_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", metavar="BUILDER", default=None,
                   help=f"who builds the guest lanes' images: {', '.join(imagebuilders.names())} (default "
                        f"{imagebuilders.DEFAULT}; buildroot finds Buildroot in $BUILDROOT; docs/images.md)")


def _image_builder(name: str | None) -> str:
    """--images/--builder: a known builder that can work here (UsageError otherwise), by name."""
    b = imagebuilders.get(name)
    b.check()
    return b.name


def _platform_options(*parsers: argparse.ArgumentParser) -> None:
    """Every platform's own options (base.CommandOption, e.g. a simulator's binary) on the
    commands that run experiments; taken by the platform before anything runs."""
    if not parsers:
        return
    from trapline import platforms
    for cls in platforms.all().values():
        for o in cls.options:
            for p in parsers:
                p.add_argument(o.flag, dest=o.dest, metavar=o.metavar, default=None, help=o.help)


def _take_platform_options(args) -> None:
    from trapline import platforms
    for cls in platforms.all().values():
        if cls.options:
            cls.take_options({o.dest: getattr(args, o.dest, None) for o in cls.options})


# the commands whose parsers carry the platforms' own options
PLATFORM_COMMANDS = ("run", "reproduce-all", "simulate", "sensitivity", "sweep")


def _exit_status(run) -> int:
    """0 when every entry ran (reproduced, differs or not-applicable), 1 when any failed."""
    return 1 if run.summary["counts"].get("failed") else 0


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With the command the line starts with, the options that
    cost imports (every platform's own options, the image builders' names) are added only
    to that command's parser: `list` or `cite` does not load the platforms (start-up,
    docs/performance.md). None (or an option such as --help): every parser has them all."""
    def wanted(*parsers):
        return [q for q in parsers if command is None or command.startswith("-") or q.prog.split()[-1] == command]

    p = _Parser(prog="run.sh", description="trapline: reproduce old memory-system measurements")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    sub.add_parser("list", help="every experiment id and its one-line description")
    r = sub.add_parser("run", help="run one experiment")
    r.add_argument("id")
    r.add_argument("--platform", help="one platform (default: every available platform the experiment lists)")
    r.add_argument("--set", action="append", type=_set, default=[], metavar="KEY=VALUE",
                   help="override a kernel argument, or (a platform that takes a machine) a machine field "
                        "such as caches.l1d.line=32B")
    r.add_argument("--machine", help="a platform that takes a machine: a machine name (gem5_configs/machines/) "
                                     "or a YAML file")
    r.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    r.add_argument("--fresh", action="store_true", help="start a new run instead of resuming an interrupted one")
    r.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="time limit of each kernel command or guest boot (default: the experiment's)")
    for q in wanted(r):
        _images_option(q)
    a = sub.add_parser("reproduce-all", help="every experiment on every available platform, one report")
    a.add_argument("--platform")
    a.add_argument("--quick", action="store_true")
    a.add_argument("--fresh", action="store_true")
    a.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="time limit of each command or guest boot")
    for q in wanted(a):
        _images_option(q)
    rp = sub.add_parser("report", help="redraw the report of a finished run")
    rp.add_argument("run_id", nargs="?", default=None)
    fi = sub.add_parser("fidelity", help="modelled against claimed figures of one or more runs, then the "
                                         "simulators side by side, as markdown (a later run's entry wins; "
                                         "default: latest)")
    fi.add_argument("runs", nargs="*", help="run ids, 'latest' or run directories")
    b = sub.add_parser("build", help="build the kernels for one or more architectures")
    b.add_argument("--arch", action="append", help=f"one of {', '.join(arch.ARCHES)} (default: all)")
    b.add_argument("--for-gem5", action="store_true",
                   help="also the kernels' build for the gem5 found (its flavour: the gem5 marks, and on "
                        "sparc64 the freestanding runtime where that gem5 lacks change sparc-glibc), for each "
                        "architecture whose ISA it has (the Docker image builds them)")
    im = sub.add_parser("images", help="build the guest images (Linux + initramfs with the kernels)")
    im.add_argument("--arch", action="append", help=f"one of {', '.join(arch.ARCHES)} (default: all)")
    im.add_argument("--builder", default=None, help=f"{', '.join(imagebuilders.names())} "
                                                     f"(default {imagebuilders.DEFAULT}; docs/images.md)")
    im.add_argument("--buildroot", metavar="DIR", help="--builder buildroot: Buildroot's tree, or its release tarball "
                                                        "(default: $BUILDROOT)")
    sm = sub.add_parser("simulate", help="run a static program of yours on a platform with a machine, print its "
                                         "stats (trapline/simulate.py)")
    sm.add_argument("--machine", required=True, help="a machine name (gem5_configs/machines/) or a YAML file; "
                                                     "the program's arch is the machine's")
    sm.add_argument("--platform", help="where it runs (default: the timing model); --compare for several")
    sm.add_argument("--compare", metavar="P1,P2", help="run it on each platform and print them side by side")
    sm.add_argument("--guest", action="store_true", help="under Linux in the arch's guest (the kernel's traps run)")
    sm.add_argument("--arch", help=f"one of {', '.join(arch.ARCHES)} (optional: must be the machine's)")
    sm.add_argument("--set", action="append", type=_set, default=[], metavar="PATH=VALUE",
                    help="override a machine field, e.g. caches.l1d.size=16kB")
    sm.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="kill the program after this long (default 900)")
    sm.add_argument("--format", choices=("table", "json"), help="default: table on a terminal, json when piped")
    sm.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    g = sub.add_parser("gem5", help="trapline's gem5: build it, say which gem5 runs, or write a machine as JSON "
                                    "(docs/gem5.md)")
    for q in wanted(g):  # (its words import the gem5 platform's package)
        from trapline.platforms.gem5 import commands as gem5_commands
        gem5_commands.add_arguments(q)
    se = sub.add_parser("sensitivity", help="how much an experiment's modelled headline moves when one machine "
                                            "parameter is scaled (default: the machine's assumed ones)")
    se.add_argument("id")
    se.add_argument("--machine", help="a machine name or YAML file (default: the experiment's)")
    se.add_argument("--param", action="append", default=[], metavar="PATH",
                    help="a machine field to scale, e.g. memory.latency (repeatable; default: the assumed ones)")
    se.add_argument("--factors", default="0.5,2", help="comma-separated factors (default 0.5,2)")
    se.add_argument("--quick", action="store_true", help="small sizes")
    se.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    se.add_argument("--platform", help="the lane to scale (a platform that takes a machine; default: the first "
                                       "the experiment has, the timing model)")
    sw = sub.add_parser("sweep", help="run an experiment over the cartesian product of --set values, on Dask "
                                      "(docs/sweeps.md)")
    sw.add_argument("id")
    sw.add_argument("--platform", help="the lane to sweep (default: its lane on a platform that takes a machine)")
    sw.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2,...",
                    help="a kernel argument or machine field and its values (';' between values that hold commas)")
    sw.add_argument("--machine", help="a platform that takes a machine: a machine name or YAML file")
    sw.add_argument("--quick", action="store_true", help="small sizes")
    sw.add_argument("--scheduler", metavar="ADDRESS",
                    help="a Dask scheduler, e.g. tcp://host:8786 (default: an embedded LocalCluster)")
    sw.add_argument("--workers", type=_count, metavar="N",
                    help="embedded: worker processes (default: this machine's cores); --scheduler: wait for N workers")
    sw.add_argument("--fresh", action="store_true", help="a new sweep directory (stored points are still reused)")
    sw.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="time limit of each command or guest boot")
    _platform_options(*wanted(r, a, sm, se, sw))
    for q in wanted(sw):
        _images_option(q)
    ci = sub.add_parser("cite", help="BibTeX for trapline and for a run (docs: README, 'Citing a result')")
    ci.add_argument("run", nargs="?", default=None, help="a run id, 'latest' (default) or a run directory")
    bu = sub.add_parser("bundle", help="a run as one tarball: its files, SHA256SUMS and .zenodo.json")
    bu.add_argument("run", nargs="?", default=None, help="a run id, 'latest' (default) or a run directory")
    bu.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: <run-id>.tar.gz beside the run)")
    ve = sub.add_parser("verify", help="re-check a bundle's hashes and rerun its deterministic model lanes")
    ve.add_argument("bundle", help="a .tar.gz written by ./run.sh bundle")
    t = sub.add_parser("test", help="run the test suite")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    for name, q in sub.choices.items():
        q.set_defaults(func=COMMANDS[name])
    return p


def cmd_list(args) -> int:
    """Every experiment that validates; each one that does not, as its error on
    stderr (exit 2), without hiding the others."""
    from trapline import experiment
    broken: dict[str, str] = {}
    exps = experiment.load_all(broken=broken)
    w = max(map(len, exps), default=0)
    for e in exps.values():
        print(f"{e.id:<{w}}  {e.description}")
    for msg in broken.values():
        print(f"trapline: error: {msg}", file=sys.stderr)
    return 2 if broken else 0


def cmd_run(args) -> int:
    from trapline import platforms, runner
    sets = dict(args.set)
    if args.machine:
        takers = platforms.machine_platforms()
        if args.platform not in (None, *takers):
            raise UsageError(f"--machine is for {platforms.machine_options()}")
        args.platform = args.platform or takers[0]
    run = runner.execute("run", [args.id], args.platform, args.quick, sets, fresh=args.fresh,
                         machine=args.machine, timeout=args.timeout, images=_image_builder(args.images))
    print(run.path / "report.html")
    return _exit_status(run)


def cmd_reproduce_all(args) -> int:
    from trapline import runner
    run = runner.execute("reproduce-all", None, args.platform, args.quick, {}, fresh=args.fresh,
                         timeout=args.timeout, images=_image_builder(args.images))
    print(run.path / "report.html")
    return _exit_status(run)


def cmd_report(args) -> int:
    from trapline import report, results
    path = results.find_run(args.run_id)
    results.writable_run(path, "report")
    for name, data in report.render(path).items():
        results.atomic_write(path / name, data)
    print(path / "report.html")
    return 0


def cmd_fidelity(args) -> int:
    from trapline import report
    from trapline.report import fidelity, sections, sidebyside
    from trapline.cite import resolve  # a run id, latest or a run directory
    loaded = [report.load(resolve(r)) for r in (args.runs or [None])]
    infos = [sections.platform_report(ld[1], ld[3]) for ld in loaded]
    said = [sections.modelled(i) for i in infos]
    modelled = None if any(m is None for m in said) else set().union(*said)
    merged = fidelity.merge([ld[3] for ld in loaded])
    columns = sections.platforms_in(merged, {p: i for info in infos for p, i in info.items()})
    sys.stdout.write(fidelity.markdown(merged, modelled))
    sys.stdout.write("\n## Simulators side by side\n\n" + sidebyside.markdown(merged, modelled, columns))
    return 0


def cmd_build(args) -> int:
    from trapline.context import RunContext
    arches = [arch.get(a).name for a in args.arch or list(arch.ARCHES)]
    ctx = RunContext.make()
    for a in arches:
        print(ctx.kernels(a))
    if args.for_gem5:
        from trapline.platforms import gem5
        for d in gem5.build_kernels(arches, log=ctx.log):
            print(d)
    return 0


def cmd_images(args) -> int:
    from trapline import images
    from trapline.context import RunContext
    arches = args.arch or list(arch.ARCHES)
    for a in arches:
        images.check_arch(a)
    if args.buildroot:
        if imagebuilders.get(args.builder).name != "buildroot":
            raise UsageError("--buildroot goes with --builder buildroot")
        os.environ["BUILDROOT"] = args.buildroot
    ctx = RunContext.make(image_builder=_image_builder(args.builder))
    for a in arches:
        img = ctx.image(a)
        print(f"{a}: {img.builder} kernel {img.kernel} (sha256 {img.facts.get('LINUX_SHA256', '?')[:16]}), "
              f"initramfs {img.initrd} (sha256 {img.facts.get('INITRD_SHA256', '?')[:16]})")
    return 0


def cmd_simulate(args) -> int:
    from trapline import simulate
    return simulate.main(args)


def cmd_sensitivity(args) -> int:
    from trapline import sensitivity
    from trapline.context import Progress
    res = sensitivity.sweep(args.id, args.machine, args.param, sensitivity.parse_factors(args.factors),
                            args.quick, log=Progress(sys.stderr), platform=args.platform)
    print(json.dumps(res, indent=2) if args.json else sensitivity.table(res))
    return 0


def cmd_sweep(args) -> int:
    from trapline import sweep
    g = sweep.grid.parse(args.set)
    res = sweep.run(args.id, sweep.grid.product(g), args.platform, args.quick, args.machine,
                    args.scheduler, args.workers, args.timeout, fresh=args.fresh, grid_spec=g,
                    images=_image_builder(args.images))
    print(res.path / "report.html")
    return 1 if any(r["status"] == "failed" for r in res.rows) else 0


def cmd_gem5(args) -> int:
    from trapline.platforms.gem5 import commands as gem5_commands
    return gem5_commands.run(args)


def cmd_cite(args) -> int:
    from trapline import cite
    print(cite.bibtex(args.run), end="")
    return 0


def cmd_bundle(args) -> int:
    from trapline import bundle
    print(bundle.write(args.run, args.output))
    return 0


def cmd_verify(args) -> int:
    from trapline import bundle
    return bundle.verify(args.bundle)


def cmd_test(args) -> int:
    import subprocess
    from trapline import results
    return subprocess.call([sys.executable, "-m", "pytest", *args.pytest_args], cwd=results.ROOT)


# Each command's handler: parser() gives every subcommand its own (set_defaults(func=...)).
COMMANDS = {
    "list": cmd_list, "run": cmd_run, "reproduce-all": cmd_reproduce_all, "report": cmd_report,
    "fidelity": cmd_fidelity, "build": cmd_build, "images": cmd_images, "simulate": cmd_simulate,
    "gem5": cmd_gem5, "sensitivity": cmd_sensitivity, "sweep": cmd_sweep, "cite": cmd_cite,
    "bundle": cmd_bundle, "verify": cmd_verify, "test": cmd_test,
}


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (docker stop, timeout) ends like Ctrl-C: children killed, run resumable


def _dispatch(argv: list[str]) -> int:
    argv = _with_default_word(argv)
    args = parser(argv[0] if argv else None).parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 2
    if args.command in PLATFORM_COMMANDS:
        _take_platform_options(args)
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    return exit_status(lambda: _dispatch(argv))
