"""What a gem5 binary is: its version, ISAs and Ruby protocol, as one JSON line.

    gem5 -q gem5_configs/probe.py      ->  TRAPLINE-PROBE {"version": "24.0.0.1", "isas": ["SPARC", "X86"], ...}

Run by trapline.platforms.gem5.binary.facts (about 0.2 s, cached by the binary's sha256):
``gem5.opt --version`` does not exist and ``-B`` fails in v24 ("module
'm5.defines' has no attribute 'gem5Version'"), but the embedded Python knows.

gem5 API used here, checked against the gem5 sources (v24):

    _m5.core.gem5Version    src/python/pybind11/core.cc (m_core.attr("gem5Version"))
    get_supported_isas      src/python/gem5/runtime.py (the ISAs compiled in, as gem5.isas.ISA)
    m5.defines.buildEnv     the build's configuration (PROTOCOL: the Ruby protocol, "" without Ruby)
    m5.trapline_build       only in trapline's gem5 (trapline/platforms/gem5/from_source.py):
                            CHANGES_SHA256, CHANGES (the changes it was built with), RELEASE
"""

import json

from _m5 import core
from gem5.runtime import get_supported_isas
from m5 import defines

MARK = "TRAPLINE-PROBE "


def trapline_build():
    """Which of trapline's changes this gem5 has (None: a stock gem5)."""
    try:
        from m5 import trapline_build as tb
    except ImportError:
        return None
    return {"changes_sha256": tb.CHANGES_SHA256, "changes": list(tb.CHANGES), "release": tb.RELEASE}


# gem5 runs a config script with __name__ == "__m5_main__" (src/python/m5/main.py).
if __name__ in ("__m5_main__", "__main__"):
    print(MARK + json.dumps({"version": core.gem5Version,
                             "isas": sorted(i.name for i in get_supported_isas()),
                             "protocol": defines.buildEnv.get("PROTOCOL", ""),
                             "trapline": trapline_build()}), flush=True)
