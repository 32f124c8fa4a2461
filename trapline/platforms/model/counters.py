"""The model platform's counters: the model_* counts the experiments count on, read
from each region of the plugin's stats JSON (`COUNTERS`, `region_counts`): each one's
name, where in a region it is read, and what it means. docs/model.md carries the table
(`counters_markdown`; `python -m trapline.platforms.model.plugin --markdown` prints it with the
options table, `--write-docs` rewrites both).

The platform declares them (ModelPlatform.counters); an experiment file's check names
a model_* count only on the model lane, and only one of these (trapline/experiment.py
asks the platform).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

@dataclass(frozen=True)
class Counter:
    """One model_* count of a region, as the experiments' checks name it."""
    name: str  # with {} for one count per key (a dict) or index (a list)
    path: str  # dotted, in a region of the stats JSON ("-": not from the plugin)
    how: str   # value (0 when absent or null), sum (of a list), each ({} per key/index), if-present, ops,
    #            less (path "a-b": a less b, each 0 when absent)
    doc: str


COUNTERS: tuple[Counter, ...] = (
    Counter("model_ops", "-", "ops", "the sample's operations, as the kernel reported them"),
    Counter("model_instructions", "instructions-rep_repeats", "less",
            "instructions executed in the region, an x86 rep-prefixed string instruction once (QEMU executes it "
            "once per iteration; rep_repeats are the executions after the first), as gem5_instructions"),
    Counter("model_cycles", "cycles", "value", "modelled cycles: cpi x instructions + every penalty"),
    Counter("model_l1d_misses", "l1d.misses", "value", "L1D misses (loads and stores)"),
    Counter("model_l2_misses", "l2.read_misses", "value",
            "lines the L2 filled from below on demand: its read misses (L1 fills), not write-backs from the L1D "
            "that missed it (0 without an L2)"),
    Counter("model_dtlb_misses", "dtlb.misses", "value", "DTLB misses"),
    Counter("model_itlb_misses", "itlb.misses", "value", "ITLB misses"),
    Counter("model_straddling", "straddling_accesses", "value", "accesses touching two cache lines"),
    Counter("model_locked_split", "locked.split", "value", "locked read-modify-writes straddling two lines"),
    Counter("model_traps_unaligned", "traps.unaligned", "value", "unaligned accesses that trapped"),
    Counter("model_window_spills", "traps.window_spill", "value", "SPARC register-window spill traps"),
    Counter("model_window_fills", "traps.window_fill", "value", "SPARC register-window fill traps"),
    Counter("model_prefetch_traps", "traps.prefetch", "value", "strong prefetches that trapped"),
    Counter("model_l3_misses", "l3.read_misses", "value",
            "lines the L3 filled from memory on demand: its read misses (0 without an L3)"),
    Counter("model_trap_entries_{}", "trap_table_entries", "each",
            "sparc64 guest: entries into the kernel's trap table, by kind (with trap_table=)"),
    Counter("model_data_aborts", "exceptions.data_abort", "if-present", "ARM guest: data-abort exception entries"),
    Counter("model_memory_reads", "memory_reads_by_node", "sum", "reads that reached memory, all nodes"),
    Counter("model_memory_writes", "memory_writes_by_node", "sum", "writes that reached memory, all nodes"),
    Counter("model_memory_reads_node{}", "memory_reads_by_node", "each", "reads that reached memory, by node"),
    Counter("model_wait_cycles", "contention.wait_cycles", "if-present",
            "lockstep=on: cycles the region's vCPU waited for others (lock-line hand-offs, a join); in model_cycles"),
    Counter("model_handoffs", "contention.handoffs", "if-present",
            "lockstep=on: locked read-modify-writes of a line another vCPU's last locked RMW held"),
    Counter("model_l1i_misses", "l1i.misses", "value", "L1I misses (instruction fetches)"),
    Counter("model_l1d_misses_in_flight", "timing.l1d_in_flight", "value",
            "core=ooo: L1D accesses to a line a miss or prefetch was still filling (0 in order)"),
    Counter("model_misses_overlapped", "timing.misses_overlapped", "value",
            "core=ooo: L1D demand misses made while another was still waiting for its line (0 in order)"),
    Counter("model_dependent_misses", "timing.dependent_misses", "value",
            "core=ooo: load misses that waited for an outstanding load their address came from"),
    Counter("model_data_stall_cycles", "timing.data_stall_cycles", "value",
            "the cycles of the region spent waiting for data (core=ooo: on the core's timeline; in order: every "
            "miss in full); in model_cycles"),
    Counter("model_hw_prefetches_issued", "hardware_prefetches.issued", "value",
            "lines the hardware prefetchers fetched, every level"),
    Counter("model_hw_prefetches_useful", "hardware_prefetches.useful", "value",
            ("hardware-prefetched lines whose first demand access found them filled (one that meets the prefetch "
             "still on its way is late, not useful: gem5's pfUseful counts a demand hit on a prefetched block)")),
    Counter("model_context_switches", "context_switches", "if-present",
            "sparc64 guest: address-space switches that emptied the model's TLBs (with ctx_switch=)"),
)


def _get(g: dict, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(g, dict):
            return None
        g = g.get(key)
    return g


def count(g: dict, name: str) -> int:
    """One value or less counter of a region (simulate's figure of the same meaning reads it here)."""
    c = next(c for c in COUNTERS if c.name == name and c.how in ("value", "less"))
    return region_counts_of(g, (c,))[name]


def region_counts(g: dict, ops: int) -> dict[str, int]:
    """The plugin's counts for one region (a dict of its stats JSON), flattened to the model_* counters."""
    return region_counts_of(g, COUNTERS, ops)


def region_counts_of(g: dict, counters: tuple[Counter, ...], ops: int = 0) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counters:
        v = ops if c.how == "ops" else _get(g, c.path)
        if c.how in ("ops", "value"):
            out[c.name] = v or 0
        elif c.how == "less":
            a, b = c.path.split("-")
            out[c.name] = (_get(g, a) or 0) - (_get(g, b) or 0)
        elif c.how == "sum":
            out[c.name] = sum(v or [])
        elif c.how == "each":
            items = v.items() if isinstance(v, dict) else enumerate(v or [])
            out.update({c.name.format(k): n for k, n in items})
        elif c.how == "if-present" and v is not None:
            out[c.name] = v
    return out


COUNTERS_BEGIN = "<!-- counters table: generated by python -m trapline.platforms.model.plugin --markdown; do not edit -->"
COUNTERS_END = "<!-- end of the counters table -->"


def counters_markdown() -> str:
    """The docs' table of the model_* counters (docs/model.md, between COUNTERS_BEGIN and COUNTERS_END)."""
    how = {"value": "", "sum": "sum of ", "each": "one per entry of ", "if-present": "when present: ", "ops": "",
           "less": ""}
    lines = [COUNTERS_BEGIN, "", "| count | from a region's | meaning |", "|---|---|---|"]
    for c in COUNTERS:
        src = "the kernel's sample" if c.path == "-" else f"{how[c.how]}`{c.path}`"
        lines.append(f"| `{c.name.replace('{}', '<k>')}` | {src} | {c.doc} |")
    return "\n".join(lines + ["", COUNTERS_END]) + "\n"


# the generated block of docs/model.md: (begin marker, end marker, generator)
MARKS = {"counters": (COUNTERS_BEGIN, COUNTERS_END, counters_markdown)}
