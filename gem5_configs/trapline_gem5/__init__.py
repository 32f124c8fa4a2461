"""trapline's machine descriptions for gem5's standard library.

A machine (gem5_configs/machines/<name>.yaml) is turned into a ``Gem5Params``
by ``params.py`` (pure Python, no gem5), written as JSON by
``python -m trapline.platforms.gem5 --machine NAME``, and read inside gem5 by
``gem5_configs/run_se.py``, which builds the board from the gem5-side classes:

    params.py            Gem5Params: every number gem5 needs, and notes on what it cannot model
    cache_hierarchy.py   TraplineCacheHierarchy (classic caches: L1I, L1D, optional L2 and L3)
    memory.py            TraplineMemory (a SimpleMemory with the machine's latency)
    board.py             TraplineBoard (a SimpleBoard with the clock, line size and TLB sizes)

This file imports nothing, so ``trapline_gem5.params`` can be imported where
gem5 is not installed. The gem5-side modules import gem5 and m5 and are only
importable inside gem5.
"""
