"""Kernel arguments: each key's type and range, read from the kernel's own C declaration.

A kernel declares its keys once, in C (kernels/<id>/*.c, TL_ARGS; the common keys
reps, warmup and quick in kernels/common/trapline.h, TL_COMMON_ARGS):

    TL_ARGS({"rows", "4096", "[int 1..1048576] rows of the array (quick: 2048)"}, ...);

Every help starts with a spec, which the kernel's --help prints as it is and the
harness reads here, statically (no build needed), so that a bad value is rejected
with one line before any work starts instead of by the kernel at run time:

    [int LO..HI]     an integer (C strtoll syntax: decimal, 0x hex, 0 octal)
    [float LO..HI]   a number
    [range LO..HI]   N or LO-HI with LO <= HI, both in LO..HI
    [list LO..HI]    comma-separated integers in LO..HI, or empty
    [choice]         one of the words of the help's a|b|c lists

The kernel still checks what a spec cannot say (cross-key limits such as "an array of
at most 8 GB" or "bufsize a power of two").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

COMMON_HEADER = Path("common") / "trapline.h"  # relative to the kernels directory

_ENTRY = re.compile(r'\{\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\}')
_SPEC = re.compile(r"^\[(?:(int|float|range|list) (\S+)\.\.(\S+)|(choice))\] ?(.*)$")
_CHOICES = re.compile(r"[\w.+-]+(?:\|[\w.+-]+)+")
_CINT = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$")
_DEC = re.compile(r"^[0-9]+$")
_LONGEST_INT = 64  # characters; a long long (what the kernels' strtoll reads) has at most 20
_FLOAT = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


@dataclass(frozen=True)
class KernelArg:
    """One declared key: its default (as text), its spec ("int 1..1048576",
    "choice", ...) and the rest of its help."""
    key: str
    default: str
    spec: str
    help: str

    @property
    def kind(self) -> str:
        return self.spec.split()[0]

    @property
    def bounds(self) -> tuple[float, float]:
        lo, hi = self.spec.split()[1].split("..")
        return (float(lo), float(hi)) if self.kind == "float" else (int(lo), int(hi))

    @property
    def choices(self) -> list[str]:
        """For a [choice] key: every word of the help's a|b|c lists, in order."""
        out: list[str] = []
        for group in _CHOICES.findall(self.help):
            out += [c for c in group.split("|") if c not in out]
        return out

    @property
    def full_help(self) -> str:
        """The help as the kernel declares and --help prints it: spec, then text."""
        return f"[{self.spec}] {self.help}".rstrip()

    def valid(self) -> str:
        """What a valid value is, in words."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        lo, hi = self.bounds
        return {"int": f"an integer from {lo} to {hi}",
                "float": f"a number from {lo:g} to {hi:g}",
                "range": f"N or LO-HI with {lo} <= LO <= HI <= {hi}",
                "list": f"comma-separated integers from {lo} to {hi}, or empty"}[self.kind]

    def accepts(self, value: Any) -> bool:
        """Whether the kernel's argument parser and its spec both accept `value`."""
        text = _text(value)
        if self.kind == "choice":
            return text in self.choices
        lo, hi = self.bounds
        if self.kind == "int":
            n = _cint(text)
            return n is not None and lo <= n <= hi
        if self.kind == "float":
            if not _FLOAT.match(text):
                return False
            return lo <= float(text) <= hi
        if self.kind == "range":
            parts = text.split("-")
            if len(parts) not in (1, 2) or not all(_DEC.match(p) and len(p) <= _LONGEST_INT for p in parts):
                return False
            a, b = int(parts[0]), int(parts[-1])
            return lo <= a <= b <= hi
        # list
        if text == "":
            return True
        items = [_cint(p) for p in text.split(",")]
        return all(n is not None and lo <= n <= hi for n in items)

    def problem(self, value: Any) -> str | None:
        """None when `value` is valid, else one line: "rows: -5 is not valid; an integer ..."."""
        if self.accepts(value):
            return None
        shown = repr(_text(value)) if _text(value) == "" or " " in _text(value) else _text(value)
        return f"{self.key}: {shown} is not valid; {self.valid()}"


def _text(value: Any) -> str:
    """A value as the kernel would see it on its command line (YAML gives ints and bools)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _cint(text: str) -> int | None:
    """The integer strtoll(text, &end, 0) reads when it reads all of text, else None."""
    if len(text) > _LONGEST_INT or not _CINT.match(text):
        return None  # (longer than any long long, strtoll's type: not converted, which took seconds or failed)
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits[:2].lower() == "0x":
        return sign * int(digits[2:], 16)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def _strip_comments(src: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", src, flags=re.S))


def _entries(text: str, where: str) -> list[KernelArg]:
    out = []
    for key, default, full in _ENTRY.findall(text):
        m = _SPEC.match(full)
        if not m:
            raise ValueError(f"{where}: key '{key}': its help needs to start with a spec such as "
                             f"[int LO..HI], [float LO..HI], [range LO..HI], [list LO..HI] or [choice]: '{full}'")
        kind, lo, hi, choice, rest = m.groups()
        arg = KernelArg(key, default, choice or f"{kind} {lo}..{hi}", rest)
        try:
            arg.bounds if not choice else None
        except ValueError:
            raise ValueError(f"{where}: key '{key}': bounds '{lo}..{hi}' are not numbers") from None
        if choice and len(arg.choices) < 2:
            raise ValueError(f"{where}: key '{key}': [choice] needs an a|b list in its help")
        out.append(arg)
    return out


@lru_cache(maxsize=None)
def _declared(folder: str) -> tuple[KernelArg, ...]:
    d = Path(folder)
    found: list[KernelArg] = []
    for src in sorted(d.glob("*.c")):
        text = _strip_comments(src.read_text())
        for m in re.finditer(r"^TL_ARGS\((.*?)\);", text, flags=re.S | re.M):
            found += _entries(m.group(1), str(src))
    if not found:
        return ()
    header = d.parent / COMMON_HEADER
    m = re.search(r"#define TL_COMMON_ARGS((?:[^\n]*\\\n)*[^\n]*)", _strip_comments(header.read_text()))
    if not m:
        raise ValueError(f"{header}: no TL_COMMON_ARGS declaration")
    found += _entries(m.group(1), str(header))
    return tuple(found)


def declared(folder: Path) -> dict[str, KernelArg]:
    """The keys the kernel in `folder` (kernels/<id>) declares, its own then the
    common ones, by key; empty when no source there declares TL_ARGS."""
    return {a.key: a for a in _declared(str(Path(folder).resolve()))}


def problems(args: Mapping[str, Any], keys: Mapping[str, KernelArg], where: str = "") -> list[str]:
    """One line per key of `args` that is not declared or whose value is not valid;
    each line starts with `where` + the key ("platforms.host.runs[0].args.rows: ...")."""
    out = []
    for k, v in args.items():
        if k not in keys:
            out.append(f"{where}{k}: not a key this kernel declares; valid choices: {', '.join(keys)}")
        else:
            p = keys[k].problem(v)
            if p:
                out.append(where + p)
    return out


# ---------------------------------------------------------------- one run's arguments

def kernel_keys(ctx, exp, binary: str) -> list[str]:
    """The keys a kernel binary of the experiment exp declares, read from its C declaration
    (every binary of kernels/<id> is built from the same TL_ARGS)."""
    return list(declared(exp.folder))


def kernel_args(ctx, exp, run: dict, sets: dict[str, str]) -> list[str]:
    """key=value arguments for one run (run: one of a lane's `runs`): the experiment's, then
    its quick ones (and quick=1, when the run context ctx is quick), then the user's --set
    values that this kernel declares."""
    args = dict(run.get("args", {}))
    if ctx.quick:
        args.update(run.get("quick", {}))
        args["quick"] = 1
    valid = kernel_keys(ctx, exp, run["binary"])
    args.update({k: v for k, v in sets.items() if k in valid})
    return [f"{k}={v}" for k, v in args.items()]
