"""The host platform: the kernels built for x86_64 and run natively.

Figures are real time on this machine's CPU (named in the manifest). Only
effects the host has can show here; for the rest an experiment file marks the
host entry as contrast or not_applicable.
"""

from __future__ import annotations

import os
import platform as pyplatform
import time
from pathlib import Path

from trapline import build, hostfacts, kernelio, simstats
from trapline.proc import CONSOLE_TAIL_LINES, run_command, tail  # noqa: F401 (re-exported)
from trapline.platforms.base import Lane, Platform, PlatformRun
from trapline.platforms.engine import Engine

DEFAULT_TIMEOUT_S = 600
QUICK_TIMEOUT_S = 120


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return pyplatform.processor() or "unknown"


class HostLane(Lane):
    """The kernel's runs one after another, natively, each sample read as it comes."""
    not_repeatable = "the host lane measures real time"

    def run(self) -> PlatformRun:
        ctx, log, exp = self.ctx, self.ctx.log, self.exp
        # one build per run context: every experiment of a run uses the same
        # binaries even if the sources change while it runs (the manifest names it)
        bindir = ctx.kernels(self.arch) / exp.kernel
        t0 = time.monotonic()
        output = kernelio.KernelOutput()
        raw, commands = [], []
        hashes = {p: h for p, h in build.binary_hashes(bindir).items()}
        runs = self.commands()
        facts = hostfacts.for_lane(self.spec.get("host_facts", []))  # what this host makes the figure measure
        for i, c in enumerate(runs):
            binary = bindir / c.binary
            cmd = [str(binary), *c.args]
            shown = c.what
            commands.append(c.shown)
            log(f"{exp.id} [{i + 1}/{len(runs)}] {shown}")
            timeout = c.limit(ctx, QUICK_TIMEOUT_S if ctx.quick else DEFAULT_TIMEOUT_S)
            watch = kernelio.SampleWatch(shown, timeout, log)  # samples as they come; stops one that cannot end
            status, out, err = run_command(cmd, timeout, cwd=binary.parent, log=log, on_line=watch.line,
                                           stop=watch.stop)
            raw.append(f"$ {shown}\n{out}{err}")
            if status is None and watch.arrivals:  # out of time: the samples it took are reported
                output.extend(kernelio.parse(out))
                facts.setdefault("notes", []).append(watch.note())
                log(f"    {watch.note()}")
                continue
            if status is None:
                return PlatformRun(output, "\n".join(raw), commands,
                                   error=f"{shown} timed out after {timeout} s and was killed; last output:\n"
                                         f"{tail(out + err)}", binaries=hashes, seconds=time.monotonic() - t0, facts=facts)
            if status != 0:
                return PlatformRun(output, "\n".join(raw), commands,
                                   error=f"{shown} exited with status {status}; last output:\n{tail(out + err)}",
                                   binaries=hashes, seconds=time.monotonic() - t0, facts=facts)
            output.extend(kernelio.parse(out))
        return PlatformRun(output, "\n".join(raw), commands, binaries=hashes, seconds=time.monotonic() - t0,
                           facts=facts)


class NativeEngine(Engine):
    """A user's program natively under `perf stat` (trapline/perfstat.py): real time, and the
    user-mode counters this host lets perf count. The machine only names the arch: the
    figures are this host's."""

    def simulate(self, program, argv: list[str], timeout: float) -> simstats.Run:
        from trapline import perfstat
        r = perfstat.run(argv, timeout)
        total = simstats.figures(seconds=r["seconds"], **r["counters"])
        raw = {"cpu": cpu_model(), "perf": r["perf"] or "counted", "not_counted": r["not_counted"],
               "counters": r["counters"]}
        stats = simstats.stats(self.platform, self.machine, program, argv, self.mode, r["status"], "real", total, [],
                               dict.fromkeys(total, simstats.MEASURED), raw)
        err = None if r["status"] is not None else \
            f"the program did not end within {timeout:g} s and was killed; its last output:\n{tail(r['stdout'] + r['stderr'])}"
        return simstats.Run(stats, r["stdout"], r["stderr"], err)


class HostPlatform(Platform):
    name = "host"
    label = "host"
    meaning = "measured in real time on this machine's CPU"
    times = "real"
    column = 10
    arch = "x86_64"
    side_by_side = False
    one_at_a_time = "host points measure real time: side by side they would disturb each other"
    default_cost_s = {"full": 10.0, "quick": 2.0}  # a lane without cost_s (trapline/eta.py)
    lanes = (HostLane,)
    engines = {"native": NativeEngine}

    @classmethod
    def lane_problems(cls, at: str, spec: dict) -> list[str]:
        """Its lane's `host_facts` name facts of this machine (trapline/hostfacts.py)."""
        names = spec.get("host_facts", [])
        return (super().lane_problems(at, {k: v for k, v in spec.items() if k != "host_facts"})
                + [f"{at}.host_facts[{i}]: '{n}' is not a host fact; valid choices: {', '.join(hostfacts.names())}"
                   for i, n in enumerate(names) if n not in hostfacts.FACTS])

    def describe(self) -> dict:
        u = os.uname()
        build_dir = self.ctx.builds.get(self.arch)
        return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": f"{u.sysname} {u.release}",
                "machine": u.machine, "compiler": build.compiler_version(self.arch),
                "kernel_build": build_dir.name if build_dir else None, **hostfacts.describe()}

    @classmethod
    def report_lines(cls, f: dict) -> list[str]:
        return [f"{cls.label}: {f.get('cpu', '?')}, {f.get('cores', '?')} cores, {f.get('kernel', '?')}, "
                f"{f.get('compiler', '?')}"]
