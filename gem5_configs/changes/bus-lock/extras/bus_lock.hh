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
#include "mem/mem_delay.hh"
#include "params/BusLock.hh"
#include "params/BusLockPort.hh"
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

class BusLockPort : public MemDelay
{
  public:
    PARAMS(BusLockPort);
    BusLockPort(const Params &p);

  protected:
    Tick delayReq(PacketPtr pkt) override;

  private:
    BusLock *bus;
    const int core;
    /** Locked reads of this core not yet followed by their locked write. */
    int lockedReadsOpen = 0;

    struct PortStats : public statistics::Group
    {
        PortStats(statistics::Group *parent);
        statistics::Scalar splits;
    } stats;
};

} // namespace trapline
} // namespace gem5

#endif // __TRAPLINE_BUS_LOCK_HH__
