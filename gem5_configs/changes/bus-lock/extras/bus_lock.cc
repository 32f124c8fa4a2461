/*
 * trapline's gem5 change bus-lock (gem5_configs/changes/bus-lock/README.md).
 */

#include "bus-lock/bus_lock.hh"

#include <algorithm>

#include "mem/packet.hh"
#include "mem/request.hh"

namespace gem5
{

namespace trapline
{

BusLock::BusLock(const Params &p)
    : SimObject(p), hold(p.hold), stats(this)
{
}

BusLock::BusLockStats::BusLockStats(statistics::Group *parent)
    : statistics::Group(parent),
      ADD_STAT(locks, statistics::units::Count::get(),
               "bus locks: locked read-modify-writes that straddle two "
               "cache lines"),
      ADD_STAT(heldTicks, statistics::units::Tick::get(),
               "time the bus was held locked"),
      ADD_STAT(waits, statistics::units::Count::get(),
               "requests of other cores that waited for a bus lock"),
      ADD_STAT(waitTicks, statistics::units::Tick::get(),
               "time those requests waited")
{
}

Tick
BusLock::lock(int core)
{
    // a lock taken while another is held waits for it
    const Tick from = std::max(curTick(), until);
    until = from + hold;
    owner = core;
    stats.locks++;
    stats.heldTicks += hold;
    return until;
}

Tick
BusLock::wait(int core)
{
    if (core == owner || until <= curTick())
        return 0;
    stats.waits++;
    stats.waitTicks += until - curTick();
    return until - curTick();
}

BusLockPort::BusLockPort(const Params &p)
    : MemDelay(p), bus(p.bus), core(p.core), stats(this)
{
}

BusLockPort::PortStats::PortStats(statistics::Group *parent)
    : statistics::Group(parent),
      ADD_STAT(splits, statistics::units::Count::get(),
               "locked read-modify-writes that straddle two cache lines")
{
}

Tick
BusLockPort::delayReq(PacketPtr pkt)
{
    if (pkt->req->isLockedRMW()) {
        if (pkt->isRead()) {
            // A second locked read before the first one's write: the two
            // halves of one locked access that straddles two lines (x86
            // locked instructions are serialising, so two locked
            // operations never overlap otherwise). The second half waits
            // for the bus lock; the first has locked its line already.
            const bool second_half = lockedReadsOpen > 0;
            lockedReadsOpen++;
            if (second_half) {
                stats.splits++;
                return bus->lock(core) - curTick();
            }
        } else if (pkt->isWrite() && lockedReadsOpen > 0) {
            lockedReadsOpen--;
        }
    }
    return bus->wait(core);
}

} // namespace trapline
} // namespace gem5
