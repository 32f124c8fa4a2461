"""trapline: reproduce old memory-system measurements on emulated, simulated
and host machines.

Data flows one way, and each step has one module:

    ../shared/claims.md        the catalogue (prose, the original figures)
    kernels/<id>/experiment.yaml  one experiment: claim, platforms, metric
      -> trapline/experiment.py   load + validate (schema/experiment.schema.json)
    kernels/<id>/              the C kernel beside it, built per arch
      -> trapline/build.py        cached by content hash outside the clone
    trapline/platforms/<name>.py  run the kernel on a platform (host, ...)
      -> trapline/kernelio.py     parse the kernel's "TL ..." lines
      -> trapline/analysis.py     samples -> stats -> headline -> status
    trapline/results.py        atomic run directory, manifest, resume
    trapline/entry.py          the typed entry: figures, status, what the report needs
    trapline/report/           report.md, report.html, plots, CSV (from the run directory)
    trapline/cli.py            the commands behind ./run.sh
"""

__version__ = "0.1.0"
