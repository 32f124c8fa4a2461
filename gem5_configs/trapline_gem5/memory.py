"""TraplineMemory: main memory with a trapline machine's latency.

gem5 API used here, checked against the gem5 sources (v23/v24 stdlib):

    SingleChannelSimpleMemory   src/python/gem5/components/memory/simple.py
                                (latency, latency_var, bandwidth, size; an AbstractMemorySystem
                                around one m5.objects.SimpleMemory)
    SimpleMemory                src/mem/SimpleMemory.py (latency: "Request to response latency",
                                latency_var, bandwidth)
"""

from typing import Optional

from gem5.components.memory.simple import SingleChannelSimpleMemory

from .params import MemoryParams


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
