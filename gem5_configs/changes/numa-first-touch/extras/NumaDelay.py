# trapline's gem5 change numa-first-touch (gem5_configs/changes/numa-first-touch/README.md).
from m5.objects.MemDelay import MemDelay
from m5.params import *


class NumaDelay(MemDelay):
    """In front of the memory of one NUMA node: a request from a context on
    another node waits that node's extra latency to this one; counts the
    requests by the node they come from and the pages they touch."""

    type = "NumaDelay"
    cxx_header = "numa-first-touch/numa_delay.hh"
    cxx_class = "gem5::trapline::NumaDelay"

    node = Param.Int("the NUMA node of the memory behind this port")
    node_of_context = VectorParam.Int(
        "the node of each context id (a core's hardware thread)"
    )
    extra = VectorParam.Latency(
        "added to a request from a context on node i: node i's latency to "
        "this memory less this node's own (0 for this node)"
    )
    page_bytes = Param.MemorySize("4KiB", "the page size pages are counted by")
