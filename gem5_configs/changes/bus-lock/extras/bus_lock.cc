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
    : SimObject(p),
      cpuSidePort(name() + ".cpu_side_port", *this),
      memSidePort(name() + ".mem_side_port", *this),
      bus(p.bus), core(p.core),
      releaseEvent([this] { sendHeld(); }, name() + ".release"),
      stats(this)
{
}

BusLockPort::PortStats::PortStats(statistics::Group *parent)
    : statistics::Group(parent),
      ADD_STAT(splits, statistics::units::Count::get(),
               "locked read-modify-writes that straddle two cache lines")
{
}

Port &
BusLockPort::getPort(const std::string &if_name, PortID idx)
{
    if (if_name == "cpu_side_port")
        return cpuSidePort;
    if (if_name == "mem_side_port")
        return memSidePort;
    return SimObject::getPort(if_name, idx);
}

void
BusLockPort::init()
{
    if (!cpuSidePort.isConnected() || !memSidePort.isConnected())
        fatal("BusLockPort %s: both ports must be connected", name());
    cpuSidePort.sendRangeChange();
}

BusLockPort::Kind
BusLockPort::classify(PacketPtr pkt) const
{
    if (pkt->req->isLockedRMW()) {
        // A second locked read before the first one's write: the two halves
        // of one locked access that straddles two lines (x86 locked
        // instructions are serialising, so two locked operations never
        // overlap otherwise). The first half has locked its line already.
        if (pkt->isRead())
            return lockedReadsOpen > 0 ? Kind::SecondHalf : Kind::FirstHalf;
        if (pkt->isWrite() && lockedReadsOpen > 0)
            return Kind::LockedWrite;
    }
    return Kind::Plain;
}

void
BusLockPort::account(Kind k)
{
    if (k == Kind::FirstHalf || k == Kind::SecondHalf)
        lockedReadsOpen++;
    else if (k == Kind::LockedWrite)
        lockedReadsOpen--;
    if (k == Kind::SecondHalf)
        stats.splits++;
}

bool
BusLockPort::recvTimingReq(PacketPtr pkt)
{
    if (held) {
        coreWaits = true;
        return false;
    }
    const Kind k = classify(pkt);
    const Tick wait = k == Kind::SecondHalf ? 0 : bus->wait(core);
    if (k != Kind::SecondHalf && wait == 0) {
        // the common case: straight through, refused as the cache refuses
        if (!memSidePort.sendTimingReq(pkt))
            return false;
        account(k);
        return true;
    }
    // the second half locks the bus and goes when it is released; any other
    // request waits for another core's lock
    const Tick when = k == Kind::SecondHalf ? bus->lock(core)
                                            : curTick() + wait;
    account(k);
    held = pkt;
    schedule(releaseEvent, when);
    return true;
}

void
BusLockPort::sendHeld()
{
    if (!memSidePort.sendTimingReq(held))
        return;  // the cache refused: recvReqRetry sends it again
    held = nullptr;
    if (coreWaits) {
        coreWaits = false;
        cpuSidePort.sendRetryReq();
    }
}

void
BusLockPort::recvReqRetry()
{
    if (held) {
        if (!releaseEvent.scheduled())
            sendHeld();
    } else {
        cpuSidePort.sendRetryReq();
    }
}

Tick
BusLockPort::recvAtomic(PacketPtr pkt)
{
    const Kind k = classify(pkt);
    const Tick delay = k == Kind::SecondHalf ? bus->lock(core) - curTick()
                                             : bus->wait(core);
    account(k);
    return delay + memSidePort.sendAtomic(pkt);
}

} // namespace trapline
} // namespace gem5
