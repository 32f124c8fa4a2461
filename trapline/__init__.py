"""trapline: reproduce old memory-system measurements on emulated, simulated
and host machines.

Data flows one way, and each step has one module:

    ../shared/claims.md        the catalogue (prose, the original figures)
    experiments/<id>.yaml      one experiment: claim, kernel, platforms, metric
      -> trapline/experiment.py   load + validate (schema/experiment.schema.json)
    kernels/<id>/              the C kernel, built per arch
      -> trapline/build.py        cached by content hash outside the clone
    trapline/platforms/<name>.py  run the kernel on a platform (host, ...)
      -> trapline/kernelio.py     parse the kernel's "TL ..." lines
      -> trapline/analysis.py     samples -> stats -> headline -> status
    trapline/results.py        atomic run directory, manifest, resume
    trapline/report.py         report.md, report.html, plots, CSV
    trapline/cli.py            the commands behind ./run.sh
"""

__version__ = "0.1.0"
