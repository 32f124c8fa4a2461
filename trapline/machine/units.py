"""Units of the machine descriptions, parsed once at load into base units.

  sizes        B, kB, KB, KiB, MB, MiB, GB, GiB   kB = KiB = 1024 bytes, as CPU
                                                  manuals write it (not 1000)
  frequencies  Hz, kHz, MHz, GHz
  times        ps, ns, us, ms, cycles (or cycle)  converted to cycles with the clock
  rates        T/s, kT/s, MT/s, GT/s              transfers per second, decimal as DRAM
                                                  parts are named (DDR3-1600: 1600MT/s)

Which fields are sizes, frequencies, times or counts is written once, as
"x-unit" in gem5_configs/machine.schema.json; `parse` turns one field into a
`Quantity` (its value in the base unit, its kind, the text as written and its
provenance), so nothing downstream parses text again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from trapline.errors import UsageError

SIZE_UNITS = {"B": 1, "kB": 1024, "KB": 1024, "KiB": 1024, "MB": 1024 ** 2, "MiB": 1024 ** 2,
              "GB": 1024 ** 3, "GiB": 1024 ** 3}
FREQ_UNITS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
TIME_UNITS = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3}
CYCLE_UNITS = ("cycles", "cycle")
RATE_UNITS = {"T/s": 1.0, "kT/s": 1e3, "MT/s": 1e6, "GT/s": 1e9}
KINDS = ("size", "frequency", "time", "rate", "count", "ways", "ratio")

_QTY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+(?:/s)?)\s*$")


class MachineError(UsageError):
    """A machine description (or a --set on it) that does not validate; names the field."""


@dataclass(frozen=True)
class Quantity:
    """One number of a machine: `value` in its base unit (bytes, Hz, cycles; a count
    or ratio as written; None for ways written 'full'), its kind, the text as
    written, and its provenance (source, claim, why, from, basis)."""
    path: str
    kind: str
    value: Any
    text: Any
    provenance: dict = field(default_factory=dict, compare=False)


def _quantity(text: Any, kind: str, units, where: str) -> tuple[float, str]:
    if isinstance(text, bool) or text is None:
        raise MachineError(f"{where}: needs a {kind} with its unit, not {text!r}")
    if isinstance(text, (int, float)):
        if text == 0:
            return 0.0, ""
        raise MachineError(f"{where}: '{text}' needs a unit; valid units: {', '.join(units)}")
    m = _QTY.match(str(text))
    if not m and _QTY.match(str(text).strip()[1:]) and str(text).strip()[0] == "-":
        raise MachineError(f"{where}: '{text}' is negative; a {kind} is at least 0")
    if not m:
        raise MachineError(f"{where}: '{text}' is not a {kind}; write a number and a unit "
                           f"(valid units: {', '.join(units)})")
    num, unit = float(m.group(1)), m.group(2)
    if unit not in units:
        raise MachineError(f"{where}: unknown unit '{unit}' in '{text}'; valid units: {', '.join(units)}")
    return _finite(num, text, where), unit


def _finite(value: Any, text: Any, where: str, base: str = "") -> Any:
    """`value` (the number written, or it in a base unit) when it is a finite number; a
    MachineError naming the field otherwise (1e400 is no number a float holds, and
    1e300GHz overflows in Hz: either became inf and then an OverflowError far away)."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            raise MachineError(f"{where}: '{text}' is not a number")
        raise MachineError(f"{where}: '{text}' is too large{' in ' + base if base else ''} "
                           f"(more than {_LARGEST:.3g}{' ' + base if base else ''}); write the machine's real figure")
    return value


_LARGEST = 1.7976931348623157e308


def parse_size(text: Any, where: str = "size") -> int:
    """'32kB' -> 32768. kB = KiB = 1024 bytes (CPU manuals' convention)."""
    num, unit = _quantity(text, "size", list(SIZE_UNITS), where)
    b = _finite(num * SIZE_UNITS.get(unit, 1), text, where, "bytes")
    if b != int(b):
        raise MachineError(f"{where}: '{text}' is not a whole number of bytes")
    return int(b)


def _positive(text: Any, where: str, kind: str, units: dict, si: str) -> float:
    """A quantity of `kind` above 0 in its SI unit `si`, e.g. '1.2GHz' -> 1.2e9 (Hz)."""
    num, unit = _quantity(text, kind, list(units), where)
    v = _finite(num * units.get(unit, 1.0), text, where, si)
    if v <= 0:
        raise MachineError(f"{where}: needs to be above 0 {si} (got {text})")
    return v


def parse_freq(text: Any, where: str = "clock") -> float:
    """'1.2GHz' -> 1.2e9 (Hz)."""
    return _positive(text, where, "frequency", FREQ_UNITS, "Hz")


def parse_rate(text: Any, where: str = "rate") -> float:
    """'1600MT/s' -> 1.6e9 (transfers per second)."""
    return _positive(text, where, "rate", RATE_UNITS, "T/s")


def parse_time(text: Any, clock_hz: float, where: str = "time") -> float:
    """'90ns' or '4cycles' -> cycles (a float) at clock_hz."""
    num, unit = _quantity(text, "time", list(TIME_UNITS) + list(CYCLE_UNITS), where)
    if unit in CYCLE_UNITS or unit == "":
        return num
    return _finite(num * TIME_UNITS[unit] * clock_hz, text, where, "cycles")


def parse(path: str, kind: str, text: Any, clock_hz: float | None, provenance: dict | None = None) -> Quantity:
    """The field at `path` written as `text`, of `kind` (the schema's x-unit), as a
    Quantity; MachineError naming the field if the text is not one. Times need
    the clock (cycles are the base unit)."""
    if kind == "size":
        value: Any = parse_size(text, path)
    elif kind == "frequency":
        value = parse_freq(text, path)
    elif kind == "rate":
        value = parse_rate(text, path)
    elif kind == "time":
        if clock_hz is None:
            raise MachineError(f"{path}: a time needs the machine's clock")
        value = parse_time(text, clock_hz, path)
    elif kind == "ways" and text == "full":
        value = None
    elif kind in ("count", "ways", "ratio"):
        value = _finite(text, text, path)
    else:
        raise MachineError(f"{path}: x-unit '{kind}' is not a kind; valid kinds: {', '.join(KINDS)}")
    return Quantity(path=path, kind=kind, value=value, text=text, provenance=dict(provenance or {}))


def unit_of(text: Any) -> str:
    """The unit a quantity is written in ('90ns' -> 'ns'), or '' for a bare number."""
    m = _QTY.match(str(text))
    return m.group(2) if m else ""


def to_int(cycles: float) -> int:
    """Round half up (2.5 -> 3), the way the plugin arguments are written."""
    return int(math.floor(cycles + 0.5))


def fmt_size(b: int) -> str:
    """32768 -> '32kB': the largest unit that divides the size."""
    for unit, mult in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("kB", 1024)):
        if b >= mult and b % mult == 0:
            return f"{b // mult}{unit}"
    return f"{b}B"


def in_unit_of(like: Any, value: float, kind: str, hz: float) -> Any:
    """`value` (cycles, bytes or a count) written in the unit of `like` ("300ns" -> ns)."""
    unit = unit_of(like)
    if kind == "time" and unit in TIME_UNITS:
        return f"{value / hz / TIME_UNITS[unit]:.6g}{unit}"
    if kind == "time":
        return f"{value:.6g}cycles"
    if kind == "size":
        return fmt_size(int(round(value)))
    return round(value, 6)
