"""Experiments as data: each experiment is one folder, kernels/<id>/, holding
experiment.yaml, the kernel sources, kernel.mk, disasm.yaml and README.md.

There is no central list: the experiments are the folders of the kernels
directory (`kernels_dir()`) that hold an experiment.yaml, ordered by each
file's `catalogue:` entry (E1, E2, ... E11). The id and the kernel are the
folder's name, so they cannot disagree with it.

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

from trapline import checked, kernelargs
from trapline.errors import ExperimentError, UsageError
from trapline.paths import ROOT, kernels_dir  # noqa: F401 (re-exported: experiment.kernels_dir)
from trapline.yamlfile import read_mapping, schema_errors, schema_message, shown, where

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "experiment.schema.json"
EXPERIMENT_FILE = "experiment.yaml"
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def catalogue_key(catalogue: str, exp_id: str) -> tuple[int, int, str]:
    """Sort key for catalogue order: E1 < E2 < ... < E11 by the number after E;
    ties, and entries not of the form E<n>, by id (after the E<n> ones)."""
    m = re.fullmatch(r"E([0-9]+)", catalogue)
    return (0, int(m.group(1)), exp_id) if m else (1, 0, exp_id)


@dataclass(frozen=True)
class Experiment:
    id: str
    path: Path
    data: dict[str, Any]
    # set on a stand-in for a file that does not validate (`stand_in`): why; nothing of it runs
    error: str | None = None

    @property
    def folder(self) -> Path:
        """kernels/<id>/: the experiment file, the kernel sources and the README."""
        return self.path.parent

    @property
    def description(self) -> str:
        return self.data["description"]

    @property
    def kernel(self) -> str:
        """The kernel's folder name, which is the experiment id."""
        return self.id

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


_where = where  # kept for callers that read a schema path
_schema_message = schema_message


@lru_cache(maxsize=None)
def _all_binaries(directory: str) -> tuple[str, ...]:
    """Every binary the kernels' Makefile in `directory` builds, as <kernel>/<name>,
    read from `make list` (the Makefile is the one authority on what is built)."""
    import subprocess
    try:
        from trapline.build import make_vars  # the architecture's compiler and flags
        out = subprocess.run(["make", "-s", "-C", directory, "list", *make_vars("x86_64"), "O=@O@"],
                             capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return ()
    return tuple(line.strip()[len("@O@/"):] for line in out.splitlines() if line.strip().startswith("@O@/"))


def kernel_binaries(kernel: str, directory: Path | None = None) -> list[str]:
    """Names of the binaries kernels/<kernel>/kernel.mk builds (kernels directory:
    `directory`, default `kernels_dir()`)."""
    names = [b.split("/", 1)[1] for b in _all_binaries(str(directory or kernels_dir())) if b.startswith(kernel + "/")]
    return sorted(n for n in names if "/" not in n and not re.search(r"\.(so|o|a)$", n))


def _semantic_checks(exp_id: str, path: Path, data: dict) -> list[str]:
    errs = []
    if not (path.parent / "kernel.mk").exists():
        errs.append(f"kernels/{exp_id}/ needs a kernel.mk beside {path.name} (the folder is the experiment's kernel)")
        bins: list[str] = []
        keys: dict = {}
    else:
        bins = kernel_binaries(exp_id, path.parent.parent)
        keys = _declared_keys(path.parent, errs)
        if not bins and _all_binaries(str(path.parent.parent)):  # (none at all: make itself failed, said elsewhere)
            errs.append(_builds_nothing(exp_id, path.parent / "kernel.mk"))
    variants = {v["name"] for v in data.get("variants", [])}
    from trapline import platforms  # the registry (a platform's own checks of its lanes)
    for pname, p in data["platforms"].items():
        at = f"platforms.{pname}"
        plat = platforms.find(pname)
        if plat is None:
            errs.append(f"platforms: unknown field '{pname}'; valid fields: {', '.join(sorted(platforms.names()))} "
                        f"(the platforms: the modules of trapline/platforms/)")
            continue
        if "not_applicable" in p:
            extra = sorted(set(p) - {"not_applicable"})
            if extra:
                errs.append(f"{at}: a platform marked not_applicable has nothing else, but has {', '.join(extra)}")
            continue
        if not p.get("runs"):
            errs.append(f"{at}: needs 'runs' (or 'not_applicable' with a reason)")
            continue
        errs += plat.lane_problems(at, p)
        errs += _known_differences_problems(f"{at}.known_differences", plat, p.get("known_differences"))
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
                errs.append(f"{at}.runs[{i}].binary: '{r['binary']}' is not built by kernels/{exp_id}/kernel.mk; "
                            f"valid choices: {', '.join(bins)}")
            for sec in ("args", "quick"):
                if keys:
                    errs += kernelargs.problems(r.get(sec) or {}, keys, f"{at}.runs[{i}].{sec}.")
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
                errs += _counter_check(f"{at}.{mname}.{sname}.count", pname, s.get("count"))
    return errs


def _builds_nothing(exp_id: str, mk: Path) -> str:
    """Why kernels/<id>/kernel.mk builds nothing under the experiment's name, and the fix: a
    folder copied from another experiment keeps that one's name in its kernel.mk."""
    try:
        named = sorted(set(re.findall(r"\$\(O\)/([A-Za-z0-9_.-]+)/", mk.read_text(errors="replace"))) - {exp_id})
    except OSError:
        named = []
    if named:
        return (f"kernels/{exp_id}/kernel.mk builds nothing under kernels/{exp_id}/: it names {', '.join(named)}, "
                f"as a folder copied from another experiment does; write {exp_id} for {named[0]} in kernel.mk "
                f"(its binaries are $(O)/{exp_id}/<name>, built from {exp_id}/<source>)")
    return (f"kernels/{exp_id}/kernel.mk builds nothing under kernels/{exp_id}/; add its binaries to BINS as "
            f"$(O)/{exp_id}/<name>, built from {exp_id}/<source>")


def _known_differences_problems(at: str, plat, known: dict | None) -> list[str]:
    """A lane's known_differences: {suffix: why}, each suffix one of its platform's own counts
    (Platform.counters, named without the platform's prefix) and each reason a sentence."""
    if known is None:
        return []
    if not plat.counters:
        from trapline import platforms
        having = [n for n, c in platforms.all().items() if c.counters]
        return [f"{at}: the {plat.label} reports no counts of its own, so it has no count to explain; "
                f"known_differences belongs on a lane of a platform with counts: {', '.join(having)}"]
    errs = []
    head = plat.name + "_"
    for suffix, why in known.items():
        problem = plat.counter_problem(head + suffix)
        if problem:
            errs.append(f"{at}.{suffix}: a count is named here by its suffix, without '{head}': {problem}")
        elif not why.strip():
            errs.append(f"{at}.{suffix}: needs a sentence saying why the simulators' {suffix} differ")
    return errs


def _declared_keys(folder: Path, errs: list[str]) -> dict:
    """The kernel's declared keys (trapline.kernelargs); a declaration that does not
    parse is an error of this experiment."""
    try:
        keys = kernelargs.declared(folder)
    except ValueError as e:
        errs.append(str(e))
        return {}
    if not keys:
        errs.append(f"kernels/{folder.name}/: no source declares its keys (TL_ARGS, kernels/common/trapline.h)")
    return keys


def _counter_check(at: str, platform: str, name: Any) -> list[str]:
    """A count named with a platform's prefix (model_*: the timing model's) must be one that
    platform reports (Platform.counters), on that platform's lane; other names are the
    kernel's own counts."""
    from trapline import platforms
    owner = platforms.counter_owner(name) if isinstance(name, str) else None
    if owner is None:
        return []
    if owner.name != platform:
        return [f"{at}: '{name}' is a {owner.label} count; only the {owner.name} platform reports "
                f"{owner.name}_* counts"]
    problem = owner.counter_problem(name)
    return [f"{at}: {problem}"] if problem else []


def load_file(path: Path) -> Experiment:
    """Load and check kernels/<id>/experiment.yaml; the id is the folder's name."""
    path = Path(path)
    rel = shown(path)
    exp_id = path.resolve().parent.name
    if not _ID.match(exp_id):
        raise ExperimentError(f"{rel}: the folder name '{exp_id}' is the experiment id and needs to be kebab-case "
                              f"(lower-case letters and digits joined by single hyphens)")
    try:
        raw = path.read_bytes()
    except OSError:
        raw = None
    known = checked.recall("experiment", exp_id, raw) if raw is not None else None
    if known is not None:  # the same file passed with today's checks: its data as it was loaded then
        return Experiment(id=exp_id, path=path, data=known)
    data = read_mapping(path, ExperimentError)
    named = [k for k in ("id", "kernel") if k in data]
    if named:
        raise ExperimentError(f"{rel}: {named[0]}: remove it; the {named[0]} is the folder's name ('{exp_id}')")
    errors = schema_errors(data, _schema())
    if errors:
        raise ExperimentError(f"{rel}: " + "; ".join(schema_message(e) for e in errors[:5]))
    errs = _semantic_checks(exp_id, path, data)
    if errs:
        raise ExperimentError(f"{rel}: " + "; ".join(errs))
    checked.remember("experiment", exp_id, raw, data=data)
    return Experiment(id=exp_id, path=path, data=data)


def load_all(directory: Path | None = None, broken: dict[str, str] | None = None) -> dict[str, Experiment]:
    """Every <directory>/*/experiment.yaml (default `kernels_dir()`), in catalogue order.
    Without `broken`, the first file that does not validate raises; with it, each such
    file's error is put there by id and the others still load (one broken file does
    not block running the rest)."""
    exps = []
    for p in sorted(Path(directory or kernels_dir()).glob(f"*/{EXPERIMENT_FILE}")):
        try:
            exps.append(load_file(p))
        except ExperimentError as e:
            if broken is None:
                raise
            broken[p.parent.name] = str(e)
    exps.sort(key=lambda e: catalogue_key(e.data["catalogue"], e.id))
    return {e.id: e for e in exps}


def stand_in(exp_id: str, error: str, directory: Path | None = None) -> Experiment:
    """A stand-in for the experiment whose file does not validate (`error`, as load_all's
    `broken` holds it), so that reproduce-all gives it failed entries with the reason and
    runs the rest: what can be read of its file (catalogue, description, its known
    platforms and headline), and otherwise placeholders."""
    path = Path(directory or kernels_dir()) / exp_id / EXPERIMENT_FILE
    try:
        data = read_mapping(path, ExperimentError)
    except ExperimentError:
        data = {}

    def text(key: str, default: str) -> str:
        v = data.get(key)
        return v if isinstance(v, str) and v.strip() else default
    head = data.get("headline") if isinstance(data.get("headline"), dict) else {}
    lanes = [p for p in data["platforms"] if isinstance(p, str)] if isinstance(data.get("platforms"), dict) else []
    return Experiment(id=exp_id, path=path, error=error, data={
        "catalogue": text("catalogue", "?"),
        "description": text("description", f"{shown(path)} does not validate"),
        "headline": {"name": head["name"] if isinstance(head.get("name"), str) else "headline",
                     "unit": head["unit"] if isinstance(head.get("unit"), str) else "",
                     "claimed": head.get("claimed") if isinstance(head.get("claimed"), (int, float)) else None},
        "platforms": {p: {} for p in lanes or ["host"]}})


def get(exp_id: str, exps: dict[str, Experiment] | None = None) -> Experiment:
    if exps is None:
        broken: dict[str, str] = {}
        exps = load_all(broken=broken)
        if exp_id in broken:
            raise ExperimentError(broken[exp_id])
    if exp_id not in exps:
        raise UsageError(f"unknown experiment '{exp_id}'; valid choices: {', '.join(exps)}")
    return exps[exp_id]
