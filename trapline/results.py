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

Before a run starts, `RunDir.open` checks that the results directory can hold it
(`check_root`: a directory, writable, `latest` the link trapline writes, and the
space a run of its size needs: `space_needed`): one line, exit 2 for a path that
cannot hold runs, exit 1 (`NoSpace`) for too little space. A full disk met while
writing (ENOSPC, EDQUOT) is the same one line naming the directory and the space
left; the run stays in .incomplete/, claims nothing, and the same command resumes it
once there is space.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

from trapline.errors import NoSpace, UsageError

from trapline.paths import ROOT
FULL = (errno.ENOSPC, errno.EDQUOT)  # a full file system, or the user's quota on it
# What a run writes, measured (docs/performance.md): the report and the manifest, and per
# entry its JSON, its raw log and its plot; about twice each, as the run's largest so far.
RUN_BYTES = 2 << 20
ENTRY_BYTES = 1 << 20


def results_root(writing: bool = True) -> Path:
    """Where runs go: $TRAPLINE_RESULTS, else results/ in the clone. Checked here, so
    a path that cannot hold runs is one clear error before any work; writing=False (a
    command that only reads runs: fidelity, cite) does not ask that it can be written."""
    env = os.environ.get("TRAPLINE_RESULTS")
    if env is not None and not env.strip():
        raise UsageError("TRAPLINE_RESULTS is set but empty; unset it (results/ in the clone) or name a directory")
    root = Path(env) if env else ROOT / "results"
    _is_a_place(root, _what(root), writing)
    return root


def _what(root: Path) -> str:
    env = os.environ.get("TRAPLINE_RESULTS")
    return "TRAPLINE_RESULTS" if env and Path(env) == Path(root) else "the results directory"


def _is_a_place(root: Path, what: str, writing: bool = True) -> None:
    """root is a directory, or can be made one: no part of its path is a file or a symbolic
    link that leads nowhere (a loop, a missing target), and (writing) the nearest existing
    part is writable."""
    probe = Path(root)
    while not probe.exists() and not probe.is_symlink() and not _lstat_fails(probe):
        probe = probe.parent
    if probe.is_symlink() and not probe.exists():
        try:
            os.stat(probe)
            why = "cannot be followed"
        except OSError as e:
            why = ("loops (it leads back to itself)" if e.errno == errno.ELOOP
                   else f"leads to {os.readlink(probe)}, which does not exist")
        raise UsageError(f"{what} ({root}){' cannot be made: ' + str(probe) if probe != Path(root) else ''} is a "
                         f"symbolic link that {why}; name a directory for the runs")
    if _lstat_fails(probe):
        raise UsageError(f"{what} ({root}) cannot be reached: {os.strerror(_lstat_fails(probe))} on the way to "
                         f"{probe}; name a directory for the runs")
    if probe == Path(root) and not probe.is_dir():
        raise UsageError(f"{what} ({root}) is a file, not a directory; name a directory for the runs")
    if not probe.is_dir():
        raise UsageError(f"{what} ({root}) cannot be made: {probe} is a file, not a directory; "
                         "name a directory for the runs")
    if writing and not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{what} ({root}) cannot be written (no write permission on {probe}); "
                         "name a writable directory")


def _lstat_fails(p: Path) -> int:
    """The errno of lstat(p) when it is not 'no such file' (a symbolic link loop on the way
    to it), else 0."""
    try:
        os.lstat(p)
    except OSError as e:
        return 0 if e.errno in (errno.ENOENT, errno.ENOTDIR) else e.errno
    return 0


def writable_run(path: Path, command: str) -> None:
    """Before `command` writes into the run folder `path` (the report it redraws): a
    folder it can write (a file made and removed there), else UsageError naming the
    folder and why, with nothing written."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=path)
    except OSError as e:
        if e.errno in FULL:
            raise no_space(path, None, "the report") from None
        raise UsageError(f"{command}: the run folder {path} cannot be written ({e.strerror}), so its report is not "
                         f"redrawn and nothing changed; make it writable, or copy the run and name the copy") from None
    os.close(fd)
    os.unlink(probe)


def free_bytes(path: Path) -> int | None:
    """Bytes the user may still write on the file system of `path` (its nearest existing
    part), or None where that cannot be asked (or it has no storage at all: /proc)."""
    p = Path(path)
    while not p.exists():
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize if st.f_blocks else None


def size(n: float | None) -> str:
    """1536 -> '1.5 kB' (kB = 1024 bytes, as elsewhere in trapline)."""
    if n is None:
        return "an unknown amount"
    for unit, mult in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= mult:
            return f"{n / mult:.3g} {unit}"
    return f"{int(n)} bytes"


def space_needed(entries: int) -> int:
    """What a run of `entries` entries writes, at most (RUN_BYTES, ENTRY_BYTES)."""
    return RUN_BYTES + ENTRY_BYTES * entries


def no_space(path: Path, needed: int | None = None, what: str = "") -> NoSpace:
    """The one-line error for a full file system at `path`: the directory, what was being
    written and how much it needed, and what is left; nothing was claimed complete."""
    d = Path(path) if Path(path).is_dir() else Path(path).parent
    free = free_bytes(d)
    need = f" ({size(needed)})" if needed is not None else ""
    return NoSpace(f"no space left in {d}: writing {what or Path(path).name}{need} failed with "
                   f"{size(free)} free; free some space and rerun the same command (the run resumes)")


def check_root(root: Path, entries: int = 0) -> None:
    """Before a run: `root` can hold it. A directory it can make and write (UsageError,
    exit 2, naming the path and why), whose `latest` is the link trapline writes (not a
    directory or file of someone else's), with the space a run of `entries` entries
    needs (NoSpace, exit 1, naming what is needed and what is left)."""
    what = _what(root)
    _is_a_place(root, what)
    latest = Path(root) / "latest"
    if latest.exists() and not latest.is_symlink():
        kind = "a directory" if latest.is_dir() else "a file"
        raise UsageError(f"{latest} is {kind}, not the link to the newest run that trapline writes; "
                         "move it away (trapline replaces it after every run)")
    need, free = space_needed(entries), free_bytes(root)
    if free is not None and free < need:
        raise NoSpace(f"no space for the run in {root}: {size(free)} free, and a run of {entries} "
                      f"entr{'y' if entries == 1 else 'ies'} needs about {size(need)}; free some space or name "
                      "another directory (TRAPLINE_RESULTS)")
    inc = Path(root) / ".incomplete"
    try:
        inc.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=inc)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        if e.errno in FULL:
            raise no_space(inc, need, "the run's first file") from None
        raise UsageError(f"{what} ({root}) cannot hold runs: creating {e.filename or inc} failed ({e.strerror}); "
                         "name a writable directory") from None


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


def _special(path: Path) -> bool:
    """path exists and is neither a regular file nor a folder (a device, a FIFO, a socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def atomic_write(path: Path, data: str | bytes, parents: bool = True) -> None:
    """Write to a temp file beside `path`, fsync, rename: readers see the old or the new
    file, never a part, and a write that fails for any reason (a full disk, `path` a
    directory, an interrupt) removes its temp file. The one way trapline writes a file
    in place. The file gets the mode open(2) would give it (0666 less the umask), not
    mkstemp's 0600. parents: make the missing folders above it (else the OSError). A path
    that is a device or a FIFO (`-o /dev/null`) is written in place: a rename would put a
    file where the device was."""
    path = Path(path)
    blob = data.encode() if isinstance(data, str) else data
    if _special(path):
        with open(path, "wb") as f:
            f.write(blob)
        return
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        if e.errno in FULL:
            raise no_space(path, len(blob)) from None
        raise
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in FULL:
            raise no_space(path, len(blob)) from None
        raise


def cache_write(path: Path, data: str | bytes) -> bool:
    """atomic_write for a note a cache keeps (a memo, a remembered check): best effort, since
    a cache that cannot be written changes nothing but the speed. Whether it was written;
    either way no temporary file stays."""
    try:
        atomic_write(path, data)
    except (OSError, NoSpace):
        return False
    return True


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read 1 MiB at a time (guest images, gem5's 48 MB binary)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


class RunDir:
    """One run: created (or resumed) in .incomplete/, finished by rename.

    The process that owns a run holds an exclusive lock on its `lock` file for
    as long as it runs, so a run is resumed only by one process and only once
    its owner is gone; an identical command started meanwhile gets a run of its
    own (both finish, each with its own entries). An owner that ends the ordinary
    way (finished, failed, refused, interrupted) removes the lock file as it lets
    go (`release`); only a killed one leaves it, unlocked."""

    def __init__(self, path: Path, run_id: str, state: dict, resumed: bool, lock=None, made_lock: bool = True):
        self.path = path
        self.run_id = run_id
        self.state = state
        self.resumed = resumed
        self._lock = lock  # the open, flocked lock file: released when the process ends
        self._made_lock = made_lock  # this process made the lock file (it was not there before)

    def release(self, unchanged: bool = False) -> None:
        """Give up ownership (as the process's end does): another process may resume the run.
        The lock file goes first, while still held (a process that opened it meanwhile finds
        it gone: `_take`); unchanged: only if this process made it (a run refused as found)."""
        if self._lock is not None:
            if self._made_lock or not unchanged:
                (self.path / "lock").unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def discard(self) -> None:
        """Remove the run (one that never got to run anything: nothing to resume)."""
        self.release()
        shutil.rmtree(self.path, ignore_errors=True)

    @staticmethod
    def _take(path: Path):
        """The run's lock, held, or None while another process owns the run (or has just let
        it go, removing the lock file this process opened)."""
        import fcntl
        lock = path / "lock"
        try:
            f = open(lock, "a")
        except OSError:  # (not a file: nobody can own the run through it)
            return None
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            same = os.fstat(f.fileno()).st_ino == os.stat(lock).st_ino
        except (BlockingIOError, FileNotFoundError):
            same = False
        if not same:
            f.close()
            return None
        return f

    @classmethod
    def open(cls, args: dict, fresh: bool = False, root: Path | None = None, entries: int = 0) -> "RunDir":
        """The run for `args`: an interrupted one with the same arguments (resumed), else a
        new one. The results directory is checked first (`check_root`, with the space a
        run of `entries` entries needs); a new run that cannot be written is removed."""
        root = root or results_root()
        check_root(root, entries)
        inc = root / ".incomplete"
        if not fresh and inc.exists():
            for st in sorted(inc.glob("*/state.json"), reverse=True):
                try:
                    state = json.loads(st.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if not isinstance(state, dict) or state.get("args") != args:
                    continue  # (trapline/runfiles.check_states names a damaged one first, for a run)
                made = not (st.parent / "lock").exists()
                lock = cls._take(st.parent)
                if lock is None:
                    continue  # its owner is still running it
                if not st.exists():  # finished while we waited for the lock
                    lock.close()
                    continue
                return cls(st.parent, st.parent.name, state, resumed=True, lock=lock, made_lock=made)
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
                except OSError as e:
                    if e.errno in FULL:
                        raise no_space(inc, space_needed(entries), "the run's directory") from None
                    raise
            n += 1
        state = {"run_id": run_id, "args": args, "started": now.isoformat()}
        try:
            lock = cls._take(path)  # before state.json: no other process can see the run unowned
            atomic_json(path / "state.json", state)
        except BaseException as e:
            shutil.rmtree(path, ignore_errors=True)  # no run without its state (a full disk, Ctrl-C)
            if isinstance(e, OSError) and e.errno in FULL:
                raise no_space(path / "state.json") from None
            raise
        return cls(path, run_id, state, resumed=False, lock=lock)

    def entry_path(self, exp_id: str, platform: str) -> Path:
        return self.path / "entries" / f"{exp_id}.{platform}.json"

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
    """Point root/latest at run_id (a new link renamed over the old one). The run is
    complete either way: when `latest` cannot be replaced (someone made it a directory
    while the run ran, or the disk filled), one line says so and no temporary link stays."""
    link = root / "latest"
    tmp = root / f".latest.{os.getpid()}"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(run_id, tmp)
        os.replace(tmp, link)
    except OSError as e:
        if tmp.is_symlink():
            tmp.unlink()
        where = f"the run is complete in {root / run_id}, but {link} was not updated"
        if e.errno in FULL:
            raise NoSpace(f"{where}: no space left in {root} ({size(free_bytes(root))} free)") from None
        raise UsageError(f"{where}: {e.strerror}{' (it is a directory, not the link trapline writes; move it away)' if link.is_dir() and not link.is_symlink() else ''}") from None


def find_run(run_id: str | None, root: Path | None = None) -> Path:
    """The finished run `run_id` (None or 'latest': the newest) in the results directory
    (root, default results_root(), which a command that finds a run only reads)."""
    root = root or results_root(writing=False)
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
    if run_id not in runs and (root / run_id).is_dir() and not (root / run_id).is_symlink() and "/" not in run_id:
        raise UsageError(f"{root / run_id / 'summary.json'}: missing; the run is damaged (or was never finished); "
                         f"rerun it")
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
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} is missing: the run is damaged; rerun it") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path} cannot be read ({e.__class__.__name__}: {e}): the run is damaged; rerun it") from None
