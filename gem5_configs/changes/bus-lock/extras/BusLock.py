# trapline's gem5 change bus-lock (gem5_configs/changes/bus-lock/README.md).
from m5.objects.SimObject import SimObject
from m5.params import *


class BusLock(SimObject):
    """The bus of a board, which a locked read-modify-write that straddles two
    cache lines locks: every other core's memory traffic waits until it is
    released."""

    type = "BusLock"
    cxx_header = "bus-lock/bus_lock.hh"
    cxx_class = "gem5::trapline::BusLock"

    hold = Param.Latency(
        "0ns",
        "how long a split locked read-modify-write holds the bus (trapline: "
        "the machine's atomics.split_lock_cost)",
    )


class BusLockPort(SimObject):
    """Between one core and its L1 data cache: finds the second half of a
    split locked read-modify-write (a second locked read before the first
    one's write), locks the bus for it, and holds this core's requests while
    another core holds the bus. Every other request passes straight through,
    in the same call (no queue, no event), so a core's timing is as without
    it unless a bus lock is involved."""

    type = "BusLockPort"
    cxx_header = "bus-lock/bus_lock.hh"
    cxx_class = "gem5::trapline::BusLockPort"

    cpu_side_port = ResponsePort("the core's data port")
    mem_side_port = RequestPort("the L1 data cache's CPU-side port")
    bus = Param.BusLock("the board's bus")
    core = Param.Int("the number of the core whose data requests pass here")
