"""A sweep's points: what decides one, its content hash, the store of finished points,
and the function a Dask worker runs for one point.

A point is one run of one experiment on one platform with one set of --set values. Its
hash is the sha256 of everything that decides its result (key_material): the experiment
file, the platform, quick, the timeout, the kernel arguments, the machine after --set
(the whole loaded description), the kernel build's key (sources and compilers), the
plugin's key, the guest image (for a guest lane), QEMU's version and the hash of
trapline's own source tree. The store holds one file per hash, <hash>.json (the point's
entry, as a run's entries/ hold them) and <hash>.log (what the kernels printed), each
written atomically by the process that runs the sweep, so a point computed twice (a
worker that died after finishing it, a second sweep) is still stored once.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from functools import lru_cache
from pathlib import Path

from trapline import build, experiment, machine as machines, paths, results, runner
from trapline.context import RunContext
from trapline.platforms.base import Platform

# what decides a point's result besides its inputs: trapline's own sources
TREE_PARTS = tuple(p.relative_to(paths.ROOT).as_posix() for p in (
    paths.ROOT / "trapline", paths.KERNELS, paths.MODEL, paths.MACHINES.parent, paths.IMAGES,
    paths.ROOT / "run.sh", paths.ROOT / "requirements.txt"))
_SKIP = ("__pycache__",)
FORMAT = 1  # the key material's own version: bump when its meaning changes


def tree_files(root: Path = results.ROOT) -> list[Path]:
    out = []
    for part in TREE_PARTS:
        p = root / part
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in p.rglob("*") if f.is_file() and not any(s in f.parts for s in _SKIP)
                    and f.suffix != ".pyc" and not f.relative_to(root).as_posix().startswith("kernels/build/")]
    return sorted(out)


def tree_hash(root: Path = results.ROOT) -> str:
    """sha256 over the paths and contents of trapline's sources (TREE_PARTS): the same for
    a clean checkout of a commit, the Docker image made from it, and a worker's clone."""
    h = hashlib.sha256()
    for f in tree_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@lru_cache(maxsize=None)
def _tree_hash_once() -> str:
    return tree_hash()


def shared_keys(exp, plat: Platform) -> dict:
    """The keys every point of a sweep shares, made (built, when missing) once by the
    sweep's own process in the platform's run context: the tree, the kernel build, and what
    the lane adds (Lane.sweep_keys: the model's plugin, a guest image, QEMU's version). A
    platform module outside the tree ($TRAPLINE_PLATFORMS) adds its own source's sha256."""
    ctx = plat.ctx
    lane = plat.lane(exp)
    a = lane.arch
    keys = {"tree_sha256": _tree_hash_once(), "kernels": {a: build.input_hash(a)}}
    ctx.kernels(a)  # built once here, so the workers (same cache) find it
    keys.update(lane.sweep_keys())
    source = Path(sys.modules[type(lane.platform).__module__].__file__).resolve()
    if not source.is_relative_to(paths.ROOT):
        keys["platform_sha256"] = results.sha256_file(source)
    return keys


def key_material(exp, plat: Platform, ctx: RunContext, shared: dict) -> dict:
    """Everything that decides one point's result (its hash is the point's name) on the
    platform, in the point's run context ctx."""
    pname = plat.name
    m = None
    if plat.takes_machine:
        machine = ctx.machine_for(exp.platform(pname).get("machine"), exp.id, pname).to_dict()
        m = {k: machine[k] for k in ("name", "file_sha256", "sets", "data", "plugin_args")}
    return {"format": FORMAT, "experiment": exp.id, "experiment_sha256": results.sha256_file(exp.path),
            "platform": pname, "quick": ctx.quick, "timeout": ctx.timeout, "kernel_sets": ctx.kernel_sets,
            "machine_sets": list(machines.shown_sets(ctx.machine_sets)), "machine_name": ctx.machine_name, "machine": m,
            **shared}


def point_hash(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


class Store:
    """Finished points by hash: <dir>/<hash>.json (the point's record), <hash>.log (raw)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def file(self, h: str) -> Path:
        return self.path / f"{h}.json"

    def get(self, h: str) -> dict | None:
        try:
            rec = json.loads(self.file(h).read_text())
        except (OSError, json.JSONDecodeError):
            return None  # absent, or damaged: computed again
        return rec if rec.get("hash") == h and isinstance(rec.get("entry"), dict) else None

    def reusable(self, h: str) -> bool:
        """A stored point that a sweep takes as it is: one that did not fail (a failure, such as a
        time limit hit on a loaded machine, is computed again by the next sweep)."""
        rec = self.get(h)
        return rec is not None and rec["entry"].get("status") != "failed"

    def put(self, rec: dict, raw: str) -> bool:
        """Store a finished point once: False when it was there already (a failed one is replaced)."""
        if self.reusable(rec["hash"]):
            return False
        results.atomic_write(self.path / f"{rec['hash']}.log", raw)
        results.atomic_json(self.file(rec["hash"]), rec)
        return True


# ------------------------------------------------------------------ on a worker

def _worker_name() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


_made: dict[str, dict] = {}  # tree hash -> {arch: kernel build dir, "tools": ctx.tools}, per worker process
_experiments: dict[tuple, object] = {}


def _experiment(exp_id: str):
    """kernels/<id>/experiment.yaml, loaded and checked once per worker process and content."""
    path = build.kernels_dir() / exp_id / experiment.EXPERIMENT_FILE
    key = (str(path), results.sha256_file(path))
    if key not in _experiments:
        _experiments[key] = experiment.load_file(path)
    return _experiments[key]


def run_point(spec: dict) -> dict:
    """What a Dask worker runs for one point: the experiment on its platform in a run
    context of its own (runner.run_entry, as `./run.sh run` does), returned to the
    sweep's process, which stores it. Refuses to run from another trapline tree."""
    t0 = time.monotonic()
    worker = _worker_name()
    mine = _tree_hash_once()
    if mine != spec["tree_sha256"]:
        return {"hash": spec["hash"], "worker": worker,
                "error": f"worker {worker} ({results.ROOT}) has trapline tree {mine[:12]} but the sweep's is "
                         f"{spec['tree_sha256'][:12]}: give the workers the same checkout (docs/sweeps.md)"}
    if tree_hash() != mine:
        return {"hash": spec["hash"], "worker": worker,
                "error": f"worker {worker}: its trapline tree ({results.ROOT}) changed since it started; restart it"}
    lines: list[str] = []
    ctx = RunContext.make(spec["quick"], spec["sets"], spec["machine"], lines.append, spec["timeout"],
                          spec.get("images"))
    exp = _experiment(spec["experiment"])
    if results.sha256_file(exp.path) != spec["experiment_sha256"]:
        return {"hash": spec["hash"], "worker": worker,
                "error": f"worker {worker}: its {exp.path} is not the sweep's (sha256 differs)"}
    steps = runner.plan({exp.id: exp}, [exp.id], spec["platform"], ctx, strict=True)
    plat = steps[0].platform
    arch = plat.lane(exp).arch
    # what this worker built or found for this tree: the kernels and the platforms' tools,
    # such as the model's plugin (the tree hash, checked above, covers their sources)
    made = _made.setdefault(mine, {}) if "TRAPLINE_KERNELS" not in os.environ else {}
    if arch in made:
        ctx.builds[arch] = made[arch]
    ctx.tools.update(made.get("tools", {}))
    runner.validate(steps)
    entry, raw = runner.run_entry(steps[0], ctx)
    made.update(ctx.builds)
    made.setdefault("tools", {}).update(ctx.tools)
    return {"hash": spec["hash"], "sets": spec["sets"], "entry": entry, "raw": raw, "worker": worker,
            "host": socket.gethostname(), "pid": os.getpid(), "seconds": round(time.monotonic() - t0, 3),
            "platform_facts": plat.describe(), "log": lines}
