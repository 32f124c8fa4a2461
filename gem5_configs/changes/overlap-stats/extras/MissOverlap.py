# trapline's gem5 change overlap-stats (gem5_configs/changes/overlap-stats/README.md).
from m5.objects.SimObject import SimObject
from m5.params import *


class MissOverlap(SimObject):
    """Beside one cache: counts its demand misses to a line not already missed (primary misses)
    and those of them made while another was still being filled (misses overlapped), from the
    cache's Miss and Fill probe points. The timing model counts the same (its
    misses_overlapped), so the two simulators' memory-level parallelism can be set side by side."""

    type = "MissOverlap"
    cxx_header = "overlap-stats/miss_overlap.hh"
    cxx_class = "gem5::trapline::MissOverlap"

    cache = Param.BaseCache("the cache whose misses are counted")
