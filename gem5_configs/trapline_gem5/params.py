"""Gem5Params: a trapline machine description as the numbers gem5 needs.

Pure Python: no gem5, no trapline import. ``from_machine`` takes the typed
machine that trapline writes as JSON (``python -m trapline.platforms.gem5 --machine M``,
``./run.sh gem5``): every field with its text as written and, for a number, its
value already in its base unit (bytes, Hz, cycles at the machine's clock), and
gem5's ISA. No unit is parsed here; times become whole cycles (rounded half up,
as trapline writes them) and sizes gem5 strings. It returns a ``Gem5Params``:

    >>> p = from_machine(json.load(open("x86.json")))   # ./run.sh gem5 --machine x86-2012-server -o x86.json
    >>> p.l1d.size, p.l1d.assoc, p.l1d.latency_cycles
    ('32KiB', 8, 4)
    >>> p.clock, p.isa, p.memory.latency_cycles, p.memory.path_cycles, p.memory.latency
    ('2.6GHz', 'X86', 234, 24, '80769ps')

Every field of the machine either sets a gem5 parameter (``mapped``: field ->
the gem5 parameter) or is recorded in ``notes`` (field, value, what gem5 does
instead). A field is never dropped silently: whatever this module does not
know is noted as unused (``_cover``).

What gem5 can take depends on the gem5 that runs: trapline's own build has
changes (gem5_configs/changes/<name>) that stock gem5 lacks, and ``changes``
names those the running gem5 has (run_se.py reads them from the binary,
m5.trapline_build; trapline from the binary's facts). With numa-first-touch
the machine's NUMA nodes and latencies are mapped (one memory per node, pages
by first touch, a remote request delayed); with bus-lock its
atomics.split_lock_cost (a split locked RMW holds every core's traffic); with
sparc-prefetch a SPARC machine's prefetch semantics and trap cost.

Sizes are written with binary prefixes ("32KiB", "2MiB"): gem5 reads "32kB" as
32768 bytes too, but since v24 its ``m5.util.convert.toMemorySize`` warns that
a base-10 prefix "will be cast to base 2"; "KiB" means the same in every
version and warns in none.

Latencies. A machine gives load-to-use hit latencies. In gem5's classic cache
(src/mem/cache/base.cc, BaseCache::calculateAccessLatency and the timing
paths) a hit costs max(tag_latency, data_latency); a miss costs the
tag_latency on the way down and the response_latency on the way back, and
each crossbar on the path adds frontend + forward latency to a request and
response latency + one cycle per ``width`` bytes of the line to a response
(src/mem/XBar.py). So each level gets tag_latency = response_latency = 1 and
a data_latency that makes the load-to-use of an isolated load equal the
machine's figure; the memory (SimpleMemory.latency) gets what remains of
memory.latency after the whole path. The CPU model adds its own pipeline
cycles on top.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, List, Optional

FORMAT = 1

MACHINE_KIND = "trapline-machine"  # the "kind" of the typed machine JSON trapline writes

# O3's fetch buffer, bytes (BaseO3CPU.fetchBufferSize's default, src/cpu/o3/BaseO3CPU.py): the
# board makes it the line on a shorter line (board.py); trapline reads O3's fetches per line only
# where the line is no longer (trapline/platforms/gem5/engine.py)
O3_FETCH_BUFFER = 64

# Page sizes fixed in gem5: X86ISA/ArmISA PageShift = 12, SparcISA PageShift = 13
# (src/arch/x86/page_size.hh, src/arch/arm/page_size.hh, src/arch/sparc/page_size.hh).
PAGE_BYTES = {"X86": 4096, "ARM": 4096, "SPARC": 8192}
PAGE_SOURCE = {"X86": "src/arch/x86/page_size.hh", "ARM": "src/arch/arm/page_size.hh",
               "SPARC": "src/arch/sparc/page_size.hh"}

# The TLB SimObjects whose `size` is set (mmu.itb, mmu.dtb).
TLB_SOURCE = {"X86": "X86TLB.size, src/arch/x86/X86TLB.py", "SPARC": "SparcTLB.size, src/arch/sparc/SparcTLB.py",
              "ARM": "ArmTLB.size, src/arch/arm/ArmTLB.py"}

# SparcISA::NWindows = 8, a constant (src/arch/sparc/sparc_traits.hh).
SPARC_NWINDOWS = 8

# gem5's SPARC TLB is the T1's: SparcISA::TLB::TLB stops with "SPARC T1 TLB registers don't
# support more than 64 TLB entries" for a larger size (src/arch/sparc/tlb.cc).
SPARC_TLB_MAX = 64

# Fixed per-cache choices (src/mem/cache/Cache.py has no defaults for these).
TAG_LATENCY = 1          # cycles; a miss pays this before going down
RESPONSE_LATENCY = 1     # cycles; a fill pays this on the way back up
L1_MSHRS, L1_TGTS = 16, 20      # the stdlib's L1DCache defaults (caches/l1dcache.py)
LOWER_MSHRS, LOWER_TGTS = 20, 12  # the stdlib's L2Cache defaults (caches/l2cache.py)
WRITE_BUFFERS = 8        # BaseCache.write_buffers default (src/mem/cache/Cache.py)

# Page-walk caches for ISAs with table walkers, as in the stdlib's classic hierarchies.
WALK_CACHE_SIZE = "8KiB"
WALK_CACHE_BYTES = 8192

# SnoopFilter.max_capacity defaults to "8MiB" (src/mem/XBar.py), and a filter that
# tracks more lines than that panics ("snoop filter exceeded capacity",
# src/mem/snoop_filter.cc): a bus below a 20 MB L3 needs a larger one.
SNOOP_FILTER_DEFAULT_BYTES = 8 * 1024 ** 2

# Memory defaults that the machine descriptions do not give (SE mode needs a size).
MEM_SIZE = "512MiB"
MEM_BANDWIDTH = "12.8GiB/s"   # SimpleMemory's default bandwidth, 12.8GB/s (src/mem/SimpleMemory.py), base 2

LEVELS = ("l1i", "l1d", "l2", "l3")

# gem5's prefetchers for a machine's kinds (src/mem/cache/prefetch/Prefetcher.py); the stream and
# adjacent-line prefetchers are trapline's gem5 change `prefetchers` (the timing model's algorithms)
PREFETCHER_CLASSES = {"next-line": "TaggedPrefetcher", "ip-stride": "StridePrefetcher",
                      "stream": "StreamPrefetcher", "adjacent-line": "AdjacentLinePrefetcher"}
PREFETCHER_CHANGE_CLASSES = ("StreamPrefetcher", "AdjacentLinePrefetcher")

# trapline's gem5 changes this mapping uses (gem5_configs/changes/<name>/README.md)
PREFETCHERS_CHANGE = "prefetchers"
OVERLAP_STATS_CHANGE = "overlap-stats"
NUMA_CHANGE = "numa-first-touch"
BUS_LOCK_CHANGE = "bus-lock"
SPARC_PREFETCH_CHANGE = "sparc-prefetch"
UNALIGNED_TRAP_CHANGE = "sparc-unaligned-trap"

_GEM5_FREQ = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:GHz|MHz|kHz|Hz)$")


class ParamsError(ValueError):
    """A machine description this module cannot convert (names the field)."""


# ---------------------------------------------------------------- numbers as gem5 writes them

def round_half_up(x: float) -> int:
    """2.5 -> 3, as trapline writes whole cycles."""
    return int(math.floor(x + 0.5))


def gem5_size(b: int) -> str:
    """32768 -> '32KiB' (a gem5 MemorySize string, binary prefix)."""
    for unit, mult in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if b >= mult and b % mult == 0:
            return f"{b // mult}{unit}"
    return f"{b}B"


def gem5_clock(raw: Any, hz: float) -> str:
    """The machine's clock as gem5 reads it ('1.5GHz', '700MHz')."""
    if isinstance(raw, str) and _GEM5_FREQ.match(raw.strip()):
        return raw.strip()
    return f"{int(hz)}Hz" if hz == int(hz) else f"{hz!r}Hz"


def cycles_to_ps(cycles: float, hz: float) -> int:
    return round_half_up(cycles / hz * 1e12)


# ---------------------------------------------------------------- the machine's fields

def _fields(machine: Any) -> Dict[str, dict]:
    if isinstance(machine, dict) and machine.get("kind") == MACHINE_KIND:
        if machine.get("format") != FORMAT:
            raise ParamsError(f"machine JSON format {machine.get('format')!r} is not {FORMAT}; "
                              "re-export with python -m trapline.platforms.gem5")
        return machine["fields"]
    raise ParamsError(f"needs the typed machine JSON written by python -m trapline.platforms.gem5 (./run.sh gem5), "
                      f"not {type(machine).__name__}")


def leaves(machine: dict) -> Dict[str, Any]:
    """Every field of a machine that carries information, by dotted path, as written:
    numbers, enums and booleans; a list (numa.latency_ns) is one field. trapline
    leaves out provenance (source, claim, why, note, from, basis) and the
    top-level name, description and claims, which gem5 could not take."""
    return {path: f["text"] for path, f in _fields(machine).items()}


# ---------------------------------------------------------------- the parameters

@dataclass
class PrefetcherParams:
    """One hardware prefetcher of a cache: the machine's kind (caches.<l>.prefetch.<kind>) as the
    gem5 class that runs it (PREFETCHER_CLASSES) and its parameters. Trained as the timing model's:
    on the level's misses and demand hits on lines it prefetched (gem5's default), the stream
    prefetcher on every access (prefetch_on_access), the adjacent-line one on misses (on_miss)."""
    kind: str
    gem5_class: str
    degree: int
    distance: int = 0
    streams: int = 0
    page_bounded: bool = True
    on_access: bool = False
    on_miss: bool = False
    on_write: bool = True       # False below the L1s: the L1s' writebacks are not accesses the model's hear
    page_bytes: int = 4096      # the ISA's page (BasePrefetcher.page_bytes)


@dataclass
class CacheLevel:
    """One classic cache (a gem5 ``Cache``, src/mem/cache/Cache.py).

    ``size`` is a gem5 MemorySize string ("32KiB"); ``latency_cycles`` is the
    machine's load-to-use hit latency in whole cycles; ``tag_latency``,
    ``data_latency`` and ``response_latency`` are the gem5 Cache parameters
    chosen so that an isolated load that hits here costs ``latency_cycles``."""
    level: str
    size: str
    size_bytes: int
    assoc: int
    line_bytes: int
    latency_cycles: int
    tag_latency: int
    data_latency: int
    response_latency: int
    mshrs: int
    tgts_per_mshr: int
    write_buffers: int
    replacement_policy: str
    write_policy: str
    clusivity: str
    writeback_clean: bool
    prefetchers: List[PrefetcherParams] = field(default_factory=list)
    bus: Optional["XBarParams"] = None  # below the L1s: the crossbar above this level, its fill path to them


@dataclass
class XBarParams:
    """A crossbar (src/mem/XBar.py): ``kind`` is the gem5 class (L2XBar, SystemXBar)."""
    kind: str
    width: int
    frontend_latency: int
    forward_latency: int
    response_latency: int

    def request_cycles(self) -> int:
        return self.frontend_latency + self.forward_latency

    def response_cycles(self, line: int) -> int:
        return self.response_latency + -(-line // self.width)


@dataclass
class MemoryParams:
    """A SimpleMemory (src/mem/SimpleMemory.py) behind the caches.

    ``latency_cycles`` is the machine's load-to-use DRAM latency;
    ``latency`` ("28846ps") is SimpleMemory.latency, the part of it left after
    the cache path (``path_cycles``)."""
    latency_cycles: int
    path_cycles: int
    module_latency_cycles: int
    latency: str
    latency_var: str
    bandwidth: str
    size: str


@dataclass
class TLBParams:
    """TLB sizes for the CPU's MMU: ``itb_size``/``dtb_size`` set mmu.itb.size and
    mmu.dtb.size (X86TLB, SparcTLB, ArmTLB all take ``size``); ``l2_size`` sets
    ArmMMU.l2_shared.size (ARM's main TLB), None elsewhere."""
    page_bytes: int
    itb_size: int
    dtb_size: int
    l2_size: Optional[int] = None


@dataclass
class NUMAParams:
    """The machine's NUMA nodes. ``applied`` (trapline's gem5 change numa-first-touch):
    one memory per node on its own address range and memory pool, a page from the
    pool of the node whose core touched it first, and ``extra_ps[i][n]``, the delay
    a request from a core on node i pays at node n's memory on top of the local
    latency (memory.latency). Not applied (stock gem5): recorded only (see notes)."""
    nodes: int
    latency_cycles: List[List[int]]
    interleave: bool
    interleave_granularity_bytes: Optional[int]
    applied: bool = False
    extra_ps: List[List[int]] = field(default_factory=list)

    def node_of_core(self, cores: int) -> List[int]:
        """The node of each core: the cores split into ``nodes`` equal blocks in order
        (core i on node i * nodes // cores); with fewer cores than nodes, core i on node i."""
        if cores <= self.nodes:
            return list(range(cores))
        return [i * self.nodes // cores for i in range(cores)]


@dataclass
class BusLockParams:
    """trapline's gem5 change bus-lock: how long the second half of a split locked
    read-modify-write holds every core's data requests (BusLock.hold, "420000ps")."""
    hold: str
    hold_cycles: float


@dataclass
class PrefetchParams:
    """trapline's gem5 change sparc-prefetch (SparcISA parameters): whether the strong
    prefetch codes fill the TLB (strong_prefetch), and what the SE kernel's drop of a
    strong prefetch to an unmapped page costs (strong_prefetch_trap_latency, "2636870ps")."""
    strong: bool
    trap_latency: str


@dataclass
class CoreParams:
    """The core as gem5's CPU model takes it. O3 (gem5.cpu o3): the window, numROBEntries,
    LQEntries and SQEntries (src/cpu/o3/BaseO3CPU.py); MinorCPU: its store buffer,
    executeLSQStoreBufferSize (src/cpu/minor/BaseMinorCPU.py). None: the model's default."""
    kind: str
    rob: Optional[int] = None
    lq: Optional[int] = None
    sq: Optional[int] = None
    minor_store_buffer: Optional[int] = None


@dataclass
class UnalignedTrapParams:
    """trapline's gem5 change sparc-unaligned-trap (a SparcISA parameter): what the SE kernel's
    completion of a misaligned integer load or store costs (unaligned_trap_latency,
    "2866000ps", from traps.cost)."""
    latency: str


@dataclass
class Note:
    """A machine field gem5 cannot express as written, and what gem5 does instead."""
    field: str
    value: Any
    text: str


@dataclass
class Gem5Params:
    """Everything a gem5 stdlib script needs to build one trapline machine.

    Example (x86-2012-server): clock "2.6GHz", isa "X86", cache_line_size 64,
    l1d = CacheLevel(size="32KiB", assoc=8, latency_cycles=4, ...), memory
    latency "80769ps" (90 ns = 234 cycles of load-to-use, minus the 24-cycle
    path through the caches and buses)."""
    machine: str
    sets: List[str]
    arch: str
    isa: str
    clock: str
    clock_hz: float
    cache_line_size: int
    l1i: CacheLevel
    l1d: CacheLevel
    l2: Optional[CacheLevel]
    l3: Optional[CacheLevel]
    cache_bus: XBarParams
    membus: XBarParams
    memory: MemoryParams
    tlb: TLBParams
    numa: Optional[NUMAParams]
    mapped: Dict[str, str] = field(default_factory=dict)
    notes: List[Note] = field(default_factory=list)
    format: int = FORMAT
    changes: List[str] = field(default_factory=list)      # trapline's gem5 changes the mapping used
    bus_lock: Optional[BusLockParams] = None
    prefetch: Optional[PrefetchParams] = None
    core: Optional[CoreParams] = None
    unaligned_trap: Optional[UnalignedTrapParams] = None

    def caches(self) -> List[CacheLevel]:
        """The levels present, top down: L1I, L1D, then L2 and L3 if any."""
        return [c for c in (self.l1i, self.l1d, self.l2, self.l3) if c is not None]

    def notes_for(self, field_path: str) -> List[Note]:
        return [n for n in self.notes if n.field == field_path]

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, d: dict) -> "Gem5Params":
        if d.get("format") != FORMAT:
            raise ParamsError(f"format {d.get('format')!r} is not {FORMAT}; re-export with python -m trapline.platforms.gem5")

        def cache(c):
            if c is None:
                return None
            return CacheLevel(**{**c, "prefetchers": [PrefetcherParams(**p) for p in c.get("prefetchers", [])],
                                 "bus": XBarParams(**c["bus"]) if c.get("bus") is not None else None})
        return cls(
            machine=d["machine"], sets=list(d["sets"]), arch=d["arch"], isa=d["isa"], clock=d["clock"],
            clock_hz=float(d["clock_hz"]), cache_line_size=int(d["cache_line_size"]),
            l1i=cache(d["l1i"]), l1d=cache(d["l1d"]), l2=cache(d["l2"]), l3=cache(d["l3"]),
            cache_bus=XBarParams(**d["cache_bus"]), membus=XBarParams(**d["membus"]),
            memory=MemoryParams(**d["memory"]), tlb=TLBParams(**d["tlb"]),
            numa=NUMAParams(**d["numa"]) if d.get("numa") is not None else None,
            mapped=dict(d["mapped"]), notes=[Note(**n) for n in d["notes"]], format=d["format"],
            changes=list(d.get("changes", [])),
            bus_lock=BusLockParams(**d["bus_lock"]) if d.get("bus_lock") is not None else None,
            prefetch=PrefetchParams(**d["prefetch"]) if d.get("prefetch") is not None else None,
            core=CoreParams(**d["core"]) if d.get("core") is not None else None,
            unaligned_trap=UnalignedTrapParams(**d["unaligned_trap"]) if d.get("unaligned_trap") is not None
            else None)

    @classmethod
    def from_json(cls, text: str) -> "Gem5Params":
        return cls.from_dict(json.loads(text))


# ---------------------------------------------------------------- building

# The crossbars: the stdlib's L2XBar between cache levels and a SystemXBar of
# width 64 as the memory bus (as in private_l1_private_l2_cache_hierarchy.py);
# latencies are XBar.py's class values, written out so the accounting below
# and the hierarchy use the same numbers.
CACHE_BUS = XBarParams(kind="L2XBar", width=32, frontend_latency=1, forward_latency=0, response_latency=1)
MEMBUS = XBarParams(kind="SystemXBar", width=64, frontend_latency=3, forward_latency=4, response_latency=2)


def shared_level(params: Gem5Params) -> Optional[str]:
    """The level every core shares: the last one (the L3, else the L2); the levels
    above it are private to each core. None without an L2 (the L1s sit on the
    memory bus). The machine files say which levels are shared only in prose
    (x86 L3s, the T1's L2); the IV+'s L2, shared there, is private here."""
    return "l3" if params.l3 is not None else "l2" if params.l2 is not None else None


def snoop_filter_capacity(params: Gem5Params, bus: str, cores: int = 1) -> str:
    """SnoopFilter.max_capacity for a bus ("l2bus", "l3bus" or "membus"): at least
    the bytes cached above it (each core's L1s and page-walk caches, the L2s above
    that bus), rounded up to a power of two, and never below gem5's 8MiB default.
    A private L2 bus (below a core's L1s when an L3 is shared) sees one core's."""
    if bus not in ("l2bus", "l3bus", "membus"):
        raise ParamsError(f"bus '{bus}': valid choices: l2bus, l3bus, membus")
    l1s = params.l1i.size_bytes + params.l1d.size_bytes + 2 * WALK_CACHE_BYTES
    private_l2 = shared_level(params) == "l3"
    above = l1s * (1 if bus == "l2bus" and private_l2 else cores)
    if bus in ("l3bus", "membus") and params.l2 is not None:
        above += params.l2.size_bytes * (cores if private_l2 else 1)
    if bus == "membus" and params.l3 is not None:
        above += params.l3.size_bytes
    return gem5_size(max(SNOOP_FILTER_DEFAULT_BYTES, 1 << (above - 1).bit_length()))


def from_machine(machine: Any, mem_size: str = MEM_SIZE, changes=()) -> Gem5Params:
    """The typed machine JSON (python -m trapline.platforms.gem5) -> Gem5Params, for a gem5
    with trapline's `changes` (names of gem5_configs/changes/; none: a stock gem5)."""
    changes = sorted(set(changes))
    fields = _fields(machine)
    data = machine
    sets = [str(s) for s in machine.get("sets", [])]
    mapped: Dict[str, str] = {}
    notes: List[Note] = []

    def _get(path: str) -> Any:
        f = fields.get(path)
        return None if f is None else f["text"]

    def num(path: str) -> Any:
        """A number in its base unit (bytes, Hz, cycles), as trapline typed it."""
        f = fields.get(path)
        if f is None or "value" not in f:
            raise ParamsError(f"{path}: needs a number in the machine JSON; re-export with python -m trapline.platforms.gem5")
        return f["value"]

    def note(path: str, text: str, value: Any = None) -> None:
        notes.append(Note(field=path, value=_get(path) if value is None else value, text=text))

    arch, isa = data["arch"], data["isa"]
    if isa not in PAGE_BYTES:
        raise ParamsError(f"isa: '{isa}' is not a gem5 ISA here; valid choices: {', '.join(PAGE_BYTES)}")
    mapped["arch"] = f"SimpleProcessor(isa=ISA.{isa}) (gem5.isas.ISA)"
    hz = float(num("clock"))
    clock = gem5_clock(_get("clock"), hz)
    mapped["clock"] = f"SimpleBoard(clk_freq=\"{clock}\"): the board's clock domain, shared by the CPU and caches"

    def cyc(path: str) -> int:
        return round_half_up(num(path))

    def size_bytes(path: str) -> int:
        return int(num(path))

    def group(prefix: str) -> bool:
        return any(p.startswith(prefix + ".") for p in fields)

    note("cpi", "gem5 has no base-CPI parameter: the CPU model (run_se.py --cpu timing|minor|o3) sets the cycles "
                "per instruction. TimingSimpleCPU is not pipelined (each instruction waits for its own fetch "
                "through the L1I and for its data access), MinorCPU is an in-order pipeline, O3 out of order")

    if "gem5.cpu" in fields:
        mapped["gem5.cpu"] = ("the CPU model: trapline's gem5 platform passes it as run_se.py --cpu "
                              "(timing: TimingSimpleCPU, minor: MinorCPU, o3: O3CPU; CPUTypes)")
    if "gem5.note" in fields:
        mapped["gem5.note"] = "why this CPU model (text for the reader)"

    # ---- caches
    present = [lv for lv in LEVELS if group(f"caches.{lv}")]
    line = size_bytes("caches.l1d.line")
    mapped["caches.l1d.line"] = f"System.cache_line_size = {line} (one line size for every cache, src/sim/System.py)"
    levels: Dict[str, CacheLevel] = {}
    for lv in present:
        at = f"caches.{lv}"
        sz = size_bytes(f"{at}.size")
        own_line = size_bytes(f"{at}.line")
        assoc_raw = _get(f"{at}.assoc")
        # fully associative: one set, at the line size gem5 runs with
        assoc = sz // line if assoc_raw == "full" else int(assoc_raw)
        lower = [x for x in present if LEVELS.index(x) > LEVELS.index(lv) and x not in ("l1i", "l1d")]
        below = lower[0] if lower else None
        below_excl = below is not None and _get(f"caches.{below}.inclusion") == "exclusive"
        inclusion = _get(f"{at}.inclusion")
        levels[lv] = CacheLevel(
            level=lv, size=gem5_size(sz), size_bytes=sz, assoc=assoc, line_bytes=own_line,
            latency_cycles=cyc(f"{at}.latency"), tag_latency=TAG_LATENCY, data_latency=0,
            response_latency=RESPONSE_LATENCY,
            mshrs=int(num(f"{at}.mshrs")) if f"{at}.mshrs" in fields else L1_MSHRS if lv in ("l1i", "l1d") else LOWER_MSHRS,
            tgts_per_mshr=L1_TGTS if lv in ("l1i", "l1d") else LOWER_TGTS,
            write_buffers=WRITE_BUFFERS, replacement_policy="LRURP",
            write_policy="write-back",
            clusivity="mostly_excl" if (inclusion == "exclusive" and lv in ("l2", "l3")) else "mostly_incl",
            writeback_clean=below_excl,
            bus=None if lv in ("l1i", "l1d") else
            replace(CACHE_BUS, width=size_bytes(f"{at}.fill_width") if f"{at}.fill_width" in fields else CACHE_BUS.width))
        if f"{at}.fill_width" in fields:
            mapped[f"{at}.fill_width"] = (f"{CACHE_BUS.kind}.width = {levels[lv].bus.width}: the crossbar above this "
                                          f"level moves that many bytes a cycle to the level above (a line holds it "
                                          f"{-(-line // levels[lv].bus.width)} cycles)")
        mapped[f"{at}.size"] = f"Cache.size = \"{gem5_size(sz)}\""
        mapped[f"{at}.assoc"] = f"Cache.assoc = {assoc}"
        mapped[f"{at}.latency"] = ("Cache.data_latency (tag_latency = response_latency = 1; data_latency makes "
                                   "the load-to-use of a hit here equal this figure)")
        if _get(f"{at}.replacement") == "lru":
            mapped[f"{at}.replacement"] = "Cache.replacement_policy = LRURP() (src/mem/cache/replacement_policies/ReplacementPolicies.py)"
        if lv != "l1d":
            if own_line == line:
                mapped[f"{at}.line"] = f"System.cache_line_size = {line}"
            else:
                note(f"{at}.line", f"gem5's classic caches all use the system's line size (System.cache_line_size; "
                                   f"BaseTags.block_size = Parent.cache_line_size, src/mem/cache/tags/Tags.py), set to "
                                   f"the L1D's {line} B; this level runs with {line}-byte lines, not {own_line}")
        write = _get(f"{at}.write")
        if write == "write-back":
            mapped[f"{at}.write"] = "gem5's classic Cache is write-back with write-allocate (the machine's write-back)"
        elif lv == "l1i":
            note(f"{at}.write", "gem5's classic Cache has no write-through policy (src/mem/cache/Cache.py); for an "
                                "instruction cache this changes nothing, since fetches never write")
        else:
            note(f"{at}.write", "gem5's classic Cache has no write-through policy (src/mem/cache/Cache.py): it is "
                                "write-back and write-allocate (a WriteAllocator only turns streaming stores into "
                                "no-allocate). This level runs write-back: a store stays in it until the line is "
                                "evicted instead of going on to the next level, and a store miss allocates a line")
        if inclusion is not None:
            if lv in ("l1i", "l1d"):
                note(f"{at}.inclusion", "an L1 has no level above it; gem5 L1s are mostly_incl, as Cache.py advises")
            elif inclusion == "exclusive":
                mapped[f"{at}.inclusion"] = ("Cache.clusivity = \"mostly_excl\" (a victim cache), with "
                                             "writeback_clean = True on the level above (src/mem/cache/Cache.py)")
            elif inclusion == "non-inclusive":
                mapped[f"{at}.inclusion"] = "Cache.clusivity = \"mostly_incl\" (allocates on fill, never back-invalidates)"
            else:
                note(f"{at}.inclusion", "gem5's classic caches have no strict inclusion: mostly_incl allocates on "
                                        "every fill but an eviction here does not invalidate the levels above "
                                        "(src/mem/cache/Cache.py, clusivity), so inclusion is not enforced")
        if f"{at}.mshrs" in fields:
            mapped[f"{at}.mshrs"] = (f"Cache.mshrs = {levels[lv].mshrs} (its targets per MSHR stay the stdlib's "
                                     f"{levels[lv].tgts_per_mshr}, its write buffers {WRITE_BUFFERS})")
        for kind, cls in PREFETCHER_CLASSES.items():
            pre = f"{at}.prefetch.{kind}"
            if not group(pre):
                continue
            degree = int(num(f"{pre}.degree"))
            if degree == 0:
                for k in ("degree", "distance", "streams", "page_bounded"):
                    if f"{pre}.{k}" in fields:
                        note(f"{pre}.{k}", "degree 0: this prefetcher is off, and gem5 gets none for it")
                continue
            if cls in PREFETCHER_CHANGE_CLASSES and PREFETCHERS_CHANGE not in changes:
                for k in ("degree", "distance", "streams", "page_bounded"):
                    if f"{pre}.{k}" in fields:
                        note(f"{pre}.{k}", f"stock gem5 has no {kind} prefetcher (src/mem/cache/prefetch/: stride, "
                                           f"tagged and the pattern-table ones), so this cache gets none for it "
                                           f"(trapline's gem5 has the change {PREFETCHERS_CHANGE}: ./run.sh gem5 build)")
                continue
            bounded = bool(_get(f"{pre}.page_bounded")) if f"{pre}.page_bounded" in fields else True
            pf = PrefetcherParams(kind=kind, gem5_class=cls, degree=degree,
                                  distance=int(num(f"{pre}.distance")) if f"{pre}.distance" in fields else 0,
                                  streams=int(num(f"{pre}.streams")) if f"{pre}.streams" in fields else 0,
                                  page_bounded=bounded, on_access=kind == "stream", on_miss=kind == "adjacent-line",
                                  on_write=lv in ("l1i", "l1d"), page_bytes=PAGE_BYTES[isa])
            levels[lv].prefetchers.append(pf)
            mapped[f"{pre}.degree"] = f"{cls}.degree = {degree} on this cache's prefetcher"
            if f"{pre}.distance" in fields:
                mapped[f"{pre}.distance"] = f"{cls}.distance = {pf.distance}"
            if f"{pre}.streams" in fields:
                mapped[f"{pre}.streams"] = f"{cls}.streams = {pf.streams}"
            if f"{pre}.page_bounded" in fields:
                if bounded:
                    mapped[f"{pre}.page_bounded"] = ("true: a gem5 prefetcher with no MMU to translate drops a prefetch "
                                                     "into another page (Queued::notify, src/mem/cache/prefetch/"
                                                     "queued.cc); none is registered")
                else:
                    note(f"{pre}.page_bounded", "false, but gem5's prefetchers here have no MMU to translate a "
                                                "prefetch into another page (Queued::notify), so they stop at the page")
        if _get(f"{at}.indexed_by") is not None:
            note(f"{at}.indexed_by", "gem5's classic caches sit behind the MMU and see physical addresses, "
                                     "fetches and data alike; nothing to set")

    # ---- latency accounting, top down
    chain = [levels[lv] for lv in ("l2", "l3") if lv in levels]
    path = 0  # cycles an isolated load spends before and after reaching the next level down
    up = levels["l1d"]
    for c in (levels["l1i"], levels["l1d"]):
        c.data_latency = max(1, c.latency_cycles)
        if c.latency_cycles < c.tag_latency:
            note(f"caches.{c.level}.latency", f"below gem5's minimum hit of {c.tag_latency} cycle (tag lookup); "
                                              f"runs with {c.data_latency}", value=_get(f"caches.{c.level}.latency"))
    for c in chain:
        path += up.tag_latency + up.response_latency + c.bus.request_cycles() + c.bus.response_cycles(line)
        want = c.latency_cycles - path
        c.data_latency = max(c.tag_latency, want)
        if want < c.tag_latency:
            note(f"caches.{c.level}.latency",
                 f"the gem5 path to this level alone takes {path} cycles (the levels above and the crossbars), so a "
                 f"hit here costs {path + c.data_latency} cycles, not {c.latency_cycles}")
        up = c
    path += up.tag_latency + up.response_latency + MEMBUS.request_cycles() + MEMBUS.response_cycles(line)
    mem_cycles = cyc("memory.latency")
    module = max(0, mem_cycles - path)
    if mem_cycles < path:
        note("memory.latency", f"the gem5 path to memory alone takes {path} cycles, more than the "
                               f"{mem_cycles}-cycle load-to-use; SimpleMemory.latency is 0")
    else:
        mapped["memory.latency"] = (f"SimpleMemory.latency = {module} cycles at the clock (the load-to-use minus "
                                    f"the {path}-cycle cache path)")
    bandwidth = MEM_BANDWIDTH
    chan = ("memory.channels", "memory.channel_width", "memory.transfer_rate")
    if all(f in fields for f in chan):
        per = size_bytes("memory.channel_width") * float(num("memory.transfer_rate"))
        n_chan = int(num("memory.channels"))
        bandwidth = f"{round_half_up(n_chan * per)}B/s"
        kept = 1e12 / round(1e12 / (n_chan * per))  # gem5 keeps whole picoseconds per byte (MemoryBandwidth)
        mapped["memory.channels"] = (f"SimpleMemory.bandwidth = {bandwidth}: the channels' {n_chan} x "
                                     f"{per / 1e9:g} GB/s as one memory that serves a request at a time at their "
                                     f"sum (gem5's SimpleMemory has one port and no channels; it keeps whole "
                                     f"picoseconds per byte: {kept / 1e9:.4g} GB/s)")
        mapped["memory.channel_width"] = "SimpleMemory.bandwidth (channels x channel_width x transfer_rate)"
        mapped["memory.transfer_rate"] = "SimpleMemory.bandwidth (channels x channel_width x transfer_rate)"
    else:
        for f in chan:
            if f in fields:
                note(f, f"needs all of {', '.join(chan)}; without them SimpleMemory keeps its default "
                        f"bandwidth, {MEM_BANDWIDTH}")
    memory = MemoryParams(latency_cycles=mem_cycles, path_cycles=path, module_latency_cycles=module,
                          latency=f"{cycles_to_ps(module, hz)}ps", latency_var="0ns", bandwidth=bandwidth,
                          size=mem_size)

    # ---- the core
    core = None
    if group("core"):
        kind = _get("core.kind")
        cpu = _get("gem5.cpu") or "o3"
        core = CoreParams(kind=kind)
        if cpu == "o3":
            mapped["core.kind"] = (f"{kind}: the machine's gem5.cpu, o3 (O3CPU), runs it"
                                   + (" out of order" if kind == "out-of-order" else
                                      "; gem5's in-order CPUs cannot run it here (gem5.note), so gem5 runs this "
                                      "in-order core out of order"))
            for f, attr, param in (("core.rob", "rob", "numROBEntries"), ("core.load_queue", "lq", "LQEntries"),
                                   ("core.store_buffer", "sq", "SQEntries")):
                if f in fields:
                    setattr(core, attr, int(num(f)))
                    mapped[f] = f"O3CPU.{param} = {int(num(f))} (src/cpu/o3/BaseO3CPU.py)"
        else:
            model = {"timing": "TimingSimpleCPU, which waits for every access before the next instruction",
                     "minor": "MinorCPU, an in-order pipeline whose loads do not block later independent "
                              "instructions (its LSQ)"}[cpu]
            mapped["core.kind"] = f"{kind}: the machine's gem5.cpu, {cpu}: {model}"
            if "core.store_buffer" in fields:
                if cpu == "minor":
                    core.minor_store_buffer = int(num("core.store_buffer"))
                    mapped["core.store_buffer"] = (f"MinorCPU.executeLSQStoreBufferSize = {core.minor_store_buffer} "
                                                   "(src/cpu/minor/BaseMinorCPU.py)")
                else:
                    note("core.store_buffer", "TimingSimpleCPU has no store buffer: each store completes before "
                                              "the next instruction")
            for f in ("core.rob", "core.load_queue"):
                if f in fields:
                    note(f, f"an out-of-order window; the {cpu} CPU has none")
        if "core.on_miss" in fields:
            if cpu == "timing":
                mapped["core.on_miss"] = (f"{_get('core.on_miss')}: TimingSimpleCPU waits for every access "
                                          "(src/cpu/simple/timing.cc), so a miss stalls the core")
            else:
                note("core.on_miss", f"gem5's {cpu} CPU decides what a miss holds up by its own pipeline "
                                     f"({'O3: only what depends on it' if cpu == 'o3' else 'MinorCPU: its LSQ'}), "
                                     "not by this field")

    # ---- NUMA
    numa = None
    if group("numa"):
        raw = num("numa.latency_ns")
        lat = [[round_half_up(v) for v in row] for row in raw]
        inter = bool(_get("numa.interleave"))
        gran = _get("numa.interleave_granularity")
        nodes = int(_get("numa.nodes"))
        numa = NUMAParams(nodes=nodes, latency_cycles=lat, interleave=inter,
                          interleave_granularity_bytes=size_bytes("numa.interleave_granularity")
                          if gran is not None else None)
        if NUMA_CHANGE in changes and nodes > 1:
            numa.applied = True
            numa.extra_ps = [[cycles_to_ps(max(0.0, raw[i][n] - raw[n][n]), hz) for n in range(nodes)]
                             for i in range(nodes)]
            mapped["numa.nodes"] = (f"{nodes} memories, one per node, each on its own address range and so its own "
                                    f"SE memory pool (TraplineNumaMemory); SEWorkload.first_touch_pools gives a page "
                                    f"the pool of the node whose core touched it first; core i of n is on node "
                                    f"i * {nodes} // n (trapline's gem5 change {NUMA_CHANGE})")
            mapped["numa.latency_ns"] = ("NumaDelay.extra in front of each node's memory: a request from a core on "
                                         "node i to node n's memory waits latency_ns[i][n] - latency_ns[n][n] on "
                                         "top of memory.latency, the local load-to-use (extra_ps)")
            if any(abs(raw[n][n] - num("memory.latency")) > 0.5 for n in range(nodes)):
                note("numa.latency_ns", "the local latency is memory.latency; this matrix's diagonal differs from it, "
                                        "and only its differences to the diagonal are used")
            if inter:
                for k in ("interleave", "interleave_granularity"):
                    if f"numa.{k}" in leaves(data):
                        note(f"numa.{k}", "interleaving is not modelled: every page goes to the node of the core "
                                          "that touched it first")
            else:
                mapped["numa.interleave"] = "false: pages by first touch (SEWorkload.first_touch_pools)"
                if "numa.interleave_granularity" in leaves(data):
                    note("numa.interleave_granularity", "unused: numa.interleave is false")
        else:
            why = (f"stock gem5's SE mode places every page in one memory pool, with no first touch and no remote "
                   f"latency (Process::allocateMem, src/sim/process.cc), so NUMA is not modelled: every access "
                   f"costs memory.latency, the local figure (trapline's gem5 has the change {NUMA_CHANGE}: "
                   f"./run.sh gem5 build)" if nodes > 1 else "one node: nothing to place")
            for k in ("nodes", "latency_ns", "interleave", "interleave_granularity"):
                if f"numa.{k}" in leaves(data):
                    note(f"numa.{k}", why)

    # ---- TLBs
    page = size_bytes("tlb.dtlb.page")
    for t in ("itlb", "dtlb"):
        at = f"tlb.{t}"
        gem = "itb" if t == "itlb" else "dtb"
        entries = int(_get(f"{at}.entries"))
        if isa == "SPARC" and entries > SPARC_TLB_MAX:
            note(f"{at}.entries", f"capped at {SPARC_TLB_MAX}: gem5's SPARC TLB is the T1's and refuses more "
                                  f"entries (SparcISA::TLB::TLB, src/arch/sparc/tlb.cc: \"SPARC T1 TLB registers "
                                  f"don't support more than 64 TLB entries\"); mmu.{gem}.size = {SPARC_TLB_MAX}, "
                                  f"not {entries}, so this TLB misses more often than the machine's")
        else:
            mapped[f"{at}.entries"] = f"mmu.{gem}.size ({TLB_SOURCE[isa]})"
        if _get(f"{at}.assoc") == "full":
            mapped[f"{at}.assoc"] = f"fully associative, as gem5's {isa} TLB with mmu.{gem}.size entries"
        else:
            note(f"{at}.assoc", "the gem5 TLB SimObjects set here take only `size` (X86TLB.py, SparcTLB.py, ArmTLB.py); "
                                "the TLB runs fully associative with the same number of entries")
        pg = size_bytes(f"{at}.page")
        if pg == PAGE_BYTES[isa]:
            mapped[f"{at}.page"] = f"fixed in gem5: {isa} PageBytes = {PAGE_BYTES[isa]} ({PAGE_SOURCE[isa]}); nothing to set"
        else:
            note(f"{at}.page", f"gem5's {isa} page size is fixed at {PAGE_BYTES[isa]} bytes ({PAGE_SOURCE[isa]}); "
                               f"the run uses that, not {pg}")
        note(f"{at}.miss_penalty", "no gem5 parameter charges a fixed TLB-miss cost: in SE mode a miss is refilled "
                                   "from the simulated process's page table by the simulator, or walked by the "
                                   "ISA's table walker whose time comes from the cache model; it is not this figure")
    l2_size = None
    if group("tlb.stlb"):
        kind = _get("tlb.stlb.kind")
        if kind == "main-tlb" and isa == "ARM":
            l2_size = int(_get("tlb.stlb.entries"))
            mapped["tlb.stlb.kind"] = "ARM main TLB -> ArmMMU.l2_shared (src/arch/arm/ArmMMU.py)"
            mapped["tlb.stlb.entries"] = "ArmMMU.l2_shared.size"
            note("tlb.stlb.assoc", "ArmMMU.l2_shared is set by its size only; its associativity is gem5's")
            note("tlb.stlb.latency", "no gem5 parameter charges a fixed main-TLB hit latency")
        else:
            why = {"stlb": "gem5's X86MMU has an instruction and a data TLB only (src/arch/x86/X86MMU.py: itb, dtb); "
                           "there is no shared second-level TLB",
                   "tsb": "a TSB is Solaris's software table in memory, refilled by the OS's trap handler; gem5 SE "
                          "mode runs no OS and refills the SPARC TLB itself (SparcMMU has itb and dtb only, "
                          "src/arch/sparc/SparcMMU.py)",
                   "main-tlb": f"a main TLB is ARM's; gem5's {isa} MMU has no second level"}.get(kind, "no gem5 equivalent")
            for k in ("kind", "entries", "assoc", "latency"):
                if f"tlb.stlb.{k}" in leaves(data):
                    note(f"tlb.stlb.{k}", why)
    def tlb_size(t: str) -> int:
        n = int(_get(f"tlb.{t}.entries"))
        return min(n, SPARC_TLB_MAX) if isa == "SPARC" else n
    tlb = TLBParams(page_bytes=PAGE_BYTES[isa], itb_size=tlb_size("itlb"), dtb_size=tlb_size("dtlb"),
                    l2_size=l2_size)

    # ---- what the QEMU timing model charges and gem5 does not
    unaligned = {
        "X86": "gem5's x86 CPUs do a misaligned access in hardware and split one that crosses a cache line into "
               "two cache accesses (TimingSimpleCPU::initiateMemRead, src/cpu/simple/timing.cc); its cost comes "
               "from the cache model, no fixed penalty is charged",
        "SPARC": "gem5's SPARC raises mem_address_not_aligned; SE mode has no Solaris to emulate the access (E1), "
                 "and a fault SE does not handle stops the run (src/sim/faults.cc, FaultBase::invoke panics "
                 "outside full-system mode) instead of costing traps.cost",
        "ARM": "gem5's ARM model applies the architecture's alignment rules; SE mode has no Linux alignment fixup "
               "(E2), so a faulting LDRD/LDM is not emulated at traps.cost, and no fixed penalty is charged for "
               "the accesses done in hardware",
    }[isa]
    unaligned_trap = None
    if isa == "SPARC" and UNALIGNED_TRAP_CHANGE in changes:
        # trapline's gem5 change sparc-unaligned-trap: the SE kernel completes the access at traps.cost
        cost = f"{cycles_to_ps(float(num('traps.cost')), hz)}ps" if "traps.cost" in fields else "0ps"
        unaligned_trap = UnalignedTrapParams(latency=cost)
        for k in ("w2", "w4", "w8"):
            if f"unaligned.{k}" not in leaves(data):
                continue
            if _get(f"unaligned.{k}") == "trap":
                mapped[f"unaligned.{k}"] = (
                    "trap: gem5's SPARC raises mem_address_not_aligned (src/arch/sparc/tlb.cc), and in SE mode the "
                    "kernel completes the access as Linux's kernel_unaligned_trap does (byte by byte, the register "
                    f"written, the PC advanced) after SparcISA.unaligned_trap_latency (trapline's gem5 change "
                    f"{UNALIGNED_TRAP_CHANGE})")
            else:
                note(f"unaligned.{k}", "gem5's SPARC traps on every misaligned access (src/arch/sparc/tlb.cc), "
                                       f"whatever this field says; trapline's gem5 completes it at traps.cost")
        for k in ("penalty", "line_cross_penalty"):
            if f"unaligned.{k}" not in leaves(data):
                continue
            if float(num(f"unaligned.{k}")) == 0:
                mapped[f"unaligned.{k}"] = ("0: no misaligned access is done in hardware, and gem5's SPARC does none "
                                            "either (each one traps)")
            else:
                note(f"unaligned.{k}", "gem5's SPARC does no misaligned access in hardware (each one traps), so "
                                       "nothing charges this penalty")
    else:
        if isa == "SPARC":
            unaligned += (f" (trapline's gem5 has the change {UNALIGNED_TRAP_CHANGE}: ./run.sh gem5 build)")
        for k in ("w2", "w4", "w8", "penalty", "line_cross_penalty"):
            if f"unaligned.{k}" in leaves(data):
                note(f"unaligned.{k}", "QEMU-model-only. " + unaligned)
    bus_lock = None
    for k in ("lock_cost", "split_lock_cost"):
        if f"atomics.{k}" not in leaves(data):
            continue
        if k == "split_lock_cost" and BUS_LOCK_CHANGE in changes and isa == "X86":
            cycles = float(num("atomics.split_lock_cost"))
            bus_lock = BusLockParams(hold=f"{cycles_to_ps(cycles, hz)}ps", hold_cycles=cycles)
            mapped["atomics.split_lock_cost"] = (
                f"BusLock.hold = {bus_lock.hold}: the second half of a locked read-modify-write that straddles two "
                f"lines (a second locked read before the first one's write) waits this long, and every other core's "
                f"data requests wait until it is over (BusLockPort between each core and its L1D; trapline's gem5 "
                f"change {BUS_LOCK_CHANGE})")
        elif k == "split_lock_cost" and isa == "X86":
            note(f"atomics.{k}", f"stock gem5 locks each cache line of a split locked read-modify-write on its own "
                                 f"(src/mem/cache/base.cc) and holds no bus, so nothing charges a bus lock "
                                 f"(trapline's gem5 has the change {BUS_LOCK_CHANGE}: ./run.sh gem5 build)")
        else:
            note(f"atomics.{k}", "QEMU-model-only: gem5 times a locked read-modify-write by its CPU model and cache "
                                 "protocol; no parameter charges a fixed lock cost")
    if "coherence.transfer_latency" in leaves(data):
        note("coherence.transfer_latency", "QEMU-model-only: the lockstep lane's lock-line hand-off between vCPUs "
                                          "(model/plugin/contention.c); gem5's cache protocol times coherence itself")
    prefetch = None
    if isa == "SPARC" and SPARC_PREFETCH_CHANGE in changes and "prefetch.semantics" in leaves(data):
        strong = _get("prefetch.semantics") == "strong"
        trap = f"{cycles_to_ps(float(num('prefetch.trap_cost')), hz)}ps" if "prefetch.trap_cost" in fields else "0ps"
        prefetch = PrefetchParams(strong=strong, trap_latency=trap)
        mapped["prefetch.semantics"] = (f"SparcISA.strong_prefetch = {strong}: the strong prefetch codes (20-23) "
                                        + ("fill the TLB (a miss takes the MMU-miss trap)" if strong else
                                           "are dropped on a TLB miss, as the weak codes are")
                                        + f" (trapline's gem5 change {SPARC_PREFETCH_CHANGE})")
        if "prefetch.trap_cost" in fields:
            mapped["prefetch.trap_cost"] = (f"SparcISA.strong_prefetch_trap_latency = {trap}: in SE mode the "
                                            "kernel's drop of a strong prefetch to an unmapped page stops the thread "
                                            "this long" + ("" if strong else " (unused: weak semantics)"))
    else:
        why = ("QEMU-model-only: gem5's decoder decides what a software prefetch does, not a parameter, and SE mode "
               "has no kernel trap to charge" if isa != "SPARC" else
               "stock gem5 decodes every SPARC prefetch as a Nop (src/arch/sparc/isa/decoder.isa, Nop::prefetch): "
               f"nothing misses a TLB or traps (trapline's gem5 has the change {SPARC_PREFETCH_CHANGE}: "
               "./run.sh gem5 build)")
        for k in ("semantics", "trap_cost"):
            if f"prefetch.{k}" in leaves(data):
                note(f"prefetch.{k}", why)
    if unaligned_trap is not None and "traps.cost" in fields:
        mapped["traps.cost"] = (f"SparcISA.unaligned_trap_latency = {unaligned_trap.latency}: in SE mode the "
                                "kernel's completion of a misaligned access stops the thread this long (trapline's "
                                f"gem5 change {UNALIGNED_TRAP_CHANGE}); no other trap is charged")
    else:
        note("traps.cost", "QEMU-model-only: SE mode emulates system calls in the simulator and runs no kernel, so no "
                           "trap handler is timed (page faults are filled by the simulator)")
    if group("windows"):
        n = _get("windows.count")
        if isa == "SPARC" and n == SPARC_NWINDOWS:
            mapped["windows.count"] = (f"fixed in gem5: SparcISA::NWindows = {SPARC_NWINDOWS} "
                                       "(src/arch/sparc/sparc_traits.hh); nothing to set")
        else:
            note("windows.count", f"gem5's SPARC has NWindows = {SPARC_NWINDOWS}, a constant "
                                  "(src/arch/sparc/sparc_traits.hh); the run uses 8")
        note("windows.spill_fill_cost", "in SE mode a window spill or fill trap jumps to handler code that gem5 "
                                         "places in the process (SpillNNormal/FillNNormal::invoke, "
                                         "src/arch/sparc/faults.cc), so its cost is those simulated instructions, "
                                         "not this figure")

    params = Gem5Params(
        machine=str(data["machine"]), sets=sets, arch=arch, isa=isa, clock=clock, clock_hz=hz,
        cache_line_size=line, l1i=levels["l1i"], l1d=levels["l1d"], l2=levels.get("l2"), l3=levels.get("l3"),
        cache_bus=CACHE_BUS, membus=MEMBUS, memory=memory, tlb=tlb, numa=numa, mapped=mapped, notes=notes,
        changes=changes, bus_lock=bus_lock, prefetch=prefetch, core=core, unaligned_trap=unaligned_trap)
    _cover(params, data)
    return params


def _cover(params: Gem5Params, data: dict) -> None:
    """Note every field neither mapped nor noted, so none is dropped silently."""
    noted = {n.field for n in params.notes}
    for path, value in leaves(data).items():
        if path not in params.mapped and path not in noted:
            params.notes.append(Note(field=path, value=value,
                                     text="not used by the gem5 configuration: no gem5 parameter is set from it"))


def uncovered(params: Gem5Params, data: dict) -> List[str]:
    """Fields of the machine that are neither mapped nor noted (empty after from_machine)."""
    noted = {n.field for n in params.notes}
    return [p for p in leaves(data) if p not in params.mapped and p not in noted]
