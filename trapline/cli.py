"""The commands behind ./run.sh.

    list                                   every experiment id, then its description
    run ID [--platform P] [--set k=v ...] [--quick] [--fresh]
    reproduce-all [--quick] [--platform P] [--fresh]
    report [RUN-ID]                        redraw a finished run's report
    build [--arch A ...]                   build the kernels (cached)
    images [--arch A ...]                  build the guest images (cached)
    simulate --machine M [--set k=v ...] --arch A -- PROGRAM [ARGS]
                                           run any static program under the timing model
    sensitivity ID [--param PATH ...] [--factors 0.5,2] [--quick]
                                           the modelled headline against scaled machine parameters
    gem5 --machine M [--set k=v ...] [-o FILE]
                                           a machine as JSON for gem5_configs/run_se.py
    test [pytest args]                     the test suite

Bad input exits 2 with one line that names the valid choices.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys

from trapline import build, experiment, platforms, report, results, runner
from trapline.errors import RunFailed, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, no usage dump
        raise UsageError(message)


def _sets(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"--set takes key=value, not '{p}'")
        out[k] = v
    return out


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="run.sh", description="trapline: reproduce old memory-system measurements")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    sub.add_parser("list", help="every experiment id and its one-line description")
    r = sub.add_parser("run", help="run one experiment")
    r.add_argument("id")
    r.add_argument("--platform", help="host (default: every available platform the experiment lists)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a kernel argument, or (model) a machine field such as caches.l1d.line=32B")
    r.add_argument("--machine", help="model platform: a machine name (gem5_configs/machines/) or a YAML file")
    r.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    r.add_argument("--fresh", action="store_true", help="start a new run instead of resuming an interrupted one")
    a = sub.add_parser("reproduce-all", help="every experiment on every available platform, one report")
    a.add_argument("--platform")
    a.add_argument("--quick", action="store_true")
    a.add_argument("--fresh", action="store_true")
    rp = sub.add_parser("report", help="redraw the report of a finished run")
    rp.add_argument("run_id", nargs="?", default=None)
    b = sub.add_parser("build", help="build the kernels for one or more architectures")
    b.add_argument("--arch", action="append", help=f"one of {', '.join(build.ARCHES)} (default: all)")
    im = sub.add_parser("images", help="build the guest images (Linux + initramfs with the kernels)")
    im.add_argument("--arch", action="append", help="one of sparc64, armv6, x86_64 (default: all)")
    sm = sub.add_parser("simulate", help="run a static program of yours under the timing model, print its stats JSON")
    sm.add_argument("--machine", required=True, help="a machine name (gem5_configs/machines/) or a YAML file")
    sm.add_argument("--arch", required=True, help="x86_64, sparc64 or armv6")
    sm.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a machine field, e.g. caches.l1d.size=16kB")
    sm.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    g = sub.add_parser("gem5", help="write a machine description as JSON for gem5_configs/run_se.py (docs/gem5.md)")
    g.add_argument("--machine", required=True, help="a machine name (gem5_configs/machines/) or a YAML file")
    g.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a machine field, e.g. caches.l1d.size=64kB")
    g.add_argument("-o", "--output", metavar="FILE", help="write the JSON here (default: standard output)")
    se = sub.add_parser("sensitivity", help="how much an experiment's modelled headline moves when one machine "
                                            "parameter is scaled (default: the machine's assumed ones)")
    se.add_argument("id")
    se.add_argument("--machine", help="a machine name or YAML file (default: the experiment's)")
    se.add_argument("--param", action="append", default=[], metavar="PATH",
                    help="a machine field to scale, e.g. memory.latency (repeatable; default: the assumed ones)")
    se.add_argument("--factors", default="0.5,2", help="comma-separated factors (default 0.5,2)")
    se.add_argument("--quick", action="store_true", help="small sizes")
    se.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    t = sub.add_parser("test", help="run the test suite")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    return p


def cmd_list() -> int:
    exps = experiment.load_all()
    w = max(map(len, exps))
    for e in exps.values():
        print(f"{e.id:<{w}}  {e.description}")
    return 0


def cmd_report(run_id: str | None) -> int:
    path = results.find_run(run_id)
    summary = json.loads((path / "summary.json").read_text())
    manifest = json.loads((path / "manifest.json").read_text())
    entries = [json.loads((path / "entries" / f"{e['id']}.{e['platform']}.json").read_text())
               for e in summary["experiments"]]
    for name, data in report.render(path, summary, entries, manifest).items():
        results.atomic_write(path / name, data)
    print(path / "report.html")
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (docker stop, timeout) ends like Ctrl-C: children killed, run resumable


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args = parser().parse_args(argv)
        if args.command is None:
            parser().print_help()
            return 2
        if args.command == "list":
            return cmd_list()
        if args.command == "run":
            sets = _sets(args.set)
            if args.machine:
                if args.platform not in (None, "model"):
                    raise UsageError("--machine is for --platform model")
                platforms.OPTIONS["machine"] = args.machine
                args.platform = "model"
            path = runner.execute("run", [args.id], args.platform, args.quick, sets, fresh=args.fresh)
            print(path / "report.html")
            return 0
        if args.command == "reproduce-all":
            ids = list(experiment.load_all())
            path = runner.execute("reproduce-all", ids, args.platform, args.quick, {}, fresh=args.fresh)
            print(path / "report.html")
            return 0
        if args.command == "report":
            return cmd_report(args.run_id)
        if args.command == "build":
            for a in args.arch or list(build.ARCHES):
                build.check_arch(a)
            for a in args.arch or list(build.ARCHES):
                print(build.build(a, log=runner.Progress()))
            return 0
        if args.command == "images":
            from trapline import images
            from trapline.platforms.qemu import QemuPlatform
            arches = args.arch or list(images.ARCHES)
            for a in arches:
                images.check_arch(a)
            log = runner.Progress()
            for a in arches:
                img = QemuPlatform().image(a, log)
                print(f"{a}: kernel {img.kernel} (sha256 {img.facts.get('LINUX_SHA256', '?')[:16]}), "
                      f"initramfs {img.initrd} (sha256 {img.facts.get('INITRD_SHA256', '?')[:16]})")
            return 0
        if args.command == "simulate":
            from trapline import machine as machines
            from trapline.platforms import model
            prog = args.program[1:] if args.program[:1] == ["--"] else args.program
            if not prog:
                raise UsageError("simulate needs a program after --: simulate --machine M --arch A -- PROGRAM [ARGS]")
            if args.arch not in model.QEMU_USER:
                raise UsageError(f"unknown arch '{args.arch}'; valid choices: {', '.join(model.QEMU_USER)}")
            m = machines.load(args.machine, sets=[f"{k}={v}" for k, v in _sets(args.set).items()])
            if m.arch != args.arch:
                raise UsageError(f"machine '{m.name}' describes a {m.arch} machine, not {args.arch}")
            stats, out, err, status = model.simulate(args.arch, model.plugin_path(), m, prog)
            sys.stderr.write(out + err)
            print(json.dumps({"machine": m.name, "sets": list(m.sets), "program": prog, "exit_status": status,
                              "stats": stats}, indent=2))
            return 0 if status == 0 else 1
        if args.command == "sensitivity":
            from trapline import sensitivity
            res = sensitivity.sweep(args.id, args.machine, args.param, sensitivity.parse_factors(args.factors),
                                    args.quick, log=runner.Progress(sys.stderr))
            print(json.dumps(res, indent=2) if args.json else sensitivity.table(res))
            return 0
        if args.command == "gem5":
            from trapline import gem5
            gem5.write(args.machine, args.set, args.output)
            return 0
        if args.command == "test":
            return subprocess.call([sys.executable, "-m", "pytest", *args.pytest_args], cwd=results.ROOT)
    except UsageError as e:
        print(f"trapline: error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"trapline: failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
