"""`./run.sh simulate` on the timing model: the plugin's stats JSON of a user's
program as the common stats (trapline/simstats.py), in user mode (QEMU user mode,
no kernel: the plugin's own trap and window models charge what a kernel would do)
or in the arch's guest (--guest: the program under Linux in qemu-system with the
plugin; the kernel's trap paths run and are charged; only the regions the program
marks with TL_ROI_BEGIN/END are modelled, as in the guest lanes).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from trapline import arch as arch_table, guest, simstats
from trapline.platforms.model import counters
from trapline.platforms.model.plugin_build import plugin as built_plugin
from trapline.proc import tail

# what each figure of the model rests on
RESTS_ON = {"seconds": simstats.PREDICTION, "cycles": simstats.PREDICTION, "instructions": simstats.COUNTED,
            "l1i_accesses": simstats.COUNTED, "l1d_accesses": simstats.COUNTED, "traps": simstats.COUNTED,
            **{k: simstats.PREDICTION for k in ("l1i_misses", "l1d_misses", "l2_accesses", "l2_misses",
                                                  "l3_accesses", "l3_misses", "itlb_misses", "dtlb_misses",
                                                  "memory_reads_by_node")}}
# the guest boots and restores under the model too (fast_forward: at plain QEMU speed)
GUEST_BOOT_S = 300


def _level(g: dict, name: str) -> tuple[int | None, int | None]:
    """A level's accesses and misses as simstats.SCALARS defines them: the L1I's reads by fetch
    (line_fetches: a move to another line), the L1D's loads and stores, the L2's and L3's demand
    reads from above (write-backs into them are not accesses) and the lines each one filled."""
    lv = g.get(name)
    if not isinstance(lv, dict):
        return None, None
    if name == "l1i":
        return lv.get("line_fetches"), lv.get("misses")
    if name in ("l2", "l3"):
        rh, rm = lv.get("read_hits"), lv.get("read_misses")
        return (None if rh is None or rm is None else rh + rm), rm
    return lv.get("accesses"), lv.get("misses")


def instructions(g: dict) -> int | None:
    """Instructions as simstats.SCALARS defines them, as model_instructions counts them: an x86
    rep-prefixed string instruction once (QEMU executes it once per iteration)."""
    return None if g.get("instructions") is None else counters.count(g, "model_instructions")


def block(g: dict, clock_hz: float) -> dict:
    """One region (or the total) of the plugin's stats as a figures block."""
    traps = {k: v for k, v in (g.get("traps") or {}).items() if v}
    traps.update({f"trap_table.{k}": v for k, v in (g.get("trap_table_entries") or {}).items() if v})
    traps.update({f"exception.{k}": v for k, v in (g.get("exceptions") or {}).items() if v})
    reads = g.get("memory_reads_by_node")
    out = {"seconds": g["cycles"] / clock_hz, "instructions": instructions(g), "cycles": g.get("cycles"),
           "traps": traps, "memory_reads_by_node": {str(i): n for i, n in enumerate(reads)} if reads else None,
           "itlb_misses": (g.get("itlb") or {}).get("misses"), "dtlb_misses": (g.get("dtlb") or {}).get("misses")}
    for lv in ("l1i", "l1d", "l2", "l3"):
        out[f"{lv}_accesses"], out[f"{lv}_misses"] = _level(g, lv)
    return simstats.figures(**out)


def common(platform, machine, program, argv, mode: str, raw: dict, status: int | None) -> dict:
    clock = machine.clock_hz
    marked = [g for g in raw.get("regions", []) if g.get("marked") and g.get("index") != "overflow"]
    marked.sort(key=lambda g: g.get("seq", 0))
    if mode == "guest":  # only the regions are modelled: the total is theirs
        total = block(simstats.add_up(marked, NOT_COUNTS), clock) if marked else {}
    else:
        total = block(raw["total"], clock) if raw.get("total") else {}
    return simstats.stats(platform, machine, program, argv, mode, status, "simulated", total,
                          [block(g, clock) for g in marked], RESTS_ON, raw)


# the plugin's bookkeeping in a region, not counts to add up
NOT_COUNTS = ("vcpu", "index", "marked", "closed_by", "seq")


def user_run(platform, machine, program, argv: list[str], raw: dict, so: str, se: str, status: int | None,
             timeout: float) -> simstats.Run:
    """A QEMU user-mode run's (ModelPlatform.simulate) stats and output as a Run."""
    err = None
    if status is None:
        err = f"the program did not end within {timeout:g} s and was killed; its last output:\n{tail(so + se)}"
    return simstats.Run(common(platform, machine, program, argv, "user", raw, status), so, se, err)


def guest_run(platform, machine, argv: list[str], program, timeout: float, guest_plugin_args) -> simstats.Run:
    """The program under Linux in the arch's guest, with the model (guest_plugin_args: the
    guest lane's plugin options, trapline.platforms.model): restored from the program
    snapshot kind (trapline/guest.py program_image), the program written into it."""
    ctx = platform.ctx
    a = arch_table.get(machine.arch)
    image = ctx.image(machine.arch)
    layout = a.numa
    img = guest.program_image(image, ctx.log)
    cmd = guest.program_command(guest.PROGRAM_PATH, argv[1:])
    with tempfile.TemporaryDirectory(prefix="trapline-simulate-") as tmp:
        out = Path(tmp) / "stats.json"
        opts = [str(built_plugin(ctx)), f"arch={machine.arch}", f"out={out}"] + guest_plugin_args(machine, image)
        if machine.numa_cycles():  # as many nodes as the guest's (ModelPlatform.simulate_problem)
            opts += [f"numa_mem={':'.join(str(b) for b in layout.node_bytes)}",
                     f"numa_cpus={':'.join(str(c) for c in layout.cpu_nodes)}"]
        b = guest.boot(img, [cmd], timeout + GUEST_BOOT_S, per_command_timeout=timeout, log=ctx.log,
                       qemu_extra=["-plugin", ",".join(opts)] + list(a.icount), snapshot=True,
                       program=Path(program.path))
        raw = json.loads(out.read_text()) if out.exists() and out.stat().st_size else {}
    return guest.program_result(common(type(platform), machine, program, argv, "guest", raw, None), b, timeout)
