"""python -m trapline.gem5: the machine as typed JSON for gem5_configs/run_se.py (trapline.gem5.main)."""

import sys

from trapline.gem5 import main

sys.exit(main())
