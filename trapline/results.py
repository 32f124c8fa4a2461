"""Run directories: atomic writes, resume, the manifest.

    results/
      .incomplete/<run-id>/       a run in progress (or interrupted)
        state.json                 the arguments; a rerun with the same ones resumes
        entries/<id>.<platform>.json   one finished experiment (written atomically)
        raw/<id>.<platform>.log        what the kernels printed
      <run-id>/                    a finished run: the directory above, renamed,
        summary.json summary.csv groups.csv manifest.json report.md report.html plots/
      latest -> <run-id>

summary.json is written only after every entry (into .incomplete/<run-id>/, where
the report is then drawn from it); the finished directory appears by one
rename(2), so no reader ever sees a run that claims completion and is not
complete. Files and directories get the user's umask (0644 and 0755 under 022).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

from trapline.paths import ROOT


def results_root() -> Path:
    """Where runs go: $TRAPLINE_RESULTS, else results/ in the clone. Checked here, so
    a path that cannot hold runs is one clear error before any work."""
    from trapline.errors import UsageError
    env = os.environ.get("TRAPLINE_RESULTS")
    if env is not None and not env.strip():
        raise UsageError("TRAPLINE_RESULTS is set but empty; unset it (results/ in the clone) or name a directory")
    root = Path(env) if env else ROOT / "results"
    what = "TRAPLINE_RESULTS" if env else "the results directory"
    if root.exists() and not root.is_dir():
        raise UsageError(f"{what} ({root}) is a file, not a directory; name a directory for the runs")
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{what} ({root}) cannot be written (no write permission on {probe}); "
                         "name a writable directory")
    return root


def _umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status);
    elsewhere set and restored at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write to a temp file beside `path`, fsync, rename: readers see the old or the new
    file, never a part. The file gets the mode open(2) would give it (0666 less the umask),
    not mkstemp's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
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
    """One run: created (or resumed) in .incomplete/, finished by rename.

    The process that owns a run holds an exclusive lock on its `lock` file for
    as long as it runs, so a run is resumed only by one process and only once
    its owner is gone; an identical command started meanwhile gets a run of its
    own (both finish, each with its own entries)."""

    def __init__(self, path: Path, run_id: str, state: dict, resumed: bool, lock=None):
        self.path = path
        self.run_id = run_id
        self.state = state
        self.resumed = resumed
        self._lock = lock  # the open, flocked lock file: released when the process ends

    def release(self) -> None:
        """Give up ownership (as the process's end does): another process may resume the run."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @staticmethod
    def _take(path: Path):
        """The run's lock, held, or None while another process owns the run."""
        import fcntl
        f = open(path / "lock", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return None
        return f

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
                if state.get("args") != args:
                    continue
                lock = cls._take(st.parent)
                if lock is None:
                    continue  # its owner is still running it
                if not st.exists():  # finished while we waited for the lock
                    lock.close()
                    continue
                return cls(st.parent, st.parent.name, state, resumed=True, lock=lock)
        now = _utcnow()
        slug = args.get("command", "run")
        if args.get("experiment"):
            slug += "-" + args["experiment"]
        if args.get("quick"):
            slug += "-quick"
        inc.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            run_id = f"{now:%Y%m%d-%H%M%S}-{slug}" + (f"-{n}" if n > 1 else "")
            path = inc / run_id
            if not (root / run_id).exists():
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    pass
            n += 1
        lock = cls._take(path)  # before state.json: no other process can see the run unowned
        state = {"run_id": run_id, "args": args, "started": now.isoformat()}
        atomic_json(path / "state.json", state)
        return cls(path, run_id, state, resumed=False, lock=lock)

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

    def finish(self, summary: dict, manifest: dict,
               extra_files: dict[str, str | bytes] | Callable[[Path], dict[str, str | bytes]]) -> Path:
        """Write the manifest, the summary and everything derived (extra_files, or what
        extra_files(run directory) returns: the report is drawn from the files just
        written), then move into place."""
        atomic_json(self.path / "manifest.json", manifest)
        atomic_json(self.path / "summary.json", summary)
        files = extra_files(self.path) if callable(extra_files) else extra_files
        for name, data in files.items():
            atomic_write(self.path / name, data)
        (self.path / "state.json").unlink(missing_ok=True)
        (self.path / "lock").unlink(missing_ok=True)
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
    runs = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                  and (p / "summary.json").exists()) if root.exists() else []
    if run_id is None or run_id == "latest":
        link = root / "latest"
        if link.exists() and not link.is_symlink():
            raise UsageError(f"{link} is not the link to the newest run that trapline writes; move it away "
                             f"(or name a run: {', '.join(runs[-3:]) or 'none finished yet'})")
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


def read_json(path: Path) -> Any:
    """A run's JSON file, or one UsageError naming it when it is missing or damaged."""
    from trapline.errors import UsageError
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} is missing: the run is damaged; rerun it") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path} cannot be read ({e.__class__.__name__}: {e}): the run is damaged; rerun it") from None
