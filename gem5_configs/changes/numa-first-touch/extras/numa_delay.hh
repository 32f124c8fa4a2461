/*
 * trapline's gem5 change numa-first-touch
 * (gem5_configs/changes/numa-first-touch/README.md): the remote latency of
 * a NUMA node's memory. Classic coherence needs a tree of crossbars, so a
 * board cannot have one crossbar per socket; this delay in front of each
 * node's memory charges a request by the node of the context it comes from.
 */

#ifndef __TRAPLINE_NUMA_DELAY_HH__
#define __TRAPLINE_NUMA_DELAY_HH__

#include <unordered_set>
#include <vector>

#include "base/statistics.hh"
#include "mem/mem_delay.hh"
#include "params/NumaDelay.hh"

namespace gem5
{

namespace trapline
{

class NumaDelay : public MemDelay
{
  public:
    PARAMS(NumaDelay);
    NumaDelay(const Params &p);

    /** The statistics start again (m5_reset_stats): so does the set of
     *  pages seen, so that `pages` counts a region's own pages. */
    void resetStats() override;

  protected:
    Tick delayReq(PacketPtr pkt) override;

  private:
    const int node;
    const std::vector<int> nodeOfContext;
    std::vector<Tick> extra;
    const Addr pageMask;
    std::unordered_set<Addr> pagesSeen;

    struct NumaStats : public statistics::Group
    {
        NumaStats(statistics::Group *parent, int nodes);
        statistics::Vector requests;
        statistics::Scalar local;
        statistics::Scalar remote;
        statistics::Scalar unattributed;
        statistics::Scalar pages;
    } stats;
};

} // namespace trapline
} // namespace gem5

#endif // __TRAPLINE_NUMA_DELAY_HH__
