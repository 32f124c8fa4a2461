"""gem5's statistics as trapline regions and gem5_* counters.

A kernel built in the gem5 flavour (build.build(arch, flavour="gem5"),
-DTL_GEM5) resets gem5's statistics where each measured repetition begins
(m5_reset_stats) and dumps them where it ends (m5_dump_stats), so gem5's
stats.txt holds one block per region (``---------- Begin Simulation
Statistics ----------`` ... ``End``), then one more that gem5 writes at exit
(from the last region's start to the exit). A program without markers has
only that last block.

``COUNTERS`` is the one table of the gem5_* counters: each one's name, the
gem5 statistics it sums (over cores and per-core caches) and what it means.
The names mirror the timing model's model_* counters (trapline/platforms/model/plugin.py
COUNTERS) where both simulators count the same thing, so the two sit side by
side by suffix: gem5_l1d_misses beside model_l1d_misses.

    blocks = parse(Path("m5out/stats.txt").read_text())
    regions = [region(b, clock_hz) for b in blocks[:-1]]     # the marked regions
    gem5_platform.engine(machine, "se").pair(kernel_output, regions, "loop-order variant=row")  # sample i <- region i

Stat names were read from a real stats.txt of gem5 v24.0.0.1 with
trapline_gem5's board (gem5_configs/trapline_gem5): per-core objects are
lists, so one core's L1D is ``board.cache_hierarchy.l1dcaches`` and two
cores' are ``l1dcaches0`` and ``l1dcaches1``. gem5 leaves a vector's
zero entries out of a dump, so a missing statistic of a present object is 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


BEGIN = "---------- Begin Simulation Statistics ----------"
END = "---------- End Simulation Statistics   ----------"
TICKS_PER_SECOND = 10 ** 12  # gem5's default: 1 tick = 1 ps ("Global frequency set at 1000000000000 ticks per second")

_CORE = r"board\.processor\.cores\d*\.core"
_H = r"board\.cache_hierarchy"


@dataclass(frozen=True)
class Counter:
    """One gem5_* count of a region."""
    name: str            # gem5_<what>; model_<what> (trapline/platforms/model/plugin.py) counts the same where it exists
    stats: tuple[str, ...]  # gem5 statistics (regular expressions, whole names), summed over every match
    doc: str
    needs: str = ""      # a statistic that must be in the dump for the counter to exist (else omitted)
    less: tuple[str, ...] = ()  # statistics subtracted from the sum (absent ones count 0)
    how: str = "sum"     # sum (of stats), ops (the kernel's), cycles (simTicks at the machine's clock),
    #                      trace (entries in gem5's Exec trace: TRACED), each (one count per key: the name has
    #                      "{}", its one statistic a group, e.g. a node's number)

    def source(self) -> str:
        """The statistics, as docs name them."""
        if self.how == "ops":
            return "the kernel's sample"
        if self.how == "cycles":
            return "simTicks / clock period"
        if self.how == "trace":
            return "Exec trace: entries at the handler's PC"
        def show(p: str) -> str:
            return p.replace("(\\d+)", "<n>").replace("\\d*", "*").replace("\\d+", "*").replace("?", "").replace("\\", "")
        return " + ".join(map(show, self.stats)) + "".join(f" - {show(p)}" for p in self.less)


def _cache(level: str, stat: str) -> tuple[str, ...]:
    return (rf"{_H}\.{level}\d*\.{stat}::total",)


def _prefetchers(level: str, stat: str) -> tuple[str, ...]:
    """The part of a cache's statistic that hardware prefetchers asked for, its own and the levels' above
    (their requests carry the prefetcher as requestor: ``...::cache_hierarchy.l1dcaches.prefetcher``),
    which the model counts apart from the demand accesses (hardware_prefetches.lookups_below)."""
    return (rf"{_H}\.{level}\d*\.{stat}::\S*prefetcher\S*",)


COUNTERS: tuple[Counter, ...] = (
    Counter("gem5_ops", (), "the sample's operations, as the kernel reported them", how="ops"),
    Counter("gem5_ticks", ("simTicks",), "simulated time of the region in ticks (1 tick = 1 ps)"),
    Counter("gem5_cycles", ("simTicks",), "simulated time of the region in cycles of the machine's clock "
            "(gem5's period: whole ticks, stats.period_ticks)", how="cycles"),
    Counter("gem5_instructions", (rf"{_CORE}\.commitStats0\.numInsts",),
            "instructions committed in the region, all cores (x86: macro-instructions, as the model counts)"),
    Counter("gem5_uops", (rf"{_CORE}\.commitStats0\.numOps",),
            "micro-ops committed, all cores (x86 splits an instruction into micro-ops; elsewhere = instructions)"),
    Counter("gem5_l1d_accesses", _cache("l1dcaches", "overallAccesses"),
            "L1D accesses, all cores (a line-crossing access is two)", needs=rf"{_H}\.l1dcaches\d*\.replacements"),
    Counter("gem5_l1d_misses", _cache("l1dcaches", "overallMshrMisses"),
            "lines filled into the L1D on demand (loads and stores), all cores, as the model counts its misses: "
            "gem5's MSHR misses less the upgrades (gem5_l1d_upgrades: a store to a line held without write "
            "permission, no data moved) and less the hardware prefetchers' (gem5_hw_prefetches_issued); an "
            "access to a line already being filled is not one (gem5_l1d_misses_in_flight)",
            less=_cache("l2caches", r"UpgradeReq\.accesses") + _prefetchers("l1dcaches", "overallMshrMisses"),
            needs=rf"{_H}\.l1dcaches\d*\.replacements"),
    Counter("gem5_l1d_misses_in_flight", _cache("l1dcaches", "overallMshrHits"),
            "L1D accesses that missed a line already being filled by an earlier miss (gem5's MSHR hits: O3 has "
            "many misses in flight, the timing CPU one); gem5's overallMisses counts them as misses",
            needs=rf"{_H}\.l1dcaches\d*\.replacements"),
    Counter("gem5_l1d_line_fetches", _cache("l1dcaches", "overallMshrMisses"),
            "L1D demand misses that allocated an MSHR (gem5's MSHR misses less the hardware prefetchers'): "
            "gem5_l1d_misses plus gem5_l1d_upgrades", less=_prefetchers("l1dcaches", "overallMshrMisses"),
            needs=rf"{_H}\.l1dcaches\d*\.replacements"),
    Counter("gem5_l1d_upgrades", _cache("l2caches", r"UpgradeReq\.accesses"),
            "stores to a line the L1D held without write permission (an UpgradeReq to the L2, no data moved): "
            "gem5 counts each as an L1D miss. A line the L2 fills after its own miss comes up shared when it "
            "was dirty below (Cache::satisfyRequest, src/mem/cache/cache.cc), so a load then a store to it "
            "costs a miss and an upgrade where the model has one miss", needs=rf"{_H}\.l2caches\d*\.replacements"),
    Counter("gem5_l1i_accesses", _cache("l1icaches", "overallAccesses"),
            "L1I accesses, all cores: what one is depends on the CPU model (O3 reads a fetch buffer of one line "
            "when fetch moves to another line, the timing CPU reads once per instruction)",
            needs=rf"{_H}\.l1icaches\d*\.replacements"),
    Counter("gem5_l1i_line_fetches", _cache("l1icaches", "overallAccesses"),
            "O3 only: L1I reads when fetch moves to a line other than the one in its fetch buffer (trapline's "
            "board sizes the buffer to the line), as the model counts its l1i.line_fetches",
            needs=rf"{_CORE}\.fetch\.cacheLines"),
    Counter("gem5_l1i_misses", _cache("l1icaches", "overallMshrMisses"),
            "lines filled into the L1I, all cores (gem5's MSHR misses: a fetch of a line already being filled "
            "is not one)", needs=rf"{_H}\.l1icaches\d*\.replacements"),
    Counter("gem5_l2_accesses", _cache("l2caches", "overallAccesses"),
            "L2 demand accesses (L1 misses reaching it; not writebacks, not hardware prefetches)",
            less=_prefetchers("l2caches", "overallAccesses"), needs=rf"{_H}\.l2caches\d*\.replacements"),
    Counter("gem5_l2_misses", _cache("l2caches", "overallMshrMisses"),
            "lines the L2 filled from below on demand (gem5's MSHR misses less the hardware prefetchers': a "
            "request for a line already being filled is not one)", less=_prefetchers("l2caches", "overallMshrMisses"),
            needs=rf"{_H}\.l2caches\d*\.replacements"),
    Counter("gem5_l3_accesses", _cache("l3cache", "overallAccesses"), "L3 demand accesses (not hardware prefetches)",
            less=_prefetchers("l3cache", "overallAccesses"),
            needs=rf"{_H}\.l3cache\.replacements"),
    Counter("gem5_l3_misses", _cache("l3cache", "overallMshrMisses"),
            "lines the L3 filled from memory on demand (gem5's MSHR misses less the hardware prefetchers')",
            less=_prefetchers("l3cache", "overallMshrMisses"), needs=rf"{_H}\.l3cache\.replacements"),
    Counter("gem5_dtlb_accesses", (rf"{_CORE}\.mmu\.dtb\.rdAccesses", rf"{_CORE}\.mmu\.dtb\.wrAccesses"),
            "DTLB lookups (x86; gem5's SPARC TLB keeps no statistics)", needs=rf"{_CORE}\.mmu\.dtb\.rdAccesses"),
    Counter("gem5_dtlb_misses", (rf"{_CORE}\.mmu\.dtb\.rdMisses", rf"{_CORE}\.mmu\.dtb\.wrMisses"),
            "DTLB lookups that found no entry (x86). In SE mode a miss is refilled from the process's page table "
            "by the simulator at no simulated cost (X86ISA::TLB::translate, src/arch/x86/tlb.cc): counted, not "
            "timed. A page not mapped yet is mapped by a fault at its first touch: the faulting access, its retry "
            "and, on O3, every later access to the page already issued each count (timing CPU 2 per new page, "
            "O3 29 in a memset)",
            needs=rf"{_CORE}\.mmu\.dtb\.rdAccesses"),
    Counter("gem5_itlb_misses", (rf"{_CORE}\.mmu\.itb\.rdMisses", rf"{_CORE}\.mmu\.itb\.wrMisses"),
            "ITLB misses (x86; a fetch is counted as a write: its mode is Execute, not Read), refilled untimed "
            "as the DTLB's", needs=rf"{_CORE}\.mmu\.itb\.rdAccesses"),
    Counter("gem5_hw_prefetches_issued", _cache(r"\w+", r"HardPFReq\.mshrMisses"),
            "lines the hardware prefetchers of every cache fetched (gem5's HardPFReq MSHR misses: a prefetch the "
            "prefetcher issued, pfIssued, is dropped when its line is in the cache, an MSHR or the write buffer)",
            needs=rf"{_H}\.\w+\d*\.prefetcher\.pfIssued"),
    Counter("gem5_hw_prefetches_useful", (rf"{_H}\.\w+\d*\.prefetcher(?:\.prefetchers\d*)?\.pfUseful",),
            "hardware-prefetched lines whose first demand access found them filled (gem5's pfUseful: a demand "
            "access that finds a prefetched block in the cache, less pfUsefulButMiss: a store to a block "
            "prefetched without write permission is counted there and again when it retries; one that meets the "
            "prefetch in its MSHR is not one; a MultiPrefetcher's prefetchers count them, its own stays 0)",
            less=(rf"{_H}\.\w+\d*\.prefetcher(?:\.prefetchers\d*)?\.pfUsefulButMiss",),
            needs=rf"{_H}\.\w+\d*\.prefetcher\.pfIssued"),
    Counter("gem5_misses_overlapped", (rf"{_H}\.miss_overlaps\d*\.overlapped",),
            "L1D demand misses made while another was still waiting for its line (trapline's change "
            "overlap-stats: MissOverlap on each core's L1D)", needs=rf"{_H}\.miss_overlaps\d*\.primaryMisses"),
    Counter("gem5_locked_lines", _cache("l1dcaches", r"LockedRMWReadReq\.accesses"),
            "cache lines locked by locked read-modify-writes at the L1D (x86: one per locked RMW, two for one "
            "that straddles a line: gem5 locks each line separately)", needs=rf"{_H}\.l1dcaches\d*\.replacements"),
    Counter("gem5_memory_reads", (r"board\.memory\.modules?\d*\.numReads::total",), "reads that reached memory",
            needs=r"board\.memory\.modules?\d*\.power_state\.pwrStateResidencyTicks::UNDEFINED"),
    Counter("gem5_memory_writes", (r"board\.memory\.modules?\d*\.numWrites::total",), "writes that reached memory",
            needs=r"board\.memory\.modules?\d*\.power_state\.pwrStateResidencyTicks::UNDEFINED"),
    Counter("gem5_memory_reads_node{}", (r"board\.memory\.modules(\d+)\.numReads::total",),
            "reads that reached memory, by node (trapline's gem5, change numa-first-touch: one memory per node)",
            needs=r"board\.memory\.numa_delays\d+\.pages", how="each"),
    Counter("gem5_numa_pages_node{}", (r"board\.memory\.numa_delays(\d+)\.pages",),
            "distinct pages of a node's memory that requests reached, by node, counted at its memory "
            "(trapline's gem5, change numa-first-touch)", needs=r"board\.memory\.numa_delays\d+\.pages", how="each"),
    Counter("gem5_numa_remote_requests", (r"board\.memory\.numa_delays\d+\.remote",),
            "requests that reached a node's memory from a core on another node, each delayed by the machine's "
            "remote latency (trapline's gem5, change numa-first-touch)", needs=r"board\.memory\.numa_delays\d+\.pages"),
    Counter("gem5_bus_locks", (rf"{_H}\.bus_lock\.locks",),
            "bus locks taken: each holds every core's data requests for the machine's atomics.split_lock_cost "
            "(trapline's gem5, change bus-lock)", needs=rf"{_H}\.bus_lock\.locks"),
    Counter("gem5_locked_split", (rf"{_H}\.bus_lock_ports\d*\.splits",),
            "locked read-modify-writes that straddle two cache lines, found at the L1D as a second locked "
            "read before the first one's write (trapline's gem5, change bus-lock)",
            needs=rf"{_H}\.bus_lock_ports\d*\.splits"),
    Counter("gem5_prefetch_traps", (rf"{_CORE}\.isa\d*\.prefetch\.strongDropped",),
            "SPARC: strong prefetches of unmapped pages, each dropped by the SE kernel after the machine's "
            "prefetch.trap_cost (trapline's gem5, change sparc-prefetch)",
            needs=rf"{_CORE}\.isa\d*\.prefetch\.strongDropped"),
    Counter("gem5_prefetch_tlb_fills", (rf"{_CORE}\.isa\d*\.prefetch\.strongTlbFills",),
            "SPARC: strong prefetches that missed the TLB and filled it (trapline's gem5, change sparc-prefetch)",
            needs=rf"{_CORE}\.isa\d*\.prefetch\.strongDropped"),
    Counter("gem5_traps_unaligned", (rf"{_CORE}\.isa\d*\.unaligned\.traps",),
            "SPARC: misaligned integer loads and stores, each a mem_address_not_aligned trap completed by the SE "
            "kernel byte by byte after the machine's traps.cost (trapline's gem5, change sparc-unaligned-trap)",
            needs=rf"{_CORE}\.isa\d*\.unaligned\.traps"),
    Counter("gem5_trap_entries_spill", (), "SPARC: register-window spill traps, counted as entries into the spill "
            "handler gem5's SE mode runs for them (its first instruction, at spillStart, in gem5's Exec trace of "
            "privileged instructions: trapline.platforms.gem5.run; gem5 keeps no trap statistic outside full-system mode)",
            how="trace"),
    Counter("gem5_trap_entries_fill", (), "SPARC: register-window fill traps, entries into gem5's SE fill handler "
            "(at fillStart), counted as the spills", how="trace"),
)
BY_NAME = {c.name: c for c in COUNTERS}

# The counters read from gem5's Exec trace (how="trace"), by ISA: the PC of an SE trap
# handler's first instruction, its mnemonic, and the counter of its entries. gem5
# v24.0.0.1 writes SPARC's window handlers into the process above its initial stack:
# fillStart = the stack base 0x80000000000 (Sparc64Process, src/arch/sparc/process.hh:120),
# spillStart right after the fill handler's 32 instruction slots (src/arch/sparc/process.cc:355-356,
# src/arch/sparc/handlers.hh:42), each beginning with `wr ..., %asi`; SpillNNormal::invoke and
# FillNNormal::invoke jump there in SE mode (src/arch/sparc/faults.cc:764, :783). The handlers run
# privileged (doNormalFault sets PSTATE.priv) and are the only privileged code of an SE process
# (a system call's `ta` is answered in the simulator), so gem5 traces them alone with
# --debug-flags=ExecEnable,ExecKernel (src/cpu/exetrace.cc:65-68).
SPARC_FILL_START = 0x80000000000
SPARC_SPILL_START = SPARC_FILL_START + 4 * 32
TRACED: dict[str, dict[int, tuple[str, str]]] = {
    "SPARC": {SPARC_SPILL_START: ("wr", "gem5_trap_entries_spill"),
              SPARC_FILL_START: ("wr", "gem5_trap_entries_fill")},
}
TRACE_FLAGS = "ExecEnable,ExecKernel"
_TRACE_LINE = re.compile(r"^\s*(\d+): \S+: (0x[0-9a-f]+)(?:\.\d+)?\s*(?:@\S+)?\s*:\s*(\S+)")


def trace_hits(lines, pcs: dict[int, tuple[str, str]]) -> tuple[dict[str, list[int]], list[str]]:
    """From gem5's Exec trace (lines of `TICK: CPU: PC : disassembly`): the ticks at which
    each counter's handler was entered ({counter: [tick, ...]}, in order), and the
    problems: a traced PC whose instruction is not the handler's first (gem5 put its
    handlers elsewhere: the counts would be wrong)."""
    hits: dict[str, list[int]] = {name: [] for _, name in pcs.values()}
    problems: list[str] = []
    for line in lines:
        m = _TRACE_LINE.match(line)
        if not m:
            continue
        want = pcs.get(int(m.group(2), 16))
        if want is None:
            continue
        if m.group(3) != want[0]:
            if len(problems) < 3:
                problems.append(f"the instruction at {m.group(2)} is '{m.group(3)}', not the {want[1]} handler's "
                                f"'{want[0]}'")
            continue
        hits[want[1]].append(int(m.group(1)))
    return hits, problems


def add_trace_counts(regions_: list[dict], hits: dict[str, list[int]]) -> None:
    """Give each region the number of each counter's hits between its start and its end
    tick (a region's trace counts, beside its statistics)."""
    import bisect
    for r in regions_:
        start, end = r["end_tick"] - r["ticks"], r["end_tick"]
        for name, ticks in hits.items():
            r["counts"][name] = bisect.bisect_right(ticks, end) - bisect.bisect_left(ticks, start)


class StatsError(ValueError):
    """A stats.txt that does not parse (names the line)."""


def _number(text: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        return float(text)  # nan, inf and decimals; ValueError for anything else


def parse(text: str) -> list[dict[str, float | int]]:
    """The dump blocks of a stats.txt, in order: each {statistic name: value}."""
    blocks: list[dict] = []
    cur: dict | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(BEGIN):
            cur = {}
            continue
        if line.startswith("---------- End"):
            if cur is not None:
                blocks.append(cur)
            cur = None
            continue
        if cur is None or not line.strip():
            continue
        parts = line.split()
        if len(parts) < 2:
            raise StatsError(f"stats.txt line {n}: no value: {line.strip()[:100]}")
        try:
            cur[parts[0]] = _number(parts[1])
        except ValueError:
            raise StatsError(f"stats.txt line {n}: '{parts[1]}' is not a number: {line.strip()[:100]}") from None
    return blocks


def _sum(block: dict, patterns: tuple[str, ...]) -> int | float:
    total = 0
    for p in patterns:
        rx = re.compile(p)
        total += sum(v for k, v in block.items() if rx.fullmatch(k) and not math.isnan(v))
    return total


def _present(block: dict, pattern: str) -> bool:
    rx = re.compile(pattern)
    return any(rx.fullmatch(k) for k in block)


def period_ticks(clock_hz: float) -> int:
    """The clock period gem5 runs at, in whole ticks: m5.ticks.fromSeconds rounds half
    up (src/python/m5/ticks.py), so 2.6 GHz runs at 385 ps (2.597 GHz, 0.1% slower)."""
    return int(math.floor(TICKS_PER_SECOND / clock_hz + 0.5))


def region(block: dict, clock_hz: float) -> dict:
    """One dump block as a region: {"ticks", "cycles", "seconds", "counts": {gem5_*: n}}
    (gem5_ops is added by region_counts, which knows the sample). Cycles are the
    region's ticks over gem5's clock period (period_ticks)."""
    ticks = int(block.get("simTicks", 0))
    period = period_ticks(clock_hz)
    counts: dict[str, int] = {}
    for c in COUNTERS:
        if c.how in ("ops", "trace") or (c.needs and not _present(block, c.needs)):
            continue
        if c.how == "cycles":
            counts[c.name] = round(ticks / period)
        elif c.how == "each":
            rx = re.compile(c.stats[0])
            for k, v in block.items():
                m = rx.fullmatch(k)
                if m and not math.isnan(v):
                    counts[c.name.format(m.group(1))] = int(round(v))
        else:
            counts[c.name] = int(round(_sum(block, c.stats) - _sum(block, c.less)))
    # simInsts is never reset: the instructions since the program started
    return {"ticks": ticks, "cycles": counts["gem5_cycles"], "seconds": ticks / TICKS_PER_SECOND,
            "end_tick": int(block.get("finalTick", 0)),
            "instructions_since_start": int(block.get("simInsts", 0)), "counts": counts}


def regions(text: str, clock_hz: float) -> tuple[list[dict], dict | None]:
    """(the marked regions, the exit's block as a region) of a finished run's stats.txt:
    every block but the last is a region; the last is what gem5 dumps at exit."""
    blocks = parse(text)
    if not blocks:
        return [], None
    return [region(b, clock_hz) for b in blocks[:-1]], region(blocks[-1], clock_hz)


def region_counts(g: dict, ops: int) -> dict[str, int]:
    """A region's gem5_* counters for a sample of `ops` operations."""
    return {"gem5_ops": ops, **g["counts"]}


def markdown() -> str:
    """The docs' table of the gem5_* counters (docs/gem5.md)."""
    lines = ["| count | gem5 statistics (summed) | meaning | the model's |", "|---|---|---|---|"]
    from trapline.platforms.model.counters import COUNTERS as MODEL
    model = [re.compile(re.escape(c.name).replace(r"\{\}", r"\w+")) for c in MODEL]  # model_trap_entries_{}: per kind
    for c in COUNTERS:
        twin = "model_" + c.name[len("gem5_"):]
        has = any(rx.fullmatch(twin) for rx in model)
        lines.append(f"| `{c.name}` | `{c.source()}` | {c.doc} | {f'`{twin}`' if has else '-'} |")
    return "\n".join(lines) + "\n"
