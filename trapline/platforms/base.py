"""What every platform provides."""

from __future__ import annotations

from dataclasses import dataclass, field

from trapline import machine as machines, kernelargs
from trapline.context import RunContext
from trapline.errors import UsageError
from trapline.kernelio import KernelOutput


@dataclass
class PlatformRun:
    """What one experiment produced on one platform."""
    output: KernelOutput | None
    raw: str                      # the console/stdout, with the commands run
    commands: list[list[str]] = field(default_factory=list)
    error: str | None = None      # set when the run failed (the message names why)
    binaries: dict[str, str] = field(default_factory=dict)  # path -> sha256
    seconds: float = 0.0
    facts: dict = field(default_factory=dict)  # platform specifics for the entry (e.g. emulation time)


class Platform:
    """One lane. Made for one run context; what it builds or loads lives there.
    Others ask a platform these attributes instead of switching on its name."""
    name = "?"
    # How figures from this platform must be read; printed next to every figure.
    label = "?"
    # One sentence: what a figure from this platform is (the report prints "label: meaning").
    meaning = "?"
    # What its sample times are: "real" (measured), "emulation" (an emulator's
    # wall clock, never a prediction) or "predicted" (the model's cycles / clock).
    times = "real"
    # --machine applies to it
    takes_machine = False

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    @property
    def timing_plots(self) -> bool:
        """Whether its times may be drawn and compared as times."""
        return self.times != "emulation"

    def describe(self) -> dict:
        """Facts for the manifest: CPU, OS, tool versions."""
        return {}

    def validate(self, exp) -> None:
        """Reject bad --set keys and machines before anything runs (UsageError)."""

    def run(self, exp) -> PlatformRun:
        raise NotImplementedError

    def _lane(self, exp) -> tuple[dict, str, float]:
        """A guest or model run's start: its lane of the experiment, the lane's arch, the start time."""
        import time
        spec = exp.platform(self.name)
        return spec, spec["arch"], time.monotonic()


# ------------------------------------------------ shared by every platform

def kernel_keys(ctx: RunContext, exp, binary: str) -> list[str]:
    """The keys a kernel binary declares, read from its C declaration (trapline.kernelargs;
    every binary of kernels/<id> is built from the same TL_ARGS)."""
    return list(kernelargs.declared(exp.folder))


def kernel_args(ctx: RunContext, exp, run: dict, sets: dict[str, str]) -> list[str]:
    """key=value arguments for one run: the experiment's, then its quick ones
    (and quick=1), then the user's --set values that this kernel declares."""
    args = dict(run.get("args", {}))
    if ctx.quick:
        args.update(run.get("quick", {}))
        args["quick"] = 1
    valid = kernel_keys(ctx, exp, run["binary"])
    args.update({k: v for k, v in sets.items() if k in valid})
    return [f"{k}={v}" for k, v in args.items()]


def check_kernel_sets(ctx: RunContext, exp, platform: str, sets: dict[str, str], also: str = "") -> None:
    """Reject a --set key that no kernel of this experiment's runs declares, or a value
    outside the key's declared type and range (the run's own args are checked at load)."""
    if not sets:
        return
    valid: set[str] = set()
    for r in exp.platform(platform).get("runs", []):
        valid |= set(kernel_keys(ctx, exp, r["binary"]))
    for k in sets:
        if k not in valid:
            hint = also
            if not also and ("." in k or "[" in k or k.split(".")[0] in machines.top_fields()):
                hint = (f" ('{k}' is a machine field: machine fields are set on the timing model, "
                        f"--platform model)")
            raise UsageError(f"unknown key '{k}' for {exp.id} on {platform}; valid choices: "
                             f"{', '.join(sorted(valid))}{hint}")
    bad = kernelargs.problems(sets, kernelargs.declared(exp.folder), "--set ")
    if bad:
        raise UsageError(bad[0])
