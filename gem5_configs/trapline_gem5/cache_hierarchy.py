"""TraplineCacheHierarchy: a trapline machine's caches as gem5 classic caches.

gem5 API used here, checked against the gem5 sources (v23/v24 stdlib):

    m5.objects.Cache, LRURP         src/mem/cache/Cache.py (size, assoc, tag_latency, data_latency,
                                    response_latency, mshrs, tgts_per_mshr, write_buffers,
                                    writeback_clean, clusivity, replacement_policy, cpu_side, mem_side);
                                    src/mem/cache/replacement_policies/ReplacementPolicies.py (LRURP)
    m5.objects.L2XBar, SystemXBar,  src/mem/XBar.py (width, frontend_latency, forward_latency,
      BaseXBar                      response_latency, cpu_side_ports, mem_side_ports, default,
                                    snoop_filter.max_capacity)
    m5.objects.BadAddr              src/dev/Device.py (the memory bus's default responder, as the
                                    stdlib's PrivateL1CacheHierarchy does)
    m5.objects.Port                 imported from m5.objects by the stdlib's
                                    abstract_classic_cache_hierarchy.py
    AbstractClassicCacheHierarchy   src/python/gem5/components/cachehierarchies/classic/
                                    abstract_classic_cache_hierarchy.py (get_mem_side_port,
                                    get_cpu_side_port; is_ruby() is False there)
    AbstractCacheHierarchy          .../cachehierarchies/abstract_cache_hierarchy.py (incorporate_cache)
    MMUCache                        .../cachehierarchies/classic/caches/mmu_cache.py (page-walk caches)
    AbstractBoard                   src/python/gem5/components/boards/abstract_board.py
                                    (connect_system_port, get_memory, get_processor, has_coherent_io)
    core.connect_icache/dcache/walker_ports/interrupt, core.get_mmu
                                    src/python/gem5/components/processors/base_cpu_core.py
    BaseMMU.walkerPorts()           src/arch/generic/BaseMMU.py ([] for an MMU without table
                                    walkers, e.g. SparcMMU; X86MMU and ArmMMU list theirs)
    ISA                             src/python/gem5/isas.py
    overrides                       src/python/gem5/utils/override.py

The caches are plain ``Cache`` objects rather than the stdlib's L1DCache /
L1ICache / L2Cache, which attach a StridePrefetcher by default: a cache gets
the hardware prefetchers its machine names (caches.<l>.prefetch, params.py),
and none where it names none:

    m5.objects.TaggedPrefetcher,    src/mem/cache/prefetch/Prefetcher.py (degree, on_miss,
      StridePrefetcher,             prefetch_on_access; Stride's distance), MultiPrefetcher
      MultiPrefetcher               (prefetchers) for a cache with several
    StreamPrefetcher,               trapline's gem5 change prefetchers (gem5_configs/changes/
      AdjacentLinePrefetcher        prefetchers/extras/TraplinePrefetchers.py)
    MissOverlap                     trapline's gem5 change overlap-stats (gem5_configs/changes/
                                    overlap-stats/extras/MissOverlap.py): an L1D's misses overlapped
"""

from typing import Dict, Optional

from m5.objects import BadAddr, BaseXBar, Cache, L2XBar, LRURP, Port, SystemXBar

from gem5.components.boards.abstract_board import AbstractBoard
from gem5.components.cachehierarchies.abstract_cache_hierarchy import AbstractCacheHierarchy
from gem5.components.cachehierarchies.classic.abstract_classic_cache_hierarchy import (
    AbstractClassicCacheHierarchy,
)
from gem5.components.cachehierarchies.classic.caches.mmu_cache import MMUCache
from gem5.isas import ISA
from gem5.utils.override import overrides

from .params import (OVERLAP_STATS_CHANGE, WALK_CACHE_SIZE, CacheLevel, Gem5Params, PrefetcherParams, XBarParams, shared_level,
                     snoop_filter_capacity)

_XBARS = {"L2XBar": L2XBar, "SystemXBar": SystemXBar}
_REPLACEMENT = {"LRURP": LRURP}


def _prefetcher_classes() -> dict:
    """gem5's prefetcher classes by name (PREFETCHER_CLASSES' values); trapline's gem5 adds two."""
    from m5.objects import StridePrefetcher, TaggedPrefetcher
    out = {"TaggedPrefetcher": TaggedPrefetcher, "StridePrefetcher": StridePrefetcher}
    try:  # trapline's gem5 change prefetchers (params.py maps the kinds only when the gem5 has it)
        from m5.objects import AdjacentLinePrefetcher, StreamPrefetcher
        out.update(StreamPrefetcher=StreamPrefetcher, AdjacentLinePrefetcher=AdjacentLinePrefetcher)
    except ImportError:
        pass
    return out


def make_prefetcher(pf: PrefetcherParams):
    """One prefetcher of a cache, e.g. PrefetcherParams(kind="ip-stride", gem5_class="StridePrefetcher",
    degree=1) -> StridePrefetcher(degree=1, distance=0)."""
    cls = _prefetcher_classes()[pf.gem5_class]
    kw = {"degree": pf.degree, "page_bytes": f"{pf.page_bytes}B"}
    if pf.gem5_class in ("StridePrefetcher", "StreamPrefetcher"):
        kw["distance"] = pf.distance
    if pf.gem5_class == "StreamPrefetcher":
        kw["streams"] = pf.streams
    # what it hears (Base::observeAccess, src/mem/cache/prefetch/base.cc): by default misses and demand
    # hits on the lines it prefetched; the stream prefetcher every access, the adjacent-line one misses
    # only (a demand hit on a prefetched line would otherwise count: prefetch_on_pf_hit goes first)
    if pf.on_access:
        kw.update(prefetch_on_access=True, prefetch_on_pf_hit=False)
    if pf.on_miss:
        kw.update(on_miss=True, prefetch_on_pf_hit=False)
    if not pf.on_write:
        # below the L1s a write is an L1's writeback (WritebackDirty): the timing model's prefetchers of a
        # lower level hear the L1's misses and prefetches only (a store miss arrives as a read, ReadExReq)
        kw["on_write"] = False
    return cls(**kw)


def make_cache(level: CacheLevel) -> Cache:
    """One classic cache from a CacheLevel, e.g. CacheLevel(size="32KiB", assoc=8, ...), with its
    hardware prefetchers (one, or a MultiPrefetcher of several)."""
    cache = _cache(level)
    pfs = [make_prefetcher(pf) for pf in level.prefetchers]
    if len(pfs) == 1:
        cache.prefetcher = pfs[0]
    elif pfs:
        from m5.objects import MultiPrefetcher
        cache.prefetcher = MultiPrefetcher(prefetchers=pfs)
    return cache


def _cache(level: CacheLevel) -> Cache:
    return Cache(
        size=level.size,
        assoc=level.assoc,
        tag_latency=level.tag_latency,
        data_latency=level.data_latency,
        response_latency=level.response_latency,
        mshrs=level.mshrs,
        tgts_per_mshr=level.tgts_per_mshr,
        write_buffers=level.write_buffers,
        writeback_clean=level.writeback_clean,
        clusivity=level.clusivity,
        replacement_policy=_REPLACEMENT[level.replacement_policy](),
    )


def make_xbar(xbar: XBarParams, snoop_capacity: str) -> BaseXBar:
    """A crossbar with the latencies the parameters account for, and a snoop
    filter (CoherentXBar.snoop_filter, SnoopFilter.max_capacity in src/mem/XBar.py)
    large enough for every line cached above it, e.g. "64MiB" below a 32 MB L3."""
    bus = _XBARS[xbar.kind](
        width=xbar.width,
        frontend_latency=xbar.frontend_latency,
        forward_latency=xbar.forward_latency,
        response_latency=xbar.response_latency,
    )
    bus.snoop_filter.max_capacity = snoop_capacity
    return bus


class TraplineCacheHierarchy(AbstractClassicCacheHierarchy):
    """Each core's private L1I and L1D, an optional L2 and an optional L3, and a
    memory bus, with the sizes, associativities and latencies of a trapline
    machine. The last level is shared by the cores and the levels above it are
    private (``params.shared_level``): with an L3, each core has its own L2.

    Example (x86-2012-server, one core): L1I and L1D "32KiB" 8-way (4-cycle
    hits), L2 "256KiB" 8-way (12-cycle load-to-use), L3 "20MiB" 20-way (30
    cycles), all with 64-byte lines (the board's cache_line_size), and a
    SystemXBar to the memory. The L1s talk to the L2 through an L2XBar, the L2
    to the L3 through another; without an L2 the L1s sit on the memory bus.

    Per-core objects are lists, one entry per core (gem5 names a one-entry list
    without an index: ``board.cache_hierarchy.l1dcaches``; with two cores
    ``l1dcaches0`` and ``l1dcaches1``): l1icaches, l1dcaches, l2buses, l2caches
    (one shared entry when the L2 is the last level), iptw_caches, dptw_caches.
    The shared l3bus, l3cache and membus are single objects. With trapline's gem5
    change bus-lock (params.bus_lock), bus_lock_ports sit between each core and its
    L1D and share one bus_lock.
    """

    def __init__(self, params: Gem5Params, membus: Optional[BaseXBar] = None, num_cores: int = 1) -> None:
        """
        :param params: the machine's parameters (``trapline_gem5.params.from_machine``
            or ``Gem5Params.from_json``); its caches give each level's size ("32KiB"),
            assoc (8), tag/data/response latencies in cycles (1, 4, 1), clusivity and
            writeback_clean.
        :param membus: the memory bus; by default a SystemXBar with params.membus
            (width 64 bytes, latencies 3/4/2 cycles), a snoop filter sized for the
            caches above it, and a BadAddr default responder.
        :param num_cores: the processor's cores (the board checks they agree).
        """
        AbstractClassicCacheHierarchy.__init__(self=self)
        self._trapline_params = params
        self._num_cores = num_cores
        if membus is None:
            membus = make_xbar(params.membus, snoop_filter_capacity(params, "membus", num_cores))
            membus.badaddr_responder = BadAddr()
            membus.default = membus.badaddr_responder.pio
        self.membus = membus

    @overrides(AbstractClassicCacheHierarchy)
    def get_mem_side_port(self) -> Port:
        return self.membus.mem_side_ports

    @overrides(AbstractClassicCacheHierarchy)
    def get_cpu_side_port(self) -> Port:
        return self.membus.cpu_side_ports

    def levels(self, core: int = 0) -> Dict[str, Cache]:
        """The caches a core sees, built by incorporate_cache, by level name (l1i, l1d, l2, l3)."""
        out = {"l1i": self.l1icaches[core], "l1d": self.l1dcaches[core]}
        if self._trapline_params.l2 is not None:
            out["l2"] = self.l2caches[core if len(self.l2caches) > 1 else 0]
        if self._trapline_params.l3 is not None:
            out["l3"] = self.l3cache
        return out

    @overrides(AbstractCacheHierarchy)
    def incorporate_cache(self, board: AbstractBoard) -> None:
        p = self._trapline_params
        cores = board.get_processor().get_cores()
        n = len(cores)
        if n != self._num_cores:
            raise ValueError(f"TraplineCacheHierarchy was made for {self._num_cores} core(s), the processor has {n}")
        if board.has_coherent_io():
            raise ValueError("TraplineCacheHierarchy is for SE mode on a SimpleBoard (no coherent I/O)")

        # Functional accesses from the simulator, and the memory behind the bus.
        board.connect_system_port(self.membus.cpu_side_ports)
        for _, port in board.get_memory().get_mem_ports():
            self.membus.mem_side_ports = port

        # Bottom up: the shared levels, then each core's private ones.
        below_l2 = self.membus
        if p.l3 is not None:
            self.l3bus = make_xbar(p.l3.bus or p.cache_bus, snoop_filter_capacity(p, "l3bus", n))
            self.l3cache = make_cache(p.l3)
            self.l3bus.mem_side_ports = self.l3cache.cpu_side
            self.l3cache.mem_side = self.membus.cpu_side_ports
            below_l2 = self.l3bus
        shared_l2 = p.l2 is not None and shared_level(p) == "l2"
        l2_count = 0 if p.l2 is None else 1 if shared_l2 else n
        self.l2buses = [make_xbar(p.l2.bus or p.cache_bus, snoop_filter_capacity(p, "l2bus", n)) for _ in range(l2_count)]
        self.l2caches = [make_cache(p.l2) for _ in range(l2_count)]
        for bus, l2 in zip(self.l2buses, self.l2caches):
            bus.mem_side_ports = l2.cpu_side
            l2.mem_side = below_l2.cpu_side_ports

        self.l1icaches = [make_cache(p.l1i) for _ in range(n)]
        self.l1dcaches = [make_cache(p.l1d) for _ in range(n)]
        # Page-table walkers (x86, ARM) get small caches like the stdlib's; an MMU
        # without walkers (SPARC) has none, and a cache with an unconnected port
        # is a fatal error (BaseCache::init).
        walkers = bool(type(cores[0].get_mmu()).walkerPorts())
        if walkers:
            self.iptw_caches = [MMUCache(size=WALK_CACHE_SIZE) for _ in range(n)]
            self.dptw_caches = [MMUCache(size=WALK_CACHE_SIZE) for _ in range(n)]
        if p.bus_lock is not None:
            # trapline's gem5 change bus-lock: between each core and its L1D, a port that
            # finds the second half of a split locked RMW and locks the board's bus
            from m5.objects import BusLock, BusLockPort
            self.bus_lock = BusLock(hold=p.bus_lock.hold)
            self.bus_lock_ports = [BusLockPort(bus=self.bus_lock, core=i) for i in range(n)]
        if OVERLAP_STATS_CHANGE in p.changes:
            # trapline's gem5 change overlap-stats: each core's L1D's primary misses and those overlapped
            from m5.objects import MissOverlap
            self.miss_overlaps = [MissOverlap(cache=c) for c in self.l1dcaches]
        for i, core in enumerate(cores):
            # the bus this core's L1s (and page-walk caches) send their misses to
            l1_bus = self.membus if p.l2 is None else self.l2buses[0 if shared_l2 else i]
            core.connect_icache(self.l1icaches[i].cpu_side)
            if p.bus_lock is not None:
                core.connect_dcache(self.bus_lock_ports[i].cpu_side_port)
                self.bus_lock_ports[i].mem_side_port = self.l1dcaches[i].cpu_side
            else:
                core.connect_dcache(self.l1dcaches[i].cpu_side)
            self.l1icaches[i].mem_side = l1_bus.cpu_side_ports
            self.l1dcaches[i].mem_side = l1_bus.cpu_side_ports
            if walkers:
                self.iptw_caches[i].mem_side = l1_bus.cpu_side_ports
                self.dptw_caches[i].mem_side = l1_bus.cpu_side_ports
                core.connect_walker_ports(self.iptw_caches[i].cpu_side, self.dptw_caches[i].cpu_side)
            if board.get_processor().get_isa() == ISA.X86:
                core.connect_interrupt(self.membus.mem_side_ports, self.membus.cpu_side_ports)
            else:
                core.connect_interrupt()
