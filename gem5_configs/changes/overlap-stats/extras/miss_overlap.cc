/*
 * trapline's gem5 change overlap-stats: see miss_overlap.hh.
 */
#include "overlap-stats/miss_overlap.hh"

namespace gem5
{
namespace trapline
{

MissOverlap::MissOverlap(const MissOverlapParams &p)
    : SimObject(p), cache(p.cache), blkSize(p.cache->getBlockSize()), stats(this)
{
}

MissOverlap::Stats::Stats(statistics::Group *parent)
    : statistics::Group(parent),
      ADD_STAT(primaryMisses, statistics::units::Count::get(),
               "demand misses to a line no earlier demand miss is waiting for"),
      ADD_STAT(overlapped, statistics::units::Count::get(),
               "of them, made while another was still waiting for its line")
{
}

void
MissOverlap::regProbeListeners()
{
    listeners.emplace_back(new ProbeListenerArgFunc<CacheAccessProbeArg>(
        cache->getProbeManager(), "Miss", [this](const CacheAccessProbeArg &a) { miss(a); }));
    listeners.emplace_back(new ProbeListenerArgFunc<CacheAccessProbeArg>(
        cache->getProbeManager(), "Fill", [this](const CacheAccessProbeArg &a) { fill(a); }));
}

void
MissOverlap::miss(const CacheAccessProbeArg &arg)
{
    const PacketPtr pkt = arg.pkt;
    if (pkt->req->isUncacheable() || pkt->isWriteback() || pkt->isCleanEviction())
        return;
    const Addr line = pkt->getBlockAddr(blkSize);
    if (outstanding.count(line))
        return; // a line an earlier demand miss waits for
    stats.primaryMisses++;
    if (!outstanding.empty())
        stats.overlapped++;
    outstanding.insert(line);
}

void
MissOverlap::fill(const CacheAccessProbeArg &arg)
{
    outstanding.erase(arg.pkt->getBlockAddr(blkSize));
}

} // namespace trapline
} // namespace gem5
