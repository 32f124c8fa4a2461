"""The timing-model platform: the experiment's kernel runs under QEMU user-mode
emulation with trapline's timing plugin (model/plugin/trapline-model.c), which
charges cycles for what executes according to a machine description
(gem5_configs/machines/<name>.yaml, trapline/machine.py).

Each measured repetition of a kernel is one region of interest (TL_ROI_BEGIN/
END in tl_measure), so the plugin's region i is the kernel's sample line i:
the sample keeps its ops and parameters and its time becomes the modelled one,
cycles / clock. The same metrics as on the host then apply. User mode with one
thread is deterministic: the same inputs give byte-identical stats.

--set key=value: a key the machine description has (dotted, e.g.
caches.l1d.line=32B, or a top-level field such as cpi) overrides the machine;
any other key is a kernel argument.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from trapline import build, kernelio, machine as machines
from trapline.errors import RunFailed, UsageError
from trapline.platforms.base import Platform, PlatformRun, check_kernel_sets, kernel_args
from trapline.proc import run_command, tail

ROOT = Path(__file__).resolve().parent.parent.parent
QEMU_USER = {"x86_64": "qemu-x86_64", "sparc64": "qemu-sparc64", "armv6": "qemu-arm"}
SYSROOT = {"x86_64": None, "sparc64": "/usr/sparc64-linux-gnu", "armv6": "/usr/arm-linux-gnueabi"}
TIMEOUT_S = 900
MACHINE_TOP_KEYS = {"name", "description", "arch", "claims", "clock", "cpi", "caches", "memory", "numa", "tlb",
                    "unaligned", "atomics", "prefetch", "traps", "windows"}


def plugin_path(log=None) -> Path:
    """Build (or find in the cache) the plugin; model/build.sh prints its path."""
    env = dict(os.environ, TRAPLINE_CACHE=str(build.cache_root()))
    status, out, err = run_command(["sh", str(ROOT / "model" / "build.sh")], 1800, env=env)
    if status != 0 or not out.strip():
        raise RunFailed(f"building the timing-model plugin failed (status {status}):\n{tail(err, 20)}")
    return Path(out.strip().splitlines()[-1])


def split_sets(sets: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(machine overrides as 'path=value', kernel arguments)."""
    mset, kset = [], {}
    for k, v in sets.items():
        if "." in k or "[" in k or k in MACHINE_TOP_KEYS:
            mset.append(f"{k}={v}")
        else:
            kset[k] = v
    return mset, kset


def simulate(arch: str, plugin: Path, machine: machines.Machine, argv: list[str], timeout: float = TIMEOUT_S,
             cwd: Path | None = None) -> tuple[dict, str, str, int | None]:
    """Run argv under qemu-<arch> with the model; returns (stats, stdout, stderr, status)."""
    with tempfile.TemporaryDirectory(prefix="trapline-model-") as tmp:
        out = Path(tmp) / "stats.json"
        opts = ",".join([str(plugin), f"arch={arch}", f"out={out}"] + machines.plugin_args(machine))
        cmd = [QEMU_USER[arch], "-plugin", opts]
        if SYSROOT[arch]:
            cmd += ["-L", SYSROOT[arch]]
        status, so, se = run_command(cmd + argv, timeout, cwd=cwd)
        stats = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
    return stats, so, se, status


class ModelPlatform(Platform):
    name = "model"
    label = "timing model"
    _plugin: Path | None = None
    _builds: dict[str, Path] = {}
    _machines: dict[str, dict] = {}

    def __init__(self, machine_name: str | None = None):
        self.machine_name = machine_name

    def describe(self) -> dict:
        return {"plugin": str(self._plugin) if self._plugin else None,
                "qemu": {a: _version(QEMU_USER[a]) for a in sorted(self._builds)},
                "machines": self._machines}

    def _machine(self, exp, sets: dict[str, str]) -> machines.Machine:
        spec = exp.platform(self.name)
        name = self.machine_name or spec.get("machine")
        if not name:
            raise UsageError(f"{exp.id} on model needs --machine; valid choices: {', '.join(machines.names())}")
        mset, _ = split_sets(sets)
        return machines.load(name, sets=mset)

    def validate_sets(self, exp, sets: dict[str, str]) -> None:
        m = self._machine(exp, sets)  # raises for a bad machine field, naming it
        spec = exp.platform(self.name)
        if m.arch != spec["arch"]:
            raise UsageError(f"machine '{m.name}' is {m.arch}, but {exp.id} runs its model lane on {spec['arch']}")
        _, kset = split_sets(sets)
        check_kernel_sets(exp, self.name, kset,
                          also=f"; or a machine field: {', '.join(sorted(MACHINE_TOP_KEYS))} "
                               f"(dotted, e.g. caches.l1d.line=32B)")

    def run(self, exp, quick: bool, sets: dict[str, str], log) -> PlatformRun:
        spec = exp.platform(self.name)
        arch = spec["arch"]
        t0 = time.monotonic()
        m = self._machine(exp, sets)
        _, kset = split_sets(sets)
        if ModelPlatform._plugin is None:
            ModelPlatform._plugin = plugin_path(log)
        if arch not in self._builds:
            self._builds[arch] = build.build(arch, log=log)
        self._machines[m.name + ("+" + ",".join(m.sets) if m.sets else "")] = m.to_dict()
        bindir = self._builds[arch] / exp.kernel
        clock = m.clock_hz
        output = kernelio.KernelOutput()
        raw, shown, regions_total = [], [], 0
        log(f"{exp.id}: timing model, machine {m.name}{' with ' + ' '.join(m.sets) if m.sets else ''}")
        for i, r in enumerate(spec.get("runs", [])):
            argv = [str(bindir / r["binary"])] + kernel_args(exp, r, quick, kset)
            shown.append([f"{exp.kernel}/{r['binary']}"] + argv[1:])
            log(f"{exp.id} [{i + 1}/{len(spec['runs'])}] {' '.join(shown[-1])}")
            stats, so, se, status = simulate(arch, self._plugin, m, argv, r.get("timeout_s", TIMEOUT_S),
                                             cwd=bindir)
            raw.append(f"$ {' '.join(shown[-1])}\n{so}{se}\n--- model stats ---\n{json.dumps(stats, indent=1)}")
            err = None
            if status is None:
                err = f"{' '.join(shown[-1])} timed out under the model; last output:\n{tail(so + se)}"
            elif status != 0:
                err = f"{' '.join(shown[-1])} exited with status {status} under the model; last output:\n{tail(so + se)}"
            if err:
                return PlatformRun(output, "\n".join(raw), shown, error=err, seconds=time.monotonic() - t0)
            out = kernelio.parse(so)
            regions = [g for g in stats.get("regions", []) if g.get("marked") and g.get("vcpu", 0) == 0]
            if len(regions) != len(out.samples):
                return PlatformRun(output, "\n".join(raw), shown, seconds=time.monotonic() - t0,
                                   error=f"{' '.join(shown[-1])}: the model reported {len(regions)} regions for "
                                         f"{len(out.samples)} samples; they must pair up one to one")
            for s, g in zip(out.samples, regions):
                s["ns"] = max(1, round(g["cycles"] / clock * 1e9))
                s["cycles"] = g["cycles"]
                s.pop("user_ns", None)
                s.pop("sys_ns", None)
                # the model's event counts for this region, as counters with the
                # sample's parameters (repetitions collapse to their median)
                params = {k: v for k, v in s.items() if k not in ("exp", "kind", "rep", "ns", "user_ns", "sys_ns",
                                                                  "cycles", "iters")}
                for name, value in region_counts(g, s["ops"]).items():
                    out.counts.append({**params, "kind": "count", "name": name, "value": value})
            regions_total += len(regions)
            output.extend(out)
        hashes = {f"{exp.kernel}/{k}": v for k, v in build.binary_hashes(bindir).items()}
        run = PlatformRun(output, "\n".join(raw), shown, binaries=hashes, seconds=time.monotonic() - t0)
        cat = exp.data["catalogue"]
        calibrated = sorted(k for k, v in m.sources().items() if str(v).startswith(f"calibrated: {cat}:"))
        run.facts = {"machine": m.name, "machine_sets": list(m.sets), "machine_file_sha256": m.to_dict().get("file_sha256"),
                     "clock_hz": clock, "regions": regions_total, "calibrated_on_this_claim": calibrated}
        return run


def region_counts(g: dict, ops: int) -> dict[str, int]:
    """The plugin's counts for one region, flattened to model_* counters."""
    t = g.get("traps", {})
    return {"model_ops": ops, "model_instructions": g.get("instructions", 0), "model_cycles": g.get("cycles", 0),
            "model_l1d_misses": g.get("l1d", {}).get("misses", 0),
            "model_l2_misses": (g.get("l2") or {}).get("misses", 0),
            "model_dtlb_misses": g.get("dtlb", {}).get("misses", 0),
            "model_itlb_misses": g.get("itlb", {}).get("misses", 0),
            "model_straddling": g.get("straddling_accesses", 0),
            "model_locked_split": g.get("locked", {}).get("split", 0),
            "model_traps_unaligned": t.get("unaligned", 0), "model_window_spills": t.get("window_spill", 0),
            "model_window_fills": t.get("window_fill", 0), "model_prefetch_traps": t.get("prefetch", 0)}


def _version(binary: str) -> str:
    try:
        return subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"
