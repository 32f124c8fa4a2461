/*
 * trapline's gem5 change numa-first-touch
 * (gem5_configs/changes/numa-first-touch/README.md).
 */

#include "numa-first-touch/numa_delay.hh"

#include "base/logging.hh"
#include "mem/packet.hh"
#include "mem/request.hh"

namespace gem5
{

namespace trapline
{

NumaDelay::NumaDelay(const Params &p)
    : MemDelay(p), node(p.node), nodeOfContext(p.node_of_context),
      extra(p.extra.begin(), p.extra.end()), pageMask(~(p.page_bytes - 1)),
      stats(this, p.extra.size())
{
    fatal_if(node < 0 || node >= (int)extra.size(),
             "%s: node %d, but extra has %d entries (one per node)",
             name(), node, extra.size());
    for (int n : nodeOfContext) {
        fatal_if(n < 0 || n >= (int)extra.size(),
                 "%s: node_of_context names node %d of %d", name(), n,
                 extra.size());
    }
}

NumaDelay::NumaStats::NumaStats(statistics::Group *parent, int nodes)
    : statistics::Group(parent),
      ADD_STAT(requests, statistics::units::Count::get(),
               "requests by the node of the context they come from"),
      ADD_STAT(local, statistics::units::Count::get(),
               "requests from this node"),
      ADD_STAT(remote, statistics::units::Count::get(),
               "requests from another node (delayed)"),
      ADD_STAT(unattributed, statistics::units::Count::get(),
               "requests with no context (writebacks, prefetches, walks): "
               "taken as local"),
      ADD_STAT(pages, statistics::units::Count::get(),
               "distinct pages of this node's memory requested since the "
               "statistics were last reset")
{
    requests.init(nodes);
}

void
NumaDelay::resetStats()
{
    MemDelay::resetStats();
    pagesSeen.clear();
}

Tick
NumaDelay::delayReq(PacketPtr pkt)
{
    int from = node;
    if (pkt->req->hasContextId()) {
        const ContextID id = pkt->req->contextId();
        if (id >= 0 && id < (ContextID)nodeOfContext.size())
            from = nodeOfContext[id];
    } else {
        stats.unattributed++;
    }
    stats.requests[from]++;
    if (from == node)
        stats.local++;
    else
        stats.remote++;
    if (pagesSeen.insert(pkt->getAddr() & pageMask).second)
        stats.pages++;
    return extra[from];
}

} // namespace trapline
} // namespace gem5
