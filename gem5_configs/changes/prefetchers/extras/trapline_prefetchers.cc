/*
 * trapline's gem5 change prefetchers: see trapline_prefetchers.hh.
 */
#include "prefetchers/trapline_prefetchers.hh"

#include "params/AdjacentLinePrefetcher.hh"
#include "params/StreamPrefetcher.hh"

namespace gem5
{
namespace trapline
{

StreamPrefetcher::StreamPrefetcher(const StreamPrefetcherParams &p)
    : Queued(p), degree(p.degree), distance(p.distance), table(p.streams > 0 ? p.streams : 1)
{
}

void
StreamPrefetcher::calculatePrefetch(const PrefetchInfo &pfi, std::vector<AddrPriority> &addresses,
                                    const CacheAccessor &cache)
{
    const int64_t line = (int64_t)(pfi.getAddr() / blkSize);
    const Addr page = pfi.getAddr() / pageBytes;
    Stream *e = nullptr, *victim = &table[0];
    for (auto &s : table) {
        if (s.valid && s.page == page) {
            e = &s;
            break;
        }
        if (!s.valid || s.tick < victim->tick)
            victim = &s;
    }
    ticks++;
    if (!e) { // a new page: its first access starts nothing
        *victim = Stream();
        victim->valid = true;
        victim->page = page;
        victim->tick = ticks;
        victim->last = victim->frontier = line;
        return;
    }
    e->tick = ticks;
    const int64_t d = line - e->last;
    if (d == 0)
        return;
    const int dir = d > 0 ? 1 : -1;
    e->last = line;
    if (dir != e->dir) { // a stream once two steps in a row go one way: none yet
        e->dir = dir;
        e->frontier = line;
        return;
    }
    if ((e->frontier - line) * dir < 0)
        e->frontier = line;
    for (int k = 0; k < degree; k++) {
        const int64_t x = e->frontier + dir;
        if ((x - line) * dir > distance || x < 0)
            break;
        if ((Addr)x * blkSize / pageBytes != page) // the page only (Queued drops the rest anyway)
            break;
        addresses.push_back(AddrPriority((Addr)x * blkSize, 0));
        e->frontier = x;
    }
}

AdjacentLinePrefetcher::AdjacentLinePrefetcher(const AdjacentLinePrefetcherParams &p)
    : Queued(p), degree(p.degree)
{
}

void
AdjacentLinePrefetcher::calculatePrefetch(const PrefetchInfo &pfi, std::vector<AddrPriority> &addresses,
                                          const CacheAccessor &cache)
{
    if (degree > 0)
        addresses.push_back(AddrPriority(blockAddress(pfi.getAddr()) ^ (Addr)blkSize, 0));
}

} // namespace trapline
} // namespace gem5
