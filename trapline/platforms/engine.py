"""One engine per simulator: (machine, program, arguments, guest or not) -> what the
program did and the simulator's regions, each of them as the common statistics
(trapline/simstats.py) with what every figure rests on.

A simulator's platform (the model, gem5) makes an Engine for a machine and a mode
(Platform.engine) and both of its uses are built here, once:
- an experiment's lane: `run_lane` runs the lane's commands one after another, and
  `Engine.pair` gives each of the kernel's samples the time and counts of its region
  (its `<prefix>_*` counters);
- `./run.sh simulate`: `Engine.simulate` gives the run's regions and total as the
  common statistics, resting on simstats.RESTS_ON (the one table; an engine names
  only where one of its figures rests on something else, and why).

A new simulator is one module of trapline/platforms/ (base.Platform) with an Engine
subclass that implements `run` and says how to read one of its regions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from trapline import build, kernelio, simstats
from trapline.kernelargs import kernel_args
from trapline.proc import tail


@dataclass
class Ran:
    """One program run by a simulator."""
    stdout: str                  # the program's standard output
    stderr: str                  # its standard error (and the simulator's messages)
    status: int | None           # its exit status; None when it did not exit (timeout: `error` or the status says)
    regions: list[dict]          # the simulator's regions the program marked, in the order they began
    total: dict | None = None    # the simulator's own region of the whole run; None: the regions are the run
    error: str | None = None     # the simulator stopped (names why); None when it ran the program to its end
    raw: dict = field(default_factory=dict)    # the simulator's record of the run (simulate's "stats")
    facts: dict = field(default_factory=dict)  # what the lane's entry keeps of this run
    console: str = ""            # what a lane keeps of the run besides its output (the raw text)
    cmd: list[str] | None = None  # the simulator's command line, when the raw text shows it
    what: str = ""               # the run as a lane shows it ("loop-order/loop-order variant=row ...")


class Engine:
    """A simulator bound to a machine and a mode: `run` runs one program; the rest reads
    what it returned. Subclasses set the class attributes and implement `run`,
    `region_ns` (a region's simulated time), `region_counts` and `figures`."""
    prefix = "?"        # its counters' prefix (model_*, gem5_*): base.Platform.counters
    under = "?"         # "the model", "gem5": in "X exited with status 1 under the model"
    # when a run's regions and the kernel's samples differ in number ({regions}, {samples})
    mismatch = "the simulator reported {regions} regions for {samples} samples; they must pair up one to one"
    timer: dict = {}    # the kernel output's timer once its samples carry the simulator's time
    # where one of its figures rests on something other than simstats.RESTS_ON says (and why)
    rests_on_here: dict[str, str] = {}

    def __init__(self, machine):
        self.machine = machine

    # ------------------------------------------------ what a subclass provides

    def run(self, argv: list[str], timeout: float, cwd: Path | None = None) -> Ran:
        raise NotImplementedError

    def region_ns(self, g: dict) -> float:
        raise NotImplementedError

    def region_counts(self, g: dict, ops: int) -> dict[str, int]:
        """A region's counts as this simulator's <prefix>_* counters, for a sample of `ops` operations."""
        raise NotImplementedError

    def figures(self, g: dict) -> dict:
        """A region (or the whole run) as a block of the common statistics (simstats.figures)."""
        raise NotImplementedError

    def lane_regions(self, ran: Ran) -> list[dict]:
        """The regions a kernel's samples pair with (the thread that prints them)."""
        return ran.regions

    def note(self, argv: list[str]) -> str:
        """What the log says of a run besides its command (" (2 core(s))")."""
        return ""

    def raw_text(self, shown: list[str], ran: Ran) -> str:
        """A run's part of the lane's raw text."""
        return f"$ {' '.join(ran.cmd or shown)}\n{ran.stdout}{ran.stderr}{ran.console}"

    def lane_facts(self, exp, runs: list[Ran]) -> dict:
        """The entry's platform facts for the lane's runs so far."""
        return {}

    # ------------------------------------------------ built on it, once

    @property
    def rests_on(self) -> dict[str, str]:
        return {**simstats.RESTS_ON, **self.rests_on_here}

    def total(self, ran: Ran) -> dict:
        """The run's total as common statistics: the simulator's own, else its regions' sum."""
        if ran.total is not None:
            return self.figures(ran.total)
        return simstats.add_up([self.figures(g) for g in ran.regions]) if ran.regions else {}

    def stats(self, platform, program, argv: list[str], mode: str, ran: Ran) -> dict:
        """`./run.sh simulate`'s common statistics of a run (platform: its class)."""
        return simstats.stats(platform, self.machine, program, argv, mode, ran.status, "simulated", self.total(ran),
                              [self.figures(g) for g in ran.regions], self.rests_on, ran.raw)

    def simulate(self, platform, program, argv: list[str], mode: str, timeout: float) -> simstats.Run:
        """The user's program (trapline.program.Program; argv: its path and arguments) as a simstats.Run."""
        ran = self.run(argv, timeout)
        err = None
        if ran.error is not None:
            err = f"{ran.error}\nthe program's last output:\n{tail(ran.stdout + ran.stderr, 10)}"
        elif ran.status is None:
            err = f"the program did not end within {timeout:g} s and was killed; its last output:\n" \
                  f"{tail(ran.stdout + ran.stderr)}"
        return simstats.Run(self.stats(platform, program, argv, mode, ran), ran.stdout, ran.stderr, err)

    def pair(self, out: kernelio.KernelOutput, regions: list[dict], what: str) -> str | None:
        """Give sample i region i's time (region_ns, as the sample's ns), cycles and counts
        (kernelio.pair_regions); an error message if they do not pair up one to one."""
        return kernelio.pair_regions(out, regions, what, self.mismatch,
                                     ns=self.region_ns, counts=self.region_counts, timer=self.timer)

    def failure(self, what: str, ran: Ran) -> str | None:
        """Why a lane's run failed, one message starting with its command; None when it did not."""
        if ran.error is not None:
            return ran.error if ran.error.startswith(what) else f"{what}: {ran.error}"
        if ran.status is None:
            return f"{what} timed out under {self.under}; last output:\n{tail(ran.stdout + ran.stderr)}"
        if ran.status != 0:
            return f"{what} exited with status {ran.status} under {self.under}; last output:\n" \
                   f"{tail(ran.stdout + ran.stderr)}"
        return None


def run_lane(lane, exp, engine: Engine, bindir: Path, timeout_s: float, t0: float):
    """An experiment's lane on a simulator: its runs one after another (each an engine
    call in bindir), each kernel's samples paired with the regions it marked; a
    base.PlatformRun, which stops at the first run that fails."""
    from trapline.platforms.base import PlatformRun
    ctx, spec = lane.ctx, lane.spec
    output = kernelio.KernelOutput()
    raw, shown, runs = [], [], []
    for i, r in enumerate(spec.get("runs", [])):
        args = kernel_args(ctx, exp, r, lane.platform.kernel_sets)
        argv = [str(bindir / r["binary"])] + args
        shown.append([f"{exp.kernel}/{r['binary']}"] + args)
        what = " ".join(shown[-1])
        ctx.log(f"{exp.id} [{i + 1}/{len(spec['runs'])}] {what}{engine.note(argv)}")
        ran = engine.run(argv, ctx.timeout_for(r.get("timeout_s", timeout_s)), cwd=bindir)
        ran.what = what
        raw.append(engine.raw_text(shown[-1], ran))
        runs.append(ran)
        err = engine.failure(what, ran)
        if err is None:
            out = kernelio.parse(ran.stdout)
            err = engine.pair(out, engine.lane_regions(ran), what)
            if err is None:
                output.extend(out)
        if err:
            run = PlatformRun(output, "\n".join(raw), shown, error=err, seconds=time.monotonic() - t0)
            run.facts = engine.lane_facts(exp, runs)
            return run
    hashes = {f"{exp.kernel}/{k}": v for k, v in build.binary_hashes(bindir).items()}
    run = PlatformRun(output, "\n".join(raw), shown, binaries=hashes, seconds=time.monotonic() - t0)
    run.facts = engine.lane_facts(exp, runs)
    return run
