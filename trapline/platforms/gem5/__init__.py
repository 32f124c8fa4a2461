"""The gem5 platform: the experiment's kernel runs in a real gem5's syscall-emulation
(SE) mode on the lane's machine description, built by gem5_configs/run_se.py with
trapline_gem5's board (the same gem5_configs/machines/<name>.yaml as the timing
model's lane: trapline.platforms.gem5.machine_json.export, gem5_configs/trapline_gem5/params.py).

The kernels run in their gem5 flavour (build.build(arch, flavour="gem5"), -DTL_GEM5;
kernel_flavour: on sparc64 with a gem5 that cannot start a glibc program, the
gem5-freestanding flavour):
each measured repetition resets gem5's statistics where it begins and dumps them where
it ends (m5 ops), so stats.txt holds one block per region. Sample i gets region i's
simulated time (its ticks between the markers) and cycles, and gem5's counts as
gem5_* counters (trapline.platforms.gem5.stats.COUNTERS; the suffixes match the model's model_*:
gem5_l1d_misses beside model_l1d_misses). Simulated time is deterministic: the same
binary, machine and arguments give the same ticks.

The CPU model is the machine's `gem5.cpu` (timing, minor or o3; O3 where the claim is
about a real pipeline) or `--set gem5.cpu=...`; one core per thread a run starts
(SE mode gives a thread a core of its own: trapline.platforms.gem5.run.cores_for). gem5 itself
comes from --gem5 PATH, $GEM5, trapline's own build (./run.sh gem5 build), or gem5.opt/gem5
on PATH (trapline.platforms.gem5.binary.find); without one the platform is unavailable and
says how to get one. A lane that `needs` trapline's changes to gem5 (gem5_configs/changes/)
runs only on a gem5 that has them; on another its entry is not-applicable and says how to
get them (why_lane_unavailable). docs/gem5.md.
"""

from __future__ import annotations

import os

from trapline import arch as arch_table, build
from trapline.errors import RunFailed, UsageError
from trapline.machine import report_lines as machine_lines
from trapline.platforms.base import CommandOption, Engines, Platform
from trapline.platforms.engine import SimulatorLane
from trapline.platforms.gem5 import binary, stats

# The engine's module (gem5's run, the machine export and its parameter tables; Gem5Engine,
# cpu_of, kernel_flavour) is imported by the commands that run gem5, not by every command that
# lists the platforms' options.
ENGINE = "trapline.platforms.gem5.engine"


def build_kernels(arches, log=None) -> list:
    """The kernels' build directories in the flavour the gem5 find() finds runs (kernel_flavour),
    for each of `arches` whose ISA that gem5 has (`./run.sh build --for-gem5`: the Docker image
    builds them while its cache is writable)."""
    from trapline.platforms.gem5.engine import kernel_flavour
    g = binary.facts(binary.find())
    return [build.build(a, flavour=kernel_flavour(a, g), log=log) for a in arches
            if arch_table.get(a).gem5_isa in g["isas"]]


class Gem5Lane(SimulatorLane):
    """A gem5 lane: the kernel's runs one after another, each in its own gem5 process."""
    mode = "se"

    def sweep_keys(self) -> dict:
        from trapline.platforms.gem5.engine import kernel_flavour
        g = binary.facts(binary.find())
        flavour = kernel_flavour(self.arch, g)
        build.build(self.arch, log=self.ctx.log, flavour=flavour)  # built once here, so the workers find it
        return {"gem5_sha256": g["sha256"], "gem5_version": g["version"],
                "kernels_gem5": build.input_hash(self.arch, flavour)}


class Gem5Platform(Platform):
    name = "gem5"
    label = "gem5"
    meaning = "simulated time and counts from gem5 (SE mode) on the same machine description as the timing model"
    times = "predicted"
    column = 40
    takes_machine = True
    side_by_side = True   # simulated time does not depend on the host's load
    default_cost_s = {"full": 150.0, "quick": 50.0}  # a lane without cost_s: 42-341 s full, 14-112 s quick (trapline/eta.py)
    counters = tuple(c.name for c in stats.COUNTERS)
    lane_needs = "trapline's changes to gem5 (gem5_configs/changes/<name>)"
    lanes = (Gem5Lane,)
    engines = Engines(se=f"{ENGINE}:Gem5Engine")  # (the CPU model: the machine's gem5.cpu, --set gem5.cpu=...)
    options = (CommandOption("--gem5", "PATH", "the gem5 binary for the gem5 platform (default: $GEM5, then "
                                               "gem5.opt or gem5 on PATH)"),)

    @classmethod
    def take_options(cls, values: dict) -> None:
        path = values.get("gem5")
        if path:
            found = binary.find(path)  # UsageError naming --gem5 when it is no executable file
            os.environ[binary.ENV] = str(found)  # for this process's workers too (sweep, sensitivity)

    @classmethod
    def why_unavailable(cls) -> str | None:
        try:
            binary.find()
        except (UsageError, RunFailed) as e:
            return str(e)
        return None

    @classmethod
    def lane_problems(cls, at: str, spec: dict) -> list[str]:
        from trapline.platforms.gem5 import from_source
        errs = super().lane_problems(at, spec)
        known = from_source.names()
        for n in spec.get("needs", []):
            if n not in known:
                errs.append(f"{at}.needs: '{n}' is not one of trapline's gem5 changes; valid choices: "
                            f"{', '.join(known)} (gem5_configs/changes/)")
        return errs

    @classmethod
    def why_lane_unavailable(cls, spec: dict) -> str | None:
        needs = spec.get("needs", [])
        if not needs:
            return None
        try:
            g = binary.facts(binary.find())
        except (UsageError, RunFailed) as e:
            return str(e)
        lacking = binary.lacking(g, needs)
        if not lacking:
            return None
        return (f"this lane needs trapline's gem5 changes {', '.join(lacking)} (gem5_configs/changes/), and the "
                f"gem5 found is {binary.described(g)}: build trapline's gem5 with {binary.BUILD_IT} "
                f"(or pass --gem5 a build of it)")

    @classmethod
    def report_lines(cls, f: dict) -> list[str]:
        g = f.get("gem5", {})
        which = ("trapline's gem5" if g.get("build") == "trapline" else "stock gem5") if g.get("build") else "gem5"
        out = [f"{cls.label}: {which} {g.get('version', '?')}, binary sha256 {str(g.get('sha256') or '-')[:12]}, "
               f"ISAs {', '.join(g.get('isas', [])) or '?'}, SE mode (gem5_configs/run_se.py)"]
        return out + machine_lines(cls.label, f.get("machines", {}))

    def describe(self) -> dict:
        try:
            g = binary.facts(binary.find())
        except (UsageError, RunFailed) as e:
            g = {"error": str(e)}
        return {"gem5": g, "machines": self.ctx.machines_used(self.name)}
