/*
 * trapline's gem5 change overlap-stats (gem5_configs/changes/overlap-stats/README.md): a cache's
 * primary demand misses and those made while another was outstanding, from its probe points.
 */
#ifndef __TRAPLINE_MISS_OVERLAP_HH__
#define __TRAPLINE_MISS_OVERLAP_HH__

#include <memory>
#include <unordered_set>
#include <vector>

#include "base/statistics.hh"
#include "mem/cache/base.hh"
#include "mem/cache/cache_probe_arg.hh"
#include "params/MissOverlap.hh"
#include "sim/probe/probe.hh"
#include "sim/sim_object.hh"

namespace gem5
{
namespace trapline
{

class MissOverlap : public SimObject
{
    BaseCache *cache;
    unsigned blkSize;
    std::unordered_set<Addr> outstanding; // lines a demand miss is waiting for
    std::vector<std::unique_ptr<ProbeListenerArgFunc<CacheAccessProbeArg>>> listeners;

    void miss(const CacheAccessProbeArg &arg);
    void fill(const CacheAccessProbeArg &arg);

    struct Stats : public statistics::Group
    {
        Stats(statistics::Group *parent);
        statistics::Scalar primaryMisses;
        statistics::Scalar overlapped;
    } stats;

  public:
    MissOverlap(const MissOverlapParams &p);
    void regProbeListeners() override;
};

} // namespace trapline
} // namespace gem5

#endif
