"""What every platform provides."""

from __future__ import annotations

from dataclasses import dataclass, field

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
