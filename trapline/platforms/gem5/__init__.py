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

import importlib.util
import os
import sys
import time
from functools import lru_cache

from trapline import arch as arch_table, build, kernelio, machine as machines
from trapline.errors import RunFailed, UsageError
from trapline.platforms.gem5 import binary, run as gem5_run, stats
from trapline.platforms.gem5.machine_json import export, isa
from trapline.paths import ROOT
from trapline.platforms.base import (CommandOption, Lane, Platform, PlatformRun, check_kernel_sets, kernel_args,
                                     machine_lines, machine_provenance)
from trapline.proc import tail

FLAVOUR = "gem5"          # the kernels' build flavour with m5-op region markers (kernels/common)
FREESTANDING = "gem5-freestanding"  # ... whose listed sparc64 kernels link without glibc
GLIBC_CHANGE = "sparc-glibc"        # trapline's change that lets SPARC SE start a glibc program
TIMEOUT_S = 3600          # a full-size run on the O3 CPU is slow (about 0.3 M instructions/s)
CPU_FIELD = "gem5.cpu"    # the machine field (and --set key) that picks the CPU model


@lru_cache(maxsize=None)
def _params_module():
    """gem5_configs/trapline_gem5/params.py (plain Python: gem5's side of the machine mapping)."""
    path = ROOT / "gem5_configs" / "trapline_gem5" / "params.py"
    spec = importlib.util.spec_from_file_location("trapline_gem5_params", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


def unused_fields(m: machines.Machine, g: dict | None = None, exported: dict | None = None) -> frozenset[str]:
    """The machine fields gem5 (facts `g`, default the one found) does not read: params.py
    notes them instead of mapping them (the model-only costs such as traps.cost, or on a
    stock gem5 atomics.split_lock_cost), so a parameter fitted to a claim that gem5
    ignores does not make gem5's figure 'fitted'. exported: export(m), when made already."""
    p = _params_module().from_machine(exported or export(m), changes=_changes(g))
    return frozenset(n.field for n in p.notes if n.field not in p.mapped)


def _changes(g: dict | None) -> list[str]:
    """trapline's changes in the gem5 of facts g (None: the gem5 found; none found: [])."""
    if g is None:
        try:
            g = binary.facts(binary.find())
        except (UsageError, RunFailed):
            return []
    return list(g.get("changes", []))


def kernel_flavour(arch: str, g: dict) -> str:
    """The build flavour of the kernels a gem5 (facts g) runs: gem5, or on sparc64 without
    trapline's change sparc-glibc, gem5-freestanding (a stock gem5's SPARC SE mode stops a
    glibc program at its first system call: kernels/common/freestanding.mk)."""
    return FLAVOUR if arch != "sparc64" or GLIBC_CHANGE in g.get("changes", []) else FREESTANDING


def build_kernels(arches, log=None) -> list:
    """The kernels' build directories in the flavour the gem5 find() finds runs (kernel_flavour),
    for each of `arches` whose ISA that gem5 has (`./run.sh build --for-gem5`: the Docker image
    builds them while its cache is writable)."""
    g = binary.facts(binary.find())
    return [build.build(a, flavour=kernel_flavour(a, g), log=log) for a in arches
            if arch_table.get(a).gem5_isa in g["isas"]]


def cpu_of(m: machines.Machine) -> str:
    """The CPU model the machine runs on in gem5 (its gem5.cpu, else O3)."""
    return str(m.raw(CPU_FIELD)) if m.has(CPU_FIELD) else gem5_run.DEFAULT_CPU


class Gem5Lane(Lane):
    """A gem5 lane: the kernel's runs one after another, each in its own gem5 process."""

    def sweep_keys(self) -> dict:
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
        return {"gem5": g, "machines": self.machines_used()}

    def validate(self, exp) -> None:
        m = self.machine_of(exp)  # raises for a bad machine field (gem5.cpu outside timing|minor|o3), naming it
        gem5_run.check_cpu(cpu_of(m), isa(m))  # (minor cannot run SPARC: gem5_run.BROKEN_CPUS)
        gem5_run.check_isa(m, binary.facts(binary.find()))
        check_kernel_sets(self.ctx, exp, self.name, self.kernel_sets,
                          also=f"; or a machine field: {', '.join(sorted(machines.top_fields()))} "
                               f"(dotted, e.g. {CPU_FIELD}=timing)")

    # ------------------------------------------------ ./run.sh simulate (trapline/simulate.py)

    simulates = ("se",)

    @classmethod
    def simulate_problem(cls, machine: machines.Machine, mode: str) -> str | None:
        why = super().simulate_problem(machine, mode) or cls.why_unavailable()
        if why:
            return why
        try:
            gem5_run.check_cpu(cpu_of(machine), isa(machine))
            gem5_run.check_isa(machine, binary.facts(binary.find()))
        except UsageError as e:
            return str(e)
        return None

    def simulate(self, machine: machines.Machine, program, argv: list[str], mode: str, timeout: float):
        """The user's program in gem5 SE mode on the machine, on its gem5.cpu (--set gem5.cpu=...)."""
        from trapline.platforms.gem5 import simulated
        return simulated.simulate(type(self), machine, program, argv, timeout, cpu=cpu_of(machine))

    def run(self, exp) -> PlatformRun:
        ctx, log = self.ctx, self.ctx.log
        spec, arch, t0 = self._lane(exp)
        m = self.use_machine(exp)
        gem5 = binary.find()
        facts = binary.facts(gem5)
        cpu = cpu_of(m)
        exported = export(m)  # the machine as gem5's JSON, once for every run of the lane
        flavour = kernel_flavour(arch, facts)
        bindir = ctx.tool(f"kernels-{flavour}-{arch}", lambda: build.build(arch, log=log, flavour=flavour)) / exp.kernel
        output = kernelio.KernelOutput()
        raw, shown, per_run = [], [], []
        log(f"{exp.id}: {binary.described(facts)} ({cpu} CPU, {flavour} kernels), machine "
            f"{m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}")
        for i, r in enumerate(spec.get("runs", [])):
            args = kernel_args(ctx, exp, r, self.kernel_sets)
            argv = [str(bindir / r["binary"])] + args
            shown.append([f"{exp.kernel}/{r['binary']}"] + args)
            what = " ".join(shown[-1])
            cores = gem5_run.cores_for(dict(a.split("=", 1) for a in args))
            log(f"{exp.id} [{i + 1}/{len(spec['runs'])}] {what} ({cores} core(s))")
            g = gem5_run.simulate(m, argv, cpu=cpu, cores=cores, gem5=gem5, cwd=bindir,
                                  timeout=ctx.timeout_for(r.get("timeout_s", TIMEOUT_S)), exported=exported)
            raw.append(f"$ {' '.join(g.cmd)}\n{g.stdout}{g.stderr}")
            per_run.append({"run": what, "cpu": cpu, "cores": cores, "config_sha256": g.config_sha256,
                            "ticks": g.ticks, "regions": len(g.regions), "wall_seconds": round(g.seconds, 2),
                            "instructions": (g.tail_region or {}).get("instructions_since_start")})
            err = g.error
            if err is None and g.status != 0:
                err = f"{what} exited with status {g.status} under gem5; last output:\n{tail(g.stdout + g.stderr)}"
            if err is None:
                out = kernelio.parse(g.stdout)
                err = stats.pair_regions(out, g.regions, what)
                if err is None:
                    output.extend(out)
            if err:
                run = PlatformRun(output, "\n".join(raw), shown, error=f"{what}: {err}" if not err.startswith(what)
                                  else err, seconds=time.monotonic() - t0)
                run.facts = self._facts(exp, m, cpu, facts, per_run, flavour, exported)
                return run
        hashes = {f"{exp.kernel}/{k}": v for k, v in build.binary_hashes(bindir).items()}
        run = PlatformRun(output, "\n".join(raw), shown, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = self._facts(exp, m, cpu, facts, per_run, flavour, exported)
        return run

    def _facts(self, exp, m: machines.Machine, cpu: str, g: dict, per_run: list[dict], flavour: str,
               exported: dict) -> dict:
        return {**machine_provenance(exp, m, unused_fields(m, g, exported)), "cpu": cpu, "deterministic": True,
                "gem5_version": g.get("version"), "gem5_sha256": g.get("sha256"), "gem5_build": g.get("build"),
                "gem5_changes": g.get("changes", []), "gem5_changes_sha256": g.get("changes_sha256"),
                "kernel_flavour": flavour, "runs": per_run,
                "config_sha256": sorted({r["config_sha256"] for r in per_run if r["config_sha256"]})}
