"""python -m trapline.platforms.gem5 [--machine M ...]: the machine as typed JSON for
gem5_configs/run_se.py (machine_json.main); python -m trapline.platforms.gem5 binary [PATH]:
the gem5 found and its facts (binary.main). One entry point, because the package imports
both modules (running either with -m would import it twice)."""

import sys

if sys.argv[1:2] == ["binary"]:
    from trapline.platforms.gem5.binary import main
    sys.exit(main(sys.argv[2:]))
from trapline.platforms.gem5.machine_json import main

sys.exit(main())
