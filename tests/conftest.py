"""Shared fixtures. Tests are numbered by subsystem (ChampSim style), one number per file:
01 the repository's conventions, 05 the architecture table;
10 experiments, 11 platforms, 15 machine files, 16 their gem5 parameters, 18 gem5 itself;
20 kernels;
30 CLI, 35 bad input, 36 simulate;
40 results, 41 concurrency, 42 the report in a browser, 43 cite/bundle/verify,
   44 simulators side by side, 45 the host platform, 46 the fidelity table, 47 sweeps, 48 damaged and foreign run files, 49 the time estimate;
50 host lane;
60 guest (QEMU) lane, 62 guest snapshots, 64 Buildroot images;
70 Docker;
80 timing-model plugin, 82 against Cachegrind, 85 model lane, 86 plt-itlb's and
   87 stl-alloc-scaling's model lanes;
88 SPARC in gem5, 89 gem5 platform, 90 gem5's SPARC lanes and the image's gem5,
   92 trapline's gem5 build, 93 trapline's gem5 changes."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# CI never compiles gem5 (about an hour on 2 cores): a gem5 build that a test (or a command it
# runs) would start stops with one line (from_source.NO_BUILD_ENV); the tests take a gem5 already
# built (trapline.platforms.gem5.binary.for_tests: the cache or ../shared/gem5/)
os.environ.setdefault("TRAPLINE_NO_GEM5_BUILD", "1")


@pytest.fixture
def fifo(tmp_path):
    """A FIFO, tmp_path/pipe, with a thread reading it: (its path, read()), read() giving what was
    written once the writer closed it (None if nothing came within 30 s). A writer that renames a
    file over it leaves the reader waiting: check the FIFO is still one before read()."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    got = []
    reader = threading.Thread(target=lambda: got.append(path.read_bytes()), daemon=True)
    reader.start()

    def read():
        reader.join(timeout=30)
        return got[0] if got else None
    return path, read


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    d = tmp_path / "results"
    monkeypatch.setenv("TRAPLINE_RESULTS", str(d))
    return d


# --set pairs that turn off every hardware prefetcher of x86-2012-server, on both simulators: the side
# by side of counts then compares two LRU caches of one shape on the same accesses (the prefetchers'
# own timing is miss-overlap's subject)
NO_PREFETCH = ["caches.l1d.prefetch.next-line.degree=0", "caches.l1d.prefetch.ip-stride.degree=0",
               "caches.l2.prefetch.stream.degree=0", "caches.l2.prefetch.adjacent-line.degree=0"]


def trapline(*args, env=None, timeout=600, **kw):
    """Run the CLI as a user would (python -m trapline, i.e. what run.sh execs)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "trapline", *args], capture_output=True, text=True,
                          env=e, cwd=ROOT, timeout=timeout, **kw)


@pytest.fixture(scope="session")
def quick_all(tmp_path_factory):
    """One `reproduce-all --quick`, SIGKILLed after two entries and resumed.
    Shared by the results tests (atomicity, resume) and the host-lane tests
    (effects), so the suite runs the lane once."""
    import json
    import signal
    import time

    root = tmp_path_factory.mktemp("quick-all") / "results"
    # GEM5=none: the gem5 lanes are tested on their own (tests 89, 93), and a found gem5
    # (trapline's build) would add its lanes' minutes here and again in verify's reruns
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(root), GEM5="none")
    proc = subprocess.Popen([sys.executable, "-m", "trapline", "reproduce-all", "--quick"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 900
    entries = []
    while time.monotonic() < deadline and proc.poll() is None:
        entries = sorted((root / ".incomplete").glob("*/entries/*.json")) if root.exists() else []
        if len(entries) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "reproduce-all finished before it could be killed:\n" + proc.stdout.read()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    entries = sorted((root / ".incomplete").glob("*/entries/*.json"))
    killed = {
        "entries_done": len(entries),
        "entry_mtimes": {p.name: os.path.getmtime(p) for p in entries},
        "run_id": entries[0].parent.parent.name,
        "summaries": [str(p) for p in root.rglob("summary.json")],
        "latest": (root / "latest").exists(),
    }
    r = subprocess.run([sys.executable, "-m", "trapline", "reproduce-all", "--quick"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    final = (root / "latest").resolve()
    return {"killed": killed, "final": final, "resume_log": r.stderr,
            "summary": json.loads((final / "summary.json").read_text())}


@pytest.fixture(scope="session")
def gem5_binary():
    """A real gem5 (trapline.platforms.gem5.binary.for_tests: GEM5 or gem5.opt on PATH, else the
    shared binary in ../shared/gem5/ unpacked into the cache by its sha256). Without
    one the test is skipped, and -ra prints why."""
    from trapline.platforms.gem5 import binary
    try:
        return binary.for_tests()
    except binary.Gem5Missing as e:
        pytest.skip(f"no gem5: {e}")


@pytest.fixture(scope="session")
def stock_gem5():
    """The shared stock gem5 v24.0.0.1 (../shared/gem5/, unpacked into the cache), whatever
    find() would prefer: for the tests of what a stock gem5 does and says."""
    from trapline.platforms.gem5 import binary
    try:
        return binary.shared_binary()
    except binary.Gem5Missing as e:
        pytest.skip(f"no stock gem5: {e}")


# ------------------------------------------------ a real Dask scheduler and workers on 127.0.0.1 (tests 47, 89)

def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask(*args, env: dict | None = None) -> subprocess.Popen:
    """`dask scheduler|worker ARGS` from the venv, in a session of its own (kill it with os.killpg)."""
    exe = Path(sys.executable).parent / "dask"
    return subprocess.Popen([str(exe), *args], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg",
                                                                **(env or {})),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def wait_listening(port: int, proc: subprocess.Popen, seconds: float = 90) -> None:
    """Until the scheduler proc listens on port (slow to start on a busy machine); fails if it ends first."""
    import socket
    import time
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "dask scheduler did not start"
            time.sleep(0.2)


def rebundle(src: Path, dst: Path, edit, resum: bool) -> Path:
    """A copy of the bundle (tests 43, 48) with `edit(files, top)` applied, written with plain tarfile;
    SHA256SUMS regenerated when `resum` (a consistent edit)."""
    import hashlib
    import io
    import tarfile
    with tarfile.open(src) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    top = next(iter(files)).split("/")[0]
    edit(files, top)
    if resum:
        body = {n: d for n, d in files.items() if not n.endswith("/SHA256SUMS")}
        files[f"{top}/SHA256SUMS"] = "".join(
            f"{hashlib.sha256(d).hexdigest()}  {n[len(top) + 1:]}\n" for n, d in sorted(body.items())).encode()
    with tarfile.open(dst, "w:gz") as tar:
        for n, d in files.items():
            info = tarfile.TarInfo(n)
            info.size = len(d)
            tar.addfile(info, io.BytesIO(d))
    return dst
