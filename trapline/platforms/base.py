"""What every platform provides."""

from __future__ import annotations

from dataclasses import dataclass, field

from trapline import build
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
    name = "?"
    # How figures from this platform must be read; printed next to every figure.
    label = "?"

    def describe(self) -> dict:
        """Facts for the manifest: CPU, OS, tool versions."""
        return {}

    def validate_sets(self, exp, sets: dict[str, str]) -> None:
        """Reject unknown --set keys before anything runs (UsageError)."""

    def run(self, exp, quick: bool, sets: dict[str, str], log) -> PlatformRun:
        raise NotImplementedError


# ------------------------------------------------ shared by every platform

def kernel_keys(exp, binary: str) -> list[str]:
    """The keys a kernel binary declares (read from the x86_64 build's --help:
    the source is the same on every architecture)."""
    return build.kernel_keys(build.build("x86_64") / exp.kernel / binary)


def kernel_args(exp, run: dict, quick: bool, sets: dict[str, str]) -> list[str]:
    """key=value arguments for one run: the experiment's, then its quick ones
    (and quick=1), then the user's --set values that this kernel declares."""
    args = dict(run.get("args", {}))
    if quick:
        args.update(run.get("quick", {}))
        args["quick"] = 1
    valid = kernel_keys(exp, run["binary"])
    args.update({k: v for k, v in sets.items() if k in valid})
    return [f"{k}={v}" for k, v in args.items()]


def check_kernel_sets(exp, platform: str, sets: dict[str, str], also: str = "") -> None:
    """Reject a --set key that no kernel of this experiment's runs declares."""
    valid: set[str] = set()
    for r in exp.platform(platform).get("runs", []):
        valid |= set(kernel_keys(exp, r["binary"]))
    for k in sets:
        if k not in valid:
            raise UsageError(f"unknown key '{k}' for {exp.id} on {platform}; valid choices: "
                             f"{', '.join(sorted(valid))}{also}")
