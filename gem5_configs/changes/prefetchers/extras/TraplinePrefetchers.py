# trapline's gem5 change prefetchers (gem5_configs/changes/prefetchers/README.md): the timing
# model's stream and adjacent-line prefetchers (model/plugin/timing.c) as gem5 queued prefetchers.
from m5.objects.Prefetcher import QueuedPrefetcher
from m5.params import *


class StreamPrefetcher(QueuedPrefetcher):
    """Per page, accesses in one direction make a stream (two steps in a row the same way); each
    access of a stream asks for up to
    `degree` lines beyond the furthest it asked for, never more than `distance` lines ahead of the
    access, and never out of the page. `streams` pages are tracked (least recently used
    replaced). trapline sets prefetch_on_access: it hears every access of its cache, as Intel's
    L2 streamer watches every L1 request."""

    type = "StreamPrefetcher"
    cxx_class = "gem5::trapline::StreamPrefetcher"
    cxx_header = "prefetchers/trapline_prefetchers.hh"

    degree = Param.Int(2, "lines asked for per access of a stream")
    distance = Param.Int(20, "the most lines ahead of the access a stream runs")
    streams = Param.Int(32, "streams (pages) tracked at once")


class AdjacentLinePrefetcher(QueuedPrefetcher):
    """The other line of the aligned pair of lines (Intel's L2 spatial prefetcher: 128-byte
    pairs). trapline sets on_miss: on a miss only."""

    type = "AdjacentLinePrefetcher"
    cxx_class = "gem5::trapline::AdjacentLinePrefetcher"
    cxx_header = "prefetchers/trapline_prefetchers.hh"

    degree = Param.Int(1, "1: the pair line (0: none)")
