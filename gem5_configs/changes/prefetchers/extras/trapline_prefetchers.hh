/*
 * trapline's gem5 change prefetchers (gem5_configs/changes/prefetchers/README.md): the timing
 * model's stream and adjacent-line prefetchers (model/plugin/timing.c, stream() and the
 * adjacent-line case of train()) as gem5 queued prefetchers, so that both simulators run the
 * algorithm a machine names.
 */
#ifndef __TRAPLINE_PREFETCHERS_HH__
#define __TRAPLINE_PREFETCHERS_HH__

#include <cstdint>
#include <vector>

#include "mem/cache/prefetch/queued.hh"

namespace gem5
{

struct StreamPrefetcherParams;
struct AdjacentLinePrefetcherParams;

namespace trapline
{

class StreamPrefetcher : public prefetch::Queued
{
    struct Stream
    {
        bool valid = false;
        Addr page = 0;
        uint64_t tick = 0;
        int64_t last = 0, frontier = 0; // line numbers
        int dir = 0;
    };
    const int degree, distance;
    std::vector<Stream> table;
    uint64_t ticks = 0;

  public:
    StreamPrefetcher(const StreamPrefetcherParams &p);
    void calculatePrefetch(const PrefetchInfo &pfi, std::vector<AddrPriority> &addresses,
                           const CacheAccessor &cache) override;
};

class AdjacentLinePrefetcher : public prefetch::Queued
{
    const int degree;

  public:
    AdjacentLinePrefetcher(const AdjacentLinePrefetcherParams &p);
    void calculatePrefetch(const PrefetchInfo &pfi, std::vector<AddrPriority> &addresses,
                           const CacheAccessor &cache) override;
};

} // namespace trapline
} // namespace gem5

#endif
