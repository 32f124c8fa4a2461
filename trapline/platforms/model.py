"""The timing-model platform: the experiment's kernel runs under QEMU user-mode
emulation with trapline's timing plugin (model/plugin/trapline-model.c), which
charges cycles for what executes according to a machine description
(gem5_configs/machines/<name>.yaml, trapline/machine.py).

Each measured repetition of a kernel is one region of interest (TL_ROI_BEGIN/
END in tl_measure), so the plugin's region i is the kernel's sample line i:
the sample keeps its ops and parameters and its time becomes the modelled one,
cycles / clock. The same metrics as on the host then apply. User mode with one
thread is deterministic: the same inputs give byte-identical stats.

An experiment whose model lane says `guest: true` needs a kernel (NUMA page
placement by Linux's first-touch policy, kernel fixups, a trap's whole path):
its commands run in the guest image of the qemu lane, booted under qemu-system
with the plugin (modelling only inside regions) and, for the one-vCPU guests,
-icount (nearly deterministic: docs/model.md), so the model also charges what
the guest kernel does inside a region, and a data access's cache lines and NUMA
node come from its guest-physical address (images.NUMA_LAYOUT says which node
holds it).

--set key=value: a key the machine description has (dotted, e.g.
caches.l1d.line=32B, or a top-level field such as cpi) overrides the machine;
any other key is a kernel argument.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from trapline import build, images, kernelio, machine as machines
from trapline.errors import RunFailed, UsageError
from trapline.platforms.base import Platform, PlatformRun, check_kernel_sets, kernel_args
from trapline.proc import run_command, tail

ROOT = Path(__file__).resolve().parent.parent.parent
QEMU_USER = {"x86_64": "qemu-x86_64", "sparc64": "qemu-sparc64", "armv6": "qemu-arm"}
SYSROOT = {"x86_64": None, "sparc64": "/usr/sparc64-linux-gnu", "armv6": "/usr/arm-linux-gnueabi"}
TIMEOUT_S = 900
GUEST_TIMEOUT_S = {True: 600, False: 2400}  # quick, full
# Guest time from the instruction count: one instruction = 1 ns of virtual time, the vCPUs
# run in turn in one thread, an idle guest skips ahead at once. Not for the
# two-vCPU x86_64 guest: under QEMU 7.2 with -icount, Linux 6.1 hangs at
# "x86: Booting SMP configuration" (tried: sleep on and off, shift 0, 3 and auto,
# -cpu max, Haswell and qemu64, tsc=reliable, lpj=, with and without -numa); that guest runs
# multi-threaded TCG, so interrupts landing in a region make its counts vary
# slightly from run to run (docs/model.md, "Guest lane"). The RTC starts at a fixed
# date, not the host's (the sun4u guest reads it at boot).
ICOUNT = ["-icount", "shift=0,sleep=off,align=off", "-rtc", "base=2000-01-01T00:00:00,clock=vm"]
ICOUNT_BY_ARCH = {"sparc64": ICOUNT, "armv6": ICOUNT, "x86_64": []}
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
    _guests: dict[str, images.Image] = {}

    def __init__(self, machine_name: str | None = None):
        self.machine_name = machine_name

    def describe(self) -> dict:
        from trapline.platforms.qemu import guest_image_facts
        return {"plugin": str(self._plugin) if self._plugin else None,
                "qemu": {a: _version(QEMU_USER[a]) for a in sorted(self._builds)},
                # the guest lane: qemu-system and the guest image it booted
                "guests": {a: guest_image_facts(a, img) for a, img in sorted(self._guests.items())},
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
        self._machines[m.name + ("+" + ",".join(m.sets) if m.sets else "")] = m.to_dict()
        if spec.get("guest"):
            return self._run_guest(exp, m, quick, kset, log, t0)
        if arch not in self._builds:
            self._builds[arch] = build.build(arch, log=log)
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
            err = pair_regions(out, regions, clock, " ".join(shown[-1]))
            if err:
                return PlatformRun(output, "\n".join(raw), shown, seconds=time.monotonic() - t0, error=err)
            regions_total += len(regions)
            output.extend(out)
        hashes = {f"{exp.kernel}/{k}": v for k, v in build.binary_hashes(bindir).items()}
        run = PlatformRun(output, "\n".join(raw), shown, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = machine_facts(exp, m, regions_total)
        return run

    def _run_guest(self, exp, m: machines.Machine, quick: bool, kset: dict[str, str], log, t0: float) -> PlatformRun:
        """The experiment's commands in the guest image, under qemu-system with the plugin."""
        from trapline.platforms.qemu import QemuPlatform, boot_once_more_if_silent, command_outputs, guest_commands, \
            guest_hashes
        spec = exp.platform(self.name)
        arch = spec["arch"]
        if os.environ.get("TRAPLINE_MEM"):
            raise UsageError("the model's guest lane maps guest-physical memory to NUMA nodes with the default "
                             "guest memory; unset TRAPLINE_MEM")
        layout = images.NUMA_LAYOUT[arch]
        lat = m.numa_cycles()
        if lat and len(lat) != len(layout["node_bytes"]):
            raise UsageError(f"machine '{m.name}' has {len(lat)} NUMA nodes but the {arch} guest has "
                             f"{len(layout['node_bytes'])}; use a machine with {len(layout['node_bytes'])} "
                             f"(or --set the numa group)")
        image = QemuPlatform().image(arch, log)
        self._guests[arch] = image
        bindir = QemuPlatform._bindirs[arch]
        commands, shown = guest_commands(exp, spec, quick, kset)
        timeout = spec.get("boot_timeout_s", GUEST_TIMEOUT_S[quick])
        output = kernelio.KernelOutput()
        with tempfile.TemporaryDirectory(prefix="trapline-model-guest-") as tmp:
            out = Path(tmp) / "stats.json"
            opts = [str(self._plugin), f"arch={arch}", f"out={out}"] + guest_plugin_args(m, image)
            if lat:
                opts += [f"numa_mem={':'.join(str(b) for b in layout['node_bytes'])}",
                         f"numa_cpus={':'.join(str(c) for c in layout['cpu_nodes'])}"]
            log(f"{exp.id}: booting the {arch} guest under the timing model ({m.name}) with "
                f"{len(commands)} command(s)")
            b, retried = boot_once_more_if_silent(exp.id, image, commands, timeout, log,
                                                  qemu_extra=["-plugin", ",".join(opts)] + ICOUNT_BY_ARCH[arch])
            stats = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
        raw = f"$ {b.qemu_cmdline}\n{b.console}\n--- boot.sh ---\n{b.stderr}\n--- model stats ---\n" \
              f"{json.dumps(stats, indent=1)}"
        hashes = guest_hashes(image, bindir, exp.kernel)
        outs, err = command_outputs(b, commands, shown, timeout, under=" under the model")
        if err is None and not stats:
            err = f"QEMU ended without the model's statistics (the plugin writes them at exit); " \
                  f"console tail:\n{tail(b.console)}\n{tail(b.stderr, 5)}"
        # regions of every vCPU in the order they began: the guest's commands
        # ran one after another, each bound to its CPU while it measured
        regions = sorted((g for g in stats.get("regions", []) if g.get("marked")), key=lambda g: g["seq"])
        for text, what in zip(outs if err is None else [], shown):
            o = kernelio.parse(text)
            mine, regions = regions[:len(o.samples)], regions[len(o.samples):]
            err = pair_regions(o, mine, m.clock_hz, " ".join(what))
            if err:
                break
            output.extend(o)
        if err is None and regions:
            err = f"the model reported {len(regions)} more regions than the guest printed samples"
        run = PlatformRun(output, raw, shown, error=err, binaries=hashes, seconds=time.monotonic() - t0)
        run.facts = machine_facts(exp, m, len(stats.get("regions", [])))
        # in system mode a trap runs the guest kernel's own handler under the
        # model: no lump trap cost (the plugin charges traps.cost only in user
        # mode) and, on sparc64, no window-trap cost (guest_plugin_args)
        unused = {"traps.cost", "windows.spill_fill_cost"}
        run.facts["calibrated_on_this_claim"] = [k for k in run.facts["calibrated_on_this_claim"] if k not in unused]
        icount = ICOUNT_BY_ARCH[arch]
        # a guest is not bit-for-bit deterministic even under -icount (docs/model.md:
        # the sun4u guest's regions differ by a few window traps in some runs)
        run.facts.update(guest=True, boot=b.facts, boot_retried=retried, icount=icount[1] if icount else None,
                         deterministic=False, numa_layout=layout if lat else None)
        return run


def guest_plugin_args(m: machines.Machine, image: images.Image) -> list[str]:
    """The machine's plugin options for a whole guest: only the regions are
    modelled (fast_forward=2: the boot, and what runs between regions, such as
    a buffer's first touch or the next command's start, run at nearly plain QEMU
    speed; caches and TLBs start cold at the first region and keep, between
    regions, the state the last one left; each experiment's repetitions make the
    first one a warm-up). On sparc64 the plugin is
    told where Linux's trap table is (trap_table=, its entries are then counted
    by kind) and its own register-window model is off (nwindows=0): the guest
    kernel's spill and fill handlers run under the model instead, so counting
    the plugin's windows too would charge every spill twice."""
    args = machines.plugin_args(m) + ["fast_forward=2"]
    if image.arch != "sparc64":
        return args
    args = [a for a in args if a.split("=", 1)[0] not in ("nwindows", "window_trap")]
    return args + ["nwindows=0", "window_trap=0", f"trap_table={images.symbol(image, 'sparc64_ttable_tl0')}"]


def pair_regions(out: kernelio.KernelOutput, regions: list[dict], clock: float, what: str) -> str | None:
    """Give sample i the model's time of region i (cycles / clock) and its
    event counts as model_* counters with the sample's parameters; an error
    message if they do not pair up one to one."""
    if len(regions) != len(out.samples):
        return (f"{what}: the model reported {len(regions)} regions for {len(out.samples)} samples; they must "
                "pair up one to one")
    out.timer = {"source": "model", "res_ns": 0, "min_delta_ns": 0}  # the kernel's clock is not what times a sample
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
    return None


def machine_facts(exp, m: machines.Machine, regions: int) -> dict:
    cat = exp.data["catalogue"]
    srcs = m.sources()
    calibrated = sorted(k for k, v in srcs.items() if str(v).startswith(f"calibrated: {cat}:"))
    # numbers the machine file takes from the claim itself (its own figures, not fitted)
    from_claim = sorted(k for k, v in srcs.items()
                        if not str(v).startswith("calibrated") and re.search(rf"claims\.md {cat}\b", str(v)))
    # numbers no source was found for (docs/machines.md lists them with the reasoning)
    assumed = sorted(k for k, v in srcs.items() if str(v).startswith("assumed:"))
    return {"machine": m.name, "machine_sets": list(m.sets), "machine_file_sha256": m.to_dict().get("file_sha256"),
            "clock_hz": m.clock_hz, "regions": regions, "calibrated_on_this_claim": calibrated,
            "from_this_claim": from_claim, "assumed": assumed}


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
            "model_window_fills": t.get("window_fill", 0), "model_prefetch_traps": t.get("prefetch", 0),
            "model_l3_misses": (g.get("l3") or {}).get("misses", 0),
            **{f"model_trap_entries_{k}": n for k, n in (g.get("trap_table_entries") or {}).items()},
            **({"model_data_aborts": g["exceptions"]["data_abort"]} if "exceptions" in g else {}),
            "model_memory_reads": sum(g.get("memory_reads_by_node", [])),
            "model_memory_writes": sum(g.get("memory_writes_by_node", [])),
            **{f"model_memory_reads_node{k}": n for k, n in enumerate(g.get("memory_reads_by_node", []))}}


def _version(binary: str) -> str:
    try:
        return subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"
