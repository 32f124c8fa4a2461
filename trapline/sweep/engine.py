"""The engine: Dask distributed. By default an embedded LocalCluster of worker
processes (one thread each: a point runs QEMU, a process of its own) sized to this
machine's cores; with a scheduler address, the user's cluster. The sweep's process
submits each point under its hash as the task key, stores each result as it arrives
(points.Store, atomically, once) and shows the progress on stderr. A worker that dies
mid-point loses that task; the scheduler gives it to another worker (Dask's
`distributed.scheduler.allowed-failures`, 3 by default).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Callable

from trapline.errors import RunFailed, UsageError

CONNECT_TIMEOUT_S = 30
WAIT_WORKERS_S = 120


def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class ProgressLine:
    """`sweep: 5/16 done (3 cached), 2 running, 9 left, 12 s elapsed, about 20 s left` on stderr:
    rewritten in place on a terminal, one line per change (at most every 5 s) otherwise."""

    def __init__(self, total: int, cached: int, stream=sys.stderr):
        self.total, self.cached, self.stream = total, cached, stream
        self.t0 = time.monotonic()
        self.tty = stream.isatty()
        self.last, self.last_t = None, 0.0
        self.computed = 0

    def text(self, done: int, running: int) -> str:
        left = self.total - done
        el = time.monotonic() - self.t0
        est = ""
        if self.computed and left:
            est = f", about {_fmt_s(el / self.computed * left)} left"
        return (f"sweep: {done}/{self.total} done ({self.cached} cached), {running} running, {left} left, "
                f"{_fmt_s(el)} elapsed{est}")

    def show(self, done: int, running: int, force: bool = False) -> None:
        key = (done, running)
        now = time.monotonic()
        if not force and key == self.last and now - self.last_t < (1 if self.tty else 5):
            return
        self.last, self.last_t = key, now
        t = self.text(done, running)
        if self.tty:
            self.stream.write("\r\033[K" + t + ("\n" if force else ""))
        else:
            self.stream.write(t + "\n")
        self.stream.flush()


def _running(client, keys: set[str]) -> int:
    """Our tasks a worker is executing now (at most its threads each)."""
    try:
        proc = client.processing()
        threads = client.nthreads()
    except Exception:  # a lost scheduler shows as the futures' error
        return 0
    return sum(min(len([k for k in ks if k in keys]), threads.get(w, 1)) for w, ks in proc.items())


def probe(scheduler: str) -> None:
    """A --scheduler address that is well formed and answers on TCP, checked before any
    work (Dask's own connect retries a refused address for its whole timeout)."""
    import socket
    from urllib.parse import urlsplit
    u = urlsplit(scheduler if "://" in scheduler else "tcp://" + scheduler)
    try:
        host, port = u.hostname, u.port
    except ValueError:
        host = port = None
    if u.scheme not in ("tcp", "tls") or not host or not port:
        raise UsageError(f"--scheduler takes a Dask scheduler address such as tcp://host:8786, not '{scheduler}'")
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as e:
        raise UsageError(f"--scheduler {scheduler}: cannot connect ({e.strerror or e}); start one with "
                         f"`dask scheduler` (docs/sweeps.md)") from None


def connect(scheduler: str | None, workers: int | None, log: Callable[[str], None]):
    """(client, cluster or None, a description for the manifest)."""
    from distributed import Client, LocalCluster
    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except OSError as e:
            raise UsageError(f"--scheduler {scheduler}: cannot connect ({e}); start one with `dask scheduler` "
                             f"(docs/sweeps.md)") from None
        if workers:
            log(f"waiting for {workers} worker(s) at {scheduler}")
            try:
                client.wait_for_workers(workers, timeout=WAIT_WORKERS_S)
            except Exception:
                client.close()
                raise RunFailed(f"--scheduler {scheduler}: fewer than {workers} workers after "
                                f"{WAIT_WORKERS_S} s") from None
        cluster = None
    else:
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR, host="127.0.0.1")
        client = Client(cluster)
    info = client.scheduler_info()
    ws = info.get("workers", {})
    desc = {"engine": "dask.distributed", "scheduler": scheduler or "embedded LocalCluster",
            "address": info.get("address"), "workers": len(ws),
            "threads": sum(w.get("nthreads", 0) for w in ws.values())}
    return client, cluster, desc


def run(specs: list[dict], scheduler: str | None, workers: int | None, on_result: Callable[[dict], None],
        progress: ProgressLine, log: Callable[[str], None]) -> dict:
    """Compute every spec (a point not in the store) and hand each result to on_result
    as it arrives; returns the engine's description. A point that fails stops the sweep
    (the points already stored stay: rerunning resumes)."""
    if not specs:
        progress.show(progress.total, 0, force=True)
        return {"engine": "dask.distributed", "scheduler": "not started: every point was cached"}
    from distributed import wait
    from trapline.sweep.points import run_point
    t0 = time.monotonic()
    client, cluster, desc = connect(scheduler, workers, log)
    desc["start_seconds"] = round(time.monotonic() - t0, 3)  # the cluster up, or connected
    t1 = time.monotonic()
    try:
        log(f"{len(specs)} point(s) to compute on {desc['workers']} worker(s) ({desc['scheduler']})")
        futures = {client.submit(run_point, s, key=f"trapline-point-{s['hash']}", pure=False): s for s in specs}
        keys = {f.key for f in futures}
        pending = set(futures)
        done = progress.total - len(specs)
        progress.show(done, _running(client, keys), force=False)
        while pending:
            try:
                finished, pending = wait(pending, timeout=2, return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            for f in finished:
                s = futures[f]
                if f.status == "error":
                    exc = f.exception()
                    raise RunFailed(f"sweep point {s['label']} failed on a worker: "
                                    f"{exc.__class__.__name__}: {exc}")
                rec = f.result()
                f.release()
                if rec.get("error"):
                    raise RunFailed(f"sweep point {s['label']}: {rec['error']}")
                on_result(rec)
                done += 1
                progress.computed += 1
                keys.discard(f.key)
            progress.show(done, _running(client, keys) if pending else 0, force=not pending)
        desc["compute_seconds"] = round(time.monotonic() - t1, 3)  # first submit to last result
        return desc
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
