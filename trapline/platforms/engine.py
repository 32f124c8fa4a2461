"""One engine per way a platform runs a program: (machine, program, arguments, mode) ->
what the program did and the simulator's regions, each of them as the common
statistics (trapline/simstats.py) with what every figure rests on.

A platform names its engines by mode (Platform.engines: the model's "user" and "guest",
gem5's "se") and makes one, complete, for a machine and a mode (Platform.engine), for
one of its lanes or for a user's program. Both uses are built here, once:
- an experiment's lane (SimulatorLane, its run on `run_lane`): the lane's commands run
  (Engine.lane_runs: one after another, or all in one guest boot), and `Engine.pair`
  gives each of the kernel's samples the time and counts of its region (its
  `<prefix>_*` counters);
- `./run.sh simulate`: `Engine.simulate` gives the run's regions and total as the
  common statistics, resting on simstats.RESTS_ON (the one table; an engine names
  only where one of its figures rests on something else, and why).

A new simulator is one folder (or module) of trapline/platforms/: an Engine subclass that
implements `run` and says how to read one of its regions, and a base.Platform subclass
whose `engines` names it and whose `lanes` are SimulatorLane (docs/methodology.md,
"Platforms"). A platform that runs a user's program without being a simulator (the
host, natively; qemu, in a guest) has an engine that implements `simulate` alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from trapline import build, kernelio, machine as machines, simstats
from trapline.errors import UsageError
from trapline.platforms.base import Command, Lane, PlatformRun
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
    """A way of running a program, bound to its platform, a machine and a mode, and to a
    lane of the platform's (None: a user's program). A simulator's engine implements
    `run` (one program) and reads what it returned (`region_ns`, `region_counts`,
    `figures`); a lane and `simulate` are built on those. Subclasses set the class
    attributes."""
    prefix = "?"        # its counters' prefix (model_*, gem5_*): base.Platform.counters
    under = "?"         # "the model", "gem5": in "X exited with status 1 under the model"
    # when a run's regions and the kernel's samples differ in number ({regions}, {samples})
    mismatch = "the simulator reported {regions} regions for {samples} samples; they must pair up one to one"
    timer: dict = {}    # the kernel output's timer once its samples carry the simulator's time
    # where one of its figures rests on something other than simstats.RESTS_ON says (and why)
    rests_on_here: dict[str, str] = {}
    # a lane command's time limit when the experiment file gives none (seconds)
    timeout_s: float = 900

    def __init__(self, platform, machine: machines.Machine, mode: str, lane: Lane | None = None):
        self.platform, self.machine, self.mode, self.lane = platform, machine, mode, lane

    @classmethod
    def unused_fields(cls, machine: machines.Machine) -> frozenset[str]:
        """The machine fields this engine's simulator does not read: what a figure of it does not rest
        on, and what sensitivity does not scale by default."""
        return frozenset()

    @classmethod
    def problem(cls, machine: machines.Machine) -> str | None:
        """Why it cannot run a program of `machine` (one sentence naming what would work),
        or None when it can: asked before anything runs, by a lane's checks and by
        `./run.sh simulate`."""
        return None

    @property
    def ctx(self):
        return self.platform.ctx

    # ------------------------------------------------ what a simulator provides

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

    # ------------------------------------------------ what a lane asks (defaults: user mode)

    def lane_line(self) -> str:
        """What the log says when a lane starts on it ("timing model, machine ..."); "": nothing."""
        return ""

    def kernels(self) -> Path:
        """The lane's kernel binaries (the experiment's folder of the build it runs)."""
        return self.ctx.kernels(self.machine.arch) / self.lane.exp.kernel

    def lane_runs(self, commands: list[Command]) -> Iterable[Ran]:
        """The lane's commands run, in order, one Ran each: here one after another, each
        started when the lane asks for it (it stops asking at the first that fails)."""
        bindir, exp = self.kernels(), self.lane.exp
        for i, c in enumerate(commands):
            argv = [str(bindir / c.binary), *c.args]
            self.ctx.log(f"{exp.id} [{i + 1}/{len(commands)}] {c.what}{self.note(argv)}")
            yield self.run(argv, c.limit(self.ctx, self.timeout_s), cwd=bindir)

    def lane_regions(self, ran: Ran) -> list[dict]:
        """The regions a kernel's samples pair with (the thread that prints them)."""
        return ran.regions

    def lane_end(self, runs: list[Ran]) -> str | None:
        """Why a lane whose every run paired is still wrong (regions nobody printed samples
        for); None when it is not."""
        return None

    def binaries(self) -> dict[str, str]:
        """sha256 of the lane's binaries, by kernel/binary."""
        return {f"{self.lane.exp.kernel}/{k}": v for k, v in build.binary_hashes(self.kernels()).items()}

    def note(self, argv: list[str]) -> str:
        """What the log says of a run besides its command (" (2 core(s))")."""
        return ""

    def raw_text(self, shown: list[str], ran: Ran) -> str:
        """A run's part of the lane's raw text."""
        return f"$ {' '.join(ran.cmd or shown)}\n{ran.stdout}{ran.stderr}{ran.console}"

    def lane_facts(self, runs: list[Ran]) -> dict:
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

    def stats(self, program, argv: list[str], ran: Ran) -> dict:
        """`./run.sh simulate`'s common statistics of a run."""
        return simstats.stats(self.platform, self.machine, program, argv, self.mode, ran.status, "simulated",
                              self.total(ran), [self.figures(g) for g in ran.regions], self.rests_on, ran.raw)

    def simulate(self, program, argv: list[str], timeout: float) -> simstats.Run:
        """The user's checked program (trapline.program.Program; argv: its path and arguments)
        as a simstats.Run (the common stats, the program's output, why it did not end)."""
        ran = self.run(argv, timeout)
        err = None
        if ran.error is not None:
            err = f"{ran.error}\nthe program's last output:\n{tail(ran.stdout + ran.stderr, 10)}"
        elif ran.status is None:
            err = f"the program did not end within {timeout:g} s and was killed; its last output:\n" \
                  f"{tail(ran.stdout + ran.stderr)}"
        return simstats.Run(self.stats(program, argv, ran), ran.stdout, ran.stderr, err)

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


def run_lane(engine: Engine, t0: float) -> PlatformRun:
    """An experiment's lane on a simulator (engine, made for the lane): its commands run
    (Engine.lane_runs), each kernel's samples paired with the regions it marked; a
    PlatformRun, which stops at the first run that fails."""
    commands = engine.lane.commands()
    output = kernelio.KernelOutput()
    raw, runs, err = [], [], None
    for c, ran in zip(commands, engine.lane_runs(commands)):
        ran.what = c.what
        raw.append(engine.raw_text(c.shown, ran))
        runs.append(ran)
        err = engine.failure(c.what, ran)
        if err is None:
            out = kernelio.parse(ran.stdout)
            err = engine.pair(out, engine.lane_regions(ran), c.what)
            if err is None:
                output.extend(out)
        if err:
            break
    else:
        err = engine.lane_end(runs)
    shown = [c.shown for c in commands[:len(runs)]]
    return PlatformRun(output, "\n".join(t for t in raw if t), shown, error=err, binaries=engine.binaries(),
                       seconds=time.monotonic() - t0, facts=engine.lane_facts(runs))


class SimulatorLane(Lane):
    """A lane of a simulator: its commands on the engine its platform makes for it (the
    engine of `mode`, Platform.engines), run_lane."""
    mode = "user"  # the engine's mode (Platform.engines)

    def check(self, machines_elsewhere: str = "") -> None:
        """Its machine, then what its engine says of the machine (Engine.problem), then its --set keys."""
        why = type(self.platform).engines[self.mode].problem(self.machine())
        if why:
            raise UsageError(why)
        super().check(machines_elsewhere)

    def run(self) -> PlatformRun:
        t0 = time.monotonic()
        engine = self.platform.engine(self.machine(use=True), self.mode, self)
        line = engine.lane_line()
        if line:
            self.ctx.log(f"{self.exp.id}: {line}")
        return run_lane(engine, t0)
