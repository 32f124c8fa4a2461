"""TraplineBoard: a SimpleBoard (SE mode) for one trapline machine.

gem5 API used here, checked against the gem5 sources (v23/v24 stdlib):

    SimpleBoard         src/python/gem5/components/boards/simple_board.py
                        (clk_freq, processor, memory, cache_hierarchy; SE mode only;
                        set_se_binary_workload from se_binary_workload.py)
    System.cache_line_size
                        src/sim/System.py (Param.Unsigned(64, "Cache line size in bytes")); the
                        board is a System, and every classic cache takes its block size from it
                        (BaseTags.block_size = Parent.cache_line_size, src/mem/cache/tags/Tags.py)
    SimpleProcessor     src/python/gem5/components/processors/simple_processor.py
                        (cpu_type, num_cores, isa)
    CPUTypes            src/python/gem5/components/processors/cpu_types.py (TIMING, MINOR, O3)
    ISA                 src/python/gem5/isas.py (X86, SPARC, ARM)
    core.get_mmu(), core.get_simobject()
                        src/python/gem5/components/processors/base_cpu_core.py
    fetchBufferSize     src/cpu/o3/BaseO3CPU.py (Param.Unsigned(64, "Fetch buffer size in bytes"))
    mmu.itb / mmu.dtb   src/arch/generic/BaseMMU.py; their ``size``: src/arch/x86/X86TLB.py,
                        src/arch/sparc/SparcTLB.py, src/arch/arm/ArmTLB.py
    mmu.l2_shared       src/arch/arm/ArmMMU.py (ARM's shared second-level TLB)
    warn                m5.util (as imported by simple_processor.py)
"""

from typing import Optional

from m5.util import warn

from gem5.components.boards.simple_board import SimpleBoard
from gem5.components.processors.cpu_types import CPUTypes
from gem5.components.processors.simple_processor import SimpleProcessor
from gem5.isas import ISA

from .cache_hierarchy import TraplineCacheHierarchy
from .memory import TraplineMemory, TraplineNumaMemory
from .params import O3_FETCH_BUFFER, CoreParams, Gem5Params


class TraplineBoard(SimpleBoard):
    """The cores of a trapline machine (one by default), its caches and its memory, in SE mode.

    Example (ultrasparc-t1): clock "1.2GHz", ISA.SPARC, one TIMING core with
    64-entry instruction and data TLBs, 16-byte lines (the L1D's), L1I "16KiB"
    4-way, L1D "8KiB" 4-way, L2 "3MiB" 12-way, and a SimpleMemory.
    """

    def __init__(self, params: Gem5Params, cpu_type: CPUTypes = CPUTypes.TIMING,
                 mem_size: Optional[str] = None, num_cores: int = 1) -> None:
        """
        :param params: the machine (``Gem5Params.from_json(open("machine.json").read())``).
        :param cpu_type: CPUTypes.TIMING (not pipelined: every instruction waits for its
            fetch and its data access), CPUTypes.MINOR (in-order pipeline) or CPUTypes.O3.
        :param mem_size: simulated memory size (default params.memory.size, "512MiB").
        :param num_cores: cores of the processor, each with its private caches; in SE
            mode every thread of the program needs a core of its own (a thread
            created when every core is busy fails: pthread_create returns EAGAIN).
        """
        processor = SimpleProcessor(cpu_type=cpu_type, num_cores=num_cores, isa=ISA[params.isa])
        numa = params.numa if params.numa is not None and params.numa.applied else None
        if numa is not None:
            # trapline's gem5 change numa-first-touch: one memory per node
            memory = TraplineNumaMemory(params.memory, numa, numa.node_of_core(num_cores), params.tlb.page_bytes,
                                        size=mem_size)
        else:
            memory = TraplineMemory(params.memory, size=mem_size)
        super().__init__(
            clk_freq=params.clock,
            processor=processor,
            memory=memory,
            cache_hierarchy=TraplineCacheHierarchy(params, num_cores=num_cores),
        )
        self._trapline_params = params
        self._first_touch_pools = numa.node_of_core(num_cores) if numa is not None else None
        self.cache_line_size = params.cache_line_size
        for core in processor.get_cores():
            self._set_tlbs(core.get_mmu(), params)
            if params.prefetch is not None:
                # trapline's gem5 change sparc-prefetch (SparcISA parameters)
                for isa in core.get_simobject().isa:
                    isa.strong_prefetch = params.prefetch.strong
                    isa.strong_prefetch_trap_latency = params.prefetch.trap_latency
            if params.unaligned_trap is not None:
                # trapline's gem5 change sparc-unaligned-trap (a SparcISA parameter)
                for isa in core.get_simobject().isa:
                    isa.unaligned_trap_latency = params.unaligned_trap.latency
            if params.core is not None:
                self._set_core(core.get_simobject(), params.core, cpu_type)
            if cpu_type == CPUTypes.O3 and num_cores == 1 and params.isa == "X86":
                # x86's O3CPU (X86CPU.py: needsTSO = True) writes back one store at a time
                # (LSQUnit::writebackStores, src/cpu/o3/lsq_unit.cc: "(!needsTSO) || (!storeInFlight)"),
                # so a stream of stores that miss never overlaps: 116 cycles a store on x86-2012-server
                # where an x86 core fetches the lines of the stores in its store buffer together
                # (docs/gem5.md, "Stores"). One core cannot observe the order in which its own stores
                # reach the cache, so a one-core run writes them back as O3 does for other ISAs.
                core.get_simobject().needsTSO = False
            if cpu_type == CPUTypes.O3 and params.cache_line_size < O3_FETCH_BUFFER:
                # O3's fetch buffer (64 bytes) may not exceed a cache line: its fetch
                # stage stops with "fetch buffer size ... is greater than the cache
                # block size" (src/cpu/o3/fetch.cc) on 32- and 16-byte lines.
                core.get_simobject().fetchBufferSize = params.cache_line_size

    def set_se_binary_workload(self, *args, **kwargs) -> None:
        """SimpleBoard's, then (trapline's gem5 change numa-first-touch) the page placement:
        SEWorkload.first_touch_pools, the node of each core, so that a page comes from
        the memory pool of the node whose core touched it first."""
        super().set_se_binary_workload(*args, **kwargs)
        if self._first_touch_pools is not None:
            self.workload.first_touch_pools = self._first_touch_pools

    @staticmethod
    def _set_core(cpu, core: CoreParams, cpu_type: CPUTypes) -> None:
        """The machine's window on O3 (numROBEntries, LQEntries, SQEntries, src/cpu/o3/BaseO3CPU.py) and
        its store buffer on MinorCPU (executeLSQStoreBufferSize, src/cpu/minor/BaseMinorCPU.py)."""
        if cpu_type == CPUTypes.O3:
            for attr, param in (("rob", "numROBEntries"), ("lq", "LQEntries"), ("sq", "SQEntries")):
                if getattr(core, attr) is not None:
                    setattr(cpu, param, getattr(core, attr))
        elif cpu_type == CPUTypes.MINOR and core.minor_store_buffer is not None:
            cpu.executeLSQStoreBufferSize = core.minor_store_buffer

    @staticmethod
    def _set_tlbs(mmu, params: Gem5Params) -> None:
        """TLB entries: mmu.itb.size, mmu.dtb.size, and ARM's main TLB (mmu.l2_shared.size)."""
        mmu.itb.size = params.tlb.itb_size
        mmu.dtb.size = params.tlb.dtb_size
        if params.tlb.l2_size is not None:
            try:
                mmu.l2_shared.size = params.tlb.l2_size
            except AttributeError:
                warn(f"this gem5's {type(mmu).__name__} has no l2_shared TLB; "
                     f"tlb.stlb.entries ({params.tlb.l2_size}) is not applied")
