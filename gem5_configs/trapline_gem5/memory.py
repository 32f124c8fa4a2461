"""TraplineMemory: main memory with a trapline machine's latency.

gem5 API used here, checked against the gem5 sources (v23/v24 stdlib):

    SingleChannelSimpleMemory   src/python/gem5/components/memory/simple.py
                                (latency, latency_var, bandwidth, size; an AbstractMemorySystem
                                around one m5.objects.SimpleMemory)
    SimpleMemory                src/mem/SimpleMemory.py (latency: "Request to response latency",
                                latency_var, bandwidth)
"""

from typing import List, Optional

from m5.objects import AddrRange, SimpleMemory
from m5.util.convert import toMemorySize

from gem5.components.memory.abstract_memory_system import AbstractMemorySystem
from gem5.components.memory.simple import SingleChannelSimpleMemory
from gem5.utils.override import overrides

from .params import MemoryParams, NUMAParams


class TraplineMemory(SingleChannelSimpleMemory):
    """One SimpleMemory whose request-to-response latency is what remains of the
    machine's DRAM load-to-use after the cache path, so that an isolated load
    that misses every cache costs about memory.latency.

    Example (x86-2012-server, 90 ns at 2.6 GHz = 234 cycles, of which the caches
    and buses take 24): latency "80769ps", latency_var "0ns", bandwidth
    "12.8GiB/s" (SimpleMemory's default), size "512MiB".
    """

    def __init__(self, params: MemoryParams, size: Optional[str] = None) -> None:
        """
        :param params: ``Gem5Params.memory``: latency ("80769ps"), latency_var ("0ns"),
            bandwidth ("12.8GiB/s") and the default size ("512MiB").
        :param size: the simulated memory size, overriding params.size (e.g. "2GiB").
        """
        super().__init__(
            latency=params.latency,
            latency_var=params.latency_var,
            bandwidth=params.bandwidth,
            size=size or params.size,
        )


class TraplineNumaMemory(AbstractMemorySystem):
    """One SimpleMemory per NUMA node, each on its own address range (so gem5's SE
    mode makes each a memory pool of its own), with a NumaDelay in front of each
    that charges a request from a core on another node that node's extra latency.
    Needs trapline's gem5 (change numa-first-touch: NumaDelay, and
    SEWorkload.first_touch_pools, which TraplineBoard sets).

    Example (x86-2012-server, two cores): two memories of "512MiB" with the local
    latency "80769ps", at [0, 512MiB) and [512MiB, 1GiB); node_of_context [0, 1];
    a request from core 1 to node 0's memory waits a further "30000ps" (120 - 90 ns).

    gem5 API used here (v24 stdlib): AbstractMemorySystem
    (src/python/gem5/components/memory/abstract_memory_system.py: incorporate_memory,
    get_mem_ports, get_memory_controllers, get_size, set_memory_range); SimpleMemory
    and AddrRange (m5.objects); toMemorySize (m5.util.convert); MemDelay's ports
    (src/mem/MemDelay.py: cpu_side_port, mem_side_port).
    """

    def __init__(self, params: MemoryParams, numa: NUMAParams, node_of_context: List[int],
                 page_bytes: int, size: Optional[str] = None) -> None:
        """
        :param params: ``Gem5Params.memory`` (the local latency and the bandwidth).
        :param numa: ``Gem5Params.numa`` with ``applied`` (extra_ps[i][n]: node i to node n).
        :param node_of_context: the node of each core (context id), e.g. [0, 1].
        :param page_bytes: the ISA's page size, by which the delays count pages.
        :param size: each node's memory size (default params.size).
        """
        super().__init__()
        from m5.objects import NumaDelay  # trapline's gem5 only (gem5_configs/changes/numa-first-touch)

        self._node_bytes = toMemorySize(size or params.size)
        self._nodes = numa.nodes
        self.modules = [SimpleMemory(latency=params.latency, latency_var=params.latency_var,
                                     bandwidth=params.bandwidth) for _ in range(numa.nodes)]
        self.numa_delays = [NumaDelay(node=n, node_of_context=list(node_of_context),
                                      extra=[f"{numa.extra_ps[i][n]}ps" for i in range(numa.nodes)],
                                      page_bytes=f"{page_bytes}B") for n in range(numa.nodes)]
        for delay, module in zip(self.numa_delays, self.modules):
            delay.mem_side_port = module.port

    @overrides(AbstractMemorySystem)
    def incorporate_memory(self, board) -> None:
        pass

    @overrides(AbstractMemorySystem)
    def get_mem_ports(self):
        return [(m.range, d.cpu_side_port) for m, d in zip(self.modules, self.numa_delays)]

    @overrides(AbstractMemorySystem)
    def get_memory_controllers(self):
        return list(self.modules)

    @overrides(AbstractMemorySystem)
    def get_size(self) -> int:
        return self._node_bytes * self._nodes

    @overrides(AbstractMemorySystem)
    def set_memory_range(self, ranges: List[AddrRange]) -> None:
        if len(ranges) != 1 or ranges[0].size() != self.get_size():
            raise Exception("TraplineNumaMemory takes one range of its whole size and splits it by node")
        start = ranges[0].start.value if hasattr(ranges[0].start, "value") else int(ranges[0].start)
        for n, module in enumerate(self.modules):
            module.range = AddrRange(start + n * self._node_bytes, size=self._node_bytes)
