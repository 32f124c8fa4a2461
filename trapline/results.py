"""Run directories: atomic writes, resume, the manifest.

    results/
      .incomplete/<run-id>/       a run in progress (or interrupted)
        state.json                 the arguments; a rerun with the same ones resumes
        entries/<id>.<platform>.json   one finished experiment (written atomically)
        raw/<id>.<platform>.log        what the kernels printed
      <run-id>/                    a finished run: the directory above, renamed,
        summary.json summary.csv groups.csv manifest.json report.md report.html plots/
      latest -> <run-id>

summary.json is written only into a finished run, after every entry; the
finished directory appears by one rename(2), so no reader ever sees a run
that claims completion and is not complete.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def results_root() -> Path:
    return Path(os.environ.get("TRAPLINE_RESULTS", ROOT / "results"))


def atomic_write(path: Path, data: str | bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


class RunDir:
    """One run: created (or resumed) in .incomplete/, finished by rename."""

    def __init__(self, path: Path, run_id: str, state: dict, resumed: bool):
        self.path = path
        self.run_id = run_id
        self.state = state
        self.resumed = resumed

    @classmethod
    def open(cls, args: dict, fresh: bool = False, root: Path | None = None) -> "RunDir":
        root = root or results_root()
        inc = root / ".incomplete"
        if not fresh and inc.exists():
            for st in sorted(inc.glob("*/state.json"), reverse=True):
                try:
                    state = json.loads(st.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if state.get("args") == args:
                    return cls(st.parent, st.parent.name, state, resumed=True)
        now = _utcnow()
        slug = args.get("command", "run")
        if args.get("experiment"):
            slug += "-" + args["experiment"]
        if args.get("quick"):
            slug += "-quick"
        run_id = f"{now:%Y%m%d-%H%M%S}-{slug}"
        path = inc / run_id
        n = 1
        while path.exists() or (root / run_id).exists():
            n += 1
            run_id = f"{now:%Y%m%d-%H%M%S}-{slug}-{n}"
            path = inc / run_id
        path.mkdir(parents=True)
        state = {"run_id": run_id, "args": args, "started": now.isoformat()}
        atomic_json(path / "state.json", state)
        return cls(path, run_id, state, resumed=False)

    def entry_path(self, exp_id: str, platform: str) -> Path:
        return self.path / "entries" / f"{exp_id}.{platform}.json"

    def done(self, exp_id: str, platform: str) -> dict | None:
        p = self.entry_path(exp_id, platform)
        if p.exists():
            try:
                return json.loads(p.read_text())
            except json.JSONDecodeError:
                return None
        return None

    def save_entry(self, entry: dict, raw: str) -> None:
        atomic_write(self.path / "raw" / f"{entry['id']}.{entry['platform']}.log", raw)
        atomic_json(self.entry_path(entry["id"], entry["platform"]), entry)

    def finish(self, summary: dict, manifest: dict, extra_files: dict[str, str | bytes]) -> Path:
        """Write the summary and everything derived, then move into place."""
        for name, data in extra_files.items():
            atomic_write(self.path / name, data)
        atomic_json(self.path / "manifest.json", manifest)
        atomic_json(self.path / "summary.json", summary)
        (self.path / "state.json").unlink(missing_ok=True)
        root = self.path.parent.parent
        final = root / self.run_id
        os.rename(self.path, final)
        set_latest(root, self.run_id)
        return final


def set_latest(root: Path, run_id: str) -> None:
    link = root / "latest"
    tmp = root / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(run_id, tmp)
    os.replace(tmp, link)


def find_run(run_id: str | None, root: Path | None = None) -> Path:
    from trapline.errors import UsageError
    root = root or results_root()
    runs = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "summary.json").exists()) if root.exists() else []
    if run_id is None or run_id == "latest":
        link = root / "latest"
        if link.exists() and (link / "summary.json").exists():
            return link.resolve()
        if runs:
            return root / runs[-1]
        raise UsageError(f"no finished run in {root}; run ./run.sh reproduce-all first")
    if run_id not in runs:
        raise UsageError(f"unknown run '{run_id}'; valid choices: {', '.join(runs[-10:]) or '(none yet)'}")
    return root / run_id


# ------------------------------------------------------------------ manifest

def _cmd(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_info() -> dict:
    commit = _cmd(["git", "rev-parse", "HEAD"])
    dirty = bool(_cmd(["git", "status", "--porcelain", "--untracked-files=no"]))
    return {"commit": commit or "unknown", "dirty": dirty,
            "describe": _cmd(["git", "describe", "--always", "--dirty"]) or "unknown"}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def python_packages() -> dict:
    from importlib import metadata
    out = {}
    for name in ("PyYAML", "jsonschema", "matplotlib", "numpy", "pytest"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
