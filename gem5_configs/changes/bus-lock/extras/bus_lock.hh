/*
 * trapline's gem5 change bus-lock (gem5_configs/changes/bus-lock/README.md):
 * the bus lock that x86 takes for a locked read-modify-write whose operand
 * straddles two cache lines. Stock gem5 splits such an access into two
 * packets and its classic caches lock each line on their own
 * (src/mem/cache/base.cc), so nothing holds the other cores and the access
 * costs about what two in-line locked accesses cost.
 */

#ifndef __TRAPLINE_BUS_LOCK_HH__
#define __TRAPLINE_BUS_LOCK_HH__

#include "base/statistics.hh"
#include "mem/port.hh"
#include "params/BusLock.hh"
#include "params/BusLockPort.hh"
#include "sim/eventq.hh"
#include "sim/sim_object.hh"

namespace gem5
{

namespace trapline
{

class BusLock : public SimObject
{
  public:
    PARAMS(BusLock);
    BusLock(const Params &p);

    /** Core `core` locks the bus from now; returns when it is released. */
    Tick lock(int core);

    /** How long a request of core `core` that arrives now waits for the
     *  bus (0 when no other core holds it). */
    Tick wait(int core);

  private:
    const Tick hold;
    Tick until = 0;
    int owner = -1;

    struct BusLockStats : public statistics::Group
    {
        BusLockStats(statistics::Group *parent);
        statistics::Scalar locks;
        statistics::Scalar heldTicks;
        statistics::Scalar waits;
        statistics::Scalar waitTicks;
    } stats;
};

class BusLockPort : public SimObject
{
  public:
    PARAMS(BusLockPort);
    BusLockPort(const Params &p);

    Port &getPort(const std::string &if_name,
                  PortID idx=InvalidPortID) override;
    void init() override;

  private:
    class CpuSidePort : public ResponsePort
    {
      public:
        CpuSidePort(const std::string &name, BusLockPort &owner)
            : ResponsePort(name), owner(owner) {}
      protected:
        bool recvTimingReq(PacketPtr pkt) override
        { return owner.recvTimingReq(pkt); }
        bool recvTimingSnoopResp(PacketPtr pkt) override
        { return owner.memSidePort.sendTimingSnoopResp(pkt); }
        bool tryTiming(PacketPtr pkt) override
        { return owner.memSidePort.tryTiming(pkt); }
        void recvRespRetry() override { owner.memSidePort.sendRetryResp(); }
        Tick recvAtomic(PacketPtr pkt) override
        { return owner.recvAtomic(pkt); }
        void recvFunctional(PacketPtr pkt) override
        { owner.memSidePort.sendFunctional(pkt); }
        AddrRangeList getAddrRanges() const override
        { return owner.memSidePort.getAddrRanges(); }
      private:
        BusLockPort &owner;
    };

    class MemSidePort : public RequestPort
    {
      public:
        MemSidePort(const std::string &name, BusLockPort &owner)
            : RequestPort(name), owner(owner) {}
      protected:
        bool recvTimingResp(PacketPtr pkt) override
        { return owner.cpuSidePort.sendTimingResp(pkt); }
        void recvTimingSnoopReq(PacketPtr pkt) override
        { owner.cpuSidePort.sendTimingSnoopReq(pkt); }
        void recvReqRetry() override { owner.recvReqRetry(); }
        void recvRetrySnoopResp() override
        { owner.cpuSidePort.sendRetrySnoopResp(); }
        Tick recvAtomicSnoop(PacketPtr pkt) override
        { return owner.cpuSidePort.sendAtomicSnoop(pkt); }
        void recvFunctionalSnoop(PacketPtr pkt) override
        { owner.cpuSidePort.sendFunctionalSnoop(pkt); }
        void recvRangeChange() override { owner.cpuSidePort.sendRangeChange(); }
        bool isSnooping() const override
        { return owner.cpuSidePort.isSnooping(); }
      private:
        BusLockPort &owner;
    };

    /** What a data request is to the bus lock. */
    enum class Kind { Plain, FirstHalf, SecondHalf, LockedWrite };
    Kind classify(PacketPtr pkt) const;
    /** Counts a request of kind k as accepted. */
    void account(Kind k);

    bool recvTimingReq(PacketPtr pkt);
    Tick recvAtomic(PacketPtr pkt);
    void recvReqRetry();
    void sendHeld();

    CpuSidePort cpuSidePort;
    MemSidePort memSidePort;
    BusLock *bus;
    const int core;
    /** Locked reads of this core not yet followed by their locked write. */
    int lockedReadsOpen = 0;
    /** A request held for the bus lock (or, past its time, for the cache). */
    PacketPtr held = nullptr;
    /** The core was refused while a request was held: it waits for a retry. */
    bool coreWaits = false;
    EventFunctionWrapper releaseEvent;

    struct PortStats : public statistics::Group
    {
        PortStats(statistics::Group *parent);
        statistics::Scalar splits;
    } stats;
};

} // namespace trapline
} // namespace gem5

#endif // __TRAPLINE_BUS_LOCK_HH__
