"""Experiments as data: load experiments/<id>.yaml and check it.

The structure is checked by schema/experiment.schema.json; the rest by checks
that read as sentences ("platforms.host.runs[0].binary names 'x', which
kernels/<id>/kernel.mk does not build"). Every error names the file and the
field, and for a closed set the valid choices.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from trapline.errors import ExperimentError, UsageError

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS_DIR = ROOT / "experiments"
KERNELS_DIR = ROOT / "kernels"
SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "experiment.schema.json"

# The catalogue's ids, in catalogue order (E1..E11). The report keeps this order.
CATALOGUE_ORDER = [
    "sparc-misalign-trap", "armv6-unaligned", "x86-split-lock", "sparc-strong-prefetch",
    "numa-first-touch", "malloc-chunk-chase", "plt-itlb", "sparc-spill-fill",
    "loop-order", "strlen-loop", "stl-alloc-scaling",
]


@dataclass(frozen=True)
class Experiment:
    id: str
    path: Path
    data: dict[str, Any]

    @property
    def description(self) -> str:
        return self.data["description"]

    @property
    def kernel(self) -> str:
        return self.data["kernel"]

    @property
    def platforms(self) -> dict[str, dict[str, Any]]:
        return self.data["platforms"]

    @property
    def headline(self) -> dict[str, Any]:
        return self.data["headline"]

    def platform(self, name: str) -> dict[str, Any]:
        return self.platforms[name]


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def _where(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _schema_message(err: jsonschema.ValidationError) -> str:
    where = _where(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        return f"{where}: unknown field {', '.join(repr(e) for e in extra)}; valid fields: {', '.join(allowed)}"
    if err.validator == "enum":
        return f"{where}: {err.instance!r} is not valid; choose one of: {', '.join(map(str, err.validator_value))}"
    if err.validator == "required":
        return f"{where}: {err.message}"
    if err.validator == "oneOf" and isinstance(err.instance, dict):
        return f"{where}: a metric needs exactly one of 'ratio' or 'value'"
    return f"{where}: {err.message}"


@lru_cache(maxsize=1)
def _all_binaries() -> tuple[str, ...]:
    """Every binary the kernels' Makefile builds, as <kernel>/<name>, read from
    `make list` (the Makefile is the one authority on what is built)."""
    import subprocess
    try:
        out = subprocess.run(["make", "-s", "-C", str(KERNELS_DIR), "list", "ARCH=x86_64", "O=@O@"],
                             capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return ()
    return tuple(line.strip()[len("@O@/"):] for line in out.splitlines() if line.strip().startswith("@O@/"))


def kernel_binaries(kernel: str) -> list[str]:
    """Names of the binaries kernels/<kernel>/kernel.mk builds."""
    names = [b.split("/", 1)[1] for b in _all_binaries() if b.startswith(kernel + "/")]
    return sorted(n for n in names if "/" not in n and not re.search(r"\.(so|o|a)$", n))


def _semantic_checks(exp_id: str, path: Path, data: dict) -> list[str]:
    errs = []
    if data["id"] != exp_id:
        errs.append(f"id: '{data['id']}' needs to equal the file name '{exp_id}'")
    kdir = KERNELS_DIR / data["kernel"]
    if not (kdir / "kernel.mk").exists():
        errs.append(f"kernel: '{data['kernel']}' needs a folder kernels/{data['kernel']}/ with a kernel.mk")
        bins: list[str] = []
    else:
        bins = kernel_binaries(data["kernel"])
    variants = {v["name"] for v in data.get("variants", [])}
    for pname, p in data["platforms"].items():
        at = f"platforms.{pname}"
        if "not_applicable" in p:
            extra = sorted(set(p) - {"not_applicable"})
            if extra:
                errs.append(f"{at}: a platform marked not_applicable has nothing else, but has {', '.join(extra)}")
            continue
        if not p.get("runs"):
            errs.append(f"{at}: needs 'runs' (or 'not_applicable' with a reason)")
            continue
        if pname in ("qemu", "model") and "arch" not in p:
            errs.append(f"{at}: needs 'arch' (the guest: x86_64, sparc64 or armv6)")
        if "headline" not in p:
            errs.append(f"{at}: needs a 'headline' metric")
        if "reproduced_if" not in p and "contrast" not in p:
            errs.append(f"{at}: needs 'reproduced_if' (with 'criterion') or 'contrast' (why the effect cannot show here)")
        if "reproduced_if" in p and "criterion" not in p:
            errs.append(f"{at}.reproduced_if: needs a 'criterion' sentence saying why this threshold")
        rif = p.get("reproduced_if", {})
        if "min" in rif and "max" in rif and rif["min"] > rif["max"]:
            errs.append(f"{at}.reproduced_if: min ({rif['min']}) needs to be at most max ({rif['max']})")
        for i, r in enumerate(p["runs"]):
            if bins and r["binary"] not in bins:
                errs.append(f"{at}.runs[{i}].binary: '{r['binary']}' is not built by kernels/{data['kernel']}/kernel.mk; "
                            f"valid choices: {', '.join(bins)}")
        metrics = ([("headline", p["headline"])] if "headline" in p else []) + \
                  [(f"figures[{i}]", m) for i, m in enumerate(p.get("figures", []))]
        for mname, m in metrics:
            sels = [("value", m["value"])] if "value" in m else []
            if "ratio" in m:
                sels += [("ratio.num", m["ratio"]["num"]), ("ratio.den", m["ratio"]["den"])]
            for sname, s in sels:
                if variants and "variant" in s and s["variant"] not in variants:
                    errs.append(f"{at}.{mname}.{sname}.variant: '{s['variant']}' is not a declared variant; "
                                f"valid choices: {', '.join(sorted(variants))}")
                if "count" in s and "stat" in s:
                    errs.append(f"{at}.{mname}.{sname}: a selector reads either a 'count' or a 'stat', not both")
    return errs


def load_file(path: Path) -> Experiment:
    path = Path(path)
    try:
        rel = path.relative_to(ROOT)
    except ValueError:
        rel = path
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ExperimentError(f"{rel}: not valid YAML: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{rel}: needs to be a mapping of fields, not {type(data).__name__}")
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ExperimentError(f"{rel}: " + "; ".join(_schema_message(e) for e in errors[:5]))
    errs = _semantic_checks(path.stem, path, data)
    if errs:
        raise ExperimentError(f"{rel}: " + "; ".join(errs))
    return Experiment(id=data["id"], path=path, data=data)


def load_all(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    exps = {}
    for p in sorted(Path(directory).glob("*.yaml")):
        e = load_file(p)
        exps[e.id] = e
    order = {k: i for i, k in enumerate(CATALOGUE_ORDER)}
    return dict(sorted(exps.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))


def get(exp_id: str, exps: dict[str, Experiment] | None = None) -> Experiment:
    exps = exps if exps is not None else load_all()
    if exp_id not in exps:
        raise UsageError(f"unknown experiment '{exp_id}'; valid choices: {', '.join(exps)}")
    return exps[exp_id]
