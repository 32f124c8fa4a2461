"""Results: atomic writes, no summary.json before completion, resume."""

import json
import os
import stat

import pytest

from trapline import results


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.json"
    results.atomic_json(p, {"x": 1})
    results.atomic_json(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 2}
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_atomic_write_failure_keeps_old_content_and_leaves_no_temp(tmp_path, monkeypatch):
    p = tmp_path / "a.json"
    results.atomic_json(p, {"x": 1})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        results.atomic_json(p, {"x": 2})
    assert json.loads(p.read_text()) == {"x": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_atomic_write_to_a_fifo_or_device_writes_in_place(fifo, tmp_path):
    """`bundle -o /dev/null` as root: a rename would put a regular file where the device was
    (every program's /dev/null then a file); a device or FIFO is written in place instead."""
    path, read = fifo
    results.atomic_json(path, {"x": 3})
    assert stat.S_ISFIFO(os.stat(path).st_mode), "the FIFO was replaced by a file"
    assert read() == b'{\n  "x": 3\n}\n'
    assert [f.name for f in tmp_path.iterdir()] == ["pipe"]  # no temporary file left


def test_rundir_resumes_same_args_and_not_others(tmp_path):
    a = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    a.release()  # a's owner ended (interrupted): the same arguments resume it
    b = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    assert b.resumed and b.run_id == a.run_id
    busy = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    assert not busy.resumed and busy.run_id != a.run_id  # b's owner is still running it
    busy.release()
    c = results.RunDir.open({"command": "run", "quick": False}, root=tmp_path)
    assert not c.resumed and c.run_id != a.run_id
    d = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path, fresh=True)
    assert not d.resumed


def test_finish_is_one_rename_and_updates_latest(tmp_path):
    rd = results.RunDir.open({"command": "run"}, root=tmp_path)
    rd.save_entry({"id": "e", "platform": "host", "status": "reproduced"}, "raw")
    assert not (tmp_path / rd.run_id).exists()
    final = rd.finish({"run_id": rd.run_id, "experiments": []}, {"m": 1}, {"report.md": "# r"})
    assert final == tmp_path / rd.run_id and (final / "summary.json").exists()
    assert (tmp_path / "latest").resolve() == final
    assert not any((tmp_path / ".incomplete").iterdir())


def test_latest_made_a_directory_during_a_run_is_one_error_and_no_stray_link(tmp_path):
    """The run is complete either way; `latest` (made a directory by someone while the run
    ran) is left alone, the error says where the run is, and no temporary link stays."""
    from trapline.errors import UsageError
    rd = results.RunDir.open({"command": "run"}, root=tmp_path)
    (tmp_path / "latest").mkdir()
    with pytest.raises(UsageError, match=f"complete in {tmp_path / rd.run_id}.*latest"):
        rd.finish({"run_id": rd.run_id, "experiments": []}, {"m": 1}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".incomplete", "latest", rd.run_id])
    assert (tmp_path / rd.run_id / "summary.json").exists() and not any((tmp_path / "latest").iterdir())


def test_killed_run_leaves_no_summary_and_resumes(quick_all):
    """reproduce-all --quick was SIGKILLed after its second entry (fixture)."""
    killed = quick_all["killed"]
    assert killed["entries_done"] >= 2
    assert killed["summaries"] == [], "a killed run must not leave a summary.json"
    assert not killed["latest"]
    final = quick_all["final"]
    assert "resuming run" in quick_all["resume_log"]
    summary = json.loads((final / "summary.json").read_text())
    assert summary["run_id"] == killed["run_id"]
    # entries written before the kill were kept, not recomputed
    for name, mtime in killed["entry_mtimes"].items():
        assert os.path.getmtime(final / "entries" / name) == mtime


# ------------------------------------------------------------ modes, entries, the report

def _finished_run(tmp_path, umask: int):
    """A finished run of two hand-made entries (no kernels), its report drawn from the run directory."""
    from trapline import report
    from trapline.entry import Entry
    old = os.umask(umask)
    try:
        rd = results.RunDir.open({"command": "reproduce-all"}, root=tmp_path)
        long_note = "A note that goes on. " * 30 + "THE END."
        es = [Entry(id="loop-order", platform="model", catalogue="E9", description="d", metric="m", unit="x",
                    claimed=None, reproduced=7.33, status="reproduced", note="modelled", platform_label="timing model",
                    platform_meaning="cycles charged by the model", plot={"title": "t"},
                    groups=[{"variant": "row", "n": 5, "median_ns_per_op": 1.0, "iqr_percent": 1.0}]),
              Entry(id="x86-split-lock", platform="host", catalogue="E3", description="d", metric="m", unit="x",
                    claimed=100.0, reproduced=50.0, ratio_to_claim=0.5, status="differs", note=long_note,
                    platform_label="host", platform_meaning="real time",
                    source={"title": "Split locks", "author": "a", "date": "2012", "original_machine": "Xeon"}),
              Entry(id="x86-split-lock", platform="qemu", catalogue="E3", description="d", metric="m", unit="x",
                    claimed=100.0, reproduced=90.0, ratio_to_claim=0.9, status="reproduced", note="n",
                    platform_label="QEMU-functional", platform_meaning="emulated", times_are_real=False,
                    groups=[{"variant": "locked", "n": 5, "median_ns_per_op": 9.0, "iqr_percent": 2.0}])]
        for e in es:
            rd.save_entry(e.to_dict(), "raw")
        summary = {"run_id": rd.run_id, "command": "reproduce-all", "quick": True, "sets": {},
                   "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00",
                   "experiments": [{"id": e.id, "platform": e.platform} for e in es],
                   "counts": {"reproduced": 2, "differs": 1, "not-applicable": 0, "failed": 0}}
        # what each platform tells the report (its column, modelled or not), as a run writes it
        from trapline import platforms
        info = {e.platform: platforms.find(e.platform).report_facts({}) for e in es}
        manifest = {"trapline": "0", "run_id": rd.run_id, "finished": summary["finished"], "platforms": {},
                    "platform_report": info,
                    "git": {"commit": "c" * 40, "dirty": False, "describe": "c0ffee"}, "compilers": {}}
        return rd.finish(summary, manifest, report.render), es, long_note
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask, want", [(0o022, 0o644), (0o077, 0o600)])
def test_result_files_get_the_users_umask(tmp_path, umask, want):
    final, _, _ = _finished_run(tmp_path, umask)
    files = [p for p in final.rglob("*") if p.is_file()]
    assert {"report.html", "report.md", "summary.json", "manifest.json", "summary.csv"} <= {p.name for p in files}
    assert {p.relative_to(final).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == \
        {p.relative_to(final).as_posix(): oct(want) for p in files}
    for d in [final] + [p for p in final.rglob("*") if p.is_dir()]:
        assert d.stat().st_mode & 0o777 == (0o755 if umask == 0o022 else 0o700), d


def test_entry_round_trips_and_keeps_unknown_keys():
    from trapline.entry import Entry
    d = {"id": "e", "platform": "host", "catalogue": "E1", "description": "d", "metric": "m", "unit": "x",
         "claimed": 2.0, "reproduced": 1.0, "ratio_to_claim": 0.5, "status": "differs", "note": "n",
         "from_a_newer_version": [1]}
    e = Entry.from_dict(d)
    assert e.ratio_to_claim == 0.5 and e.extra == {"from_a_newer_version": [1]}
    assert {k: v for k, v in e.to_dict().items() if k in d} == d
    assert "ratio_to_claim" not in Entry.from_dict({**d, "ratio_to_claim": None}).to_dict()


def test_report_is_a_pure_function_of_the_run_directory(tmp_path):
    from trapline import report
    final, es, long_note = _finished_run(tmp_path, 0o022)
    again = report.render(final)
    assert again == report.render(final)
    for name, data in again.items():  # what finish() wrote is what a redraw gives, byte for byte
        assert (final / name).read_bytes() == (data.encode() if isinstance(data, str) else data), name
    md = (final / "report.md").read_text()
    html = (final / "report.html").read_text()
    # both open with the claim matrix: rows in catalogue order (E3 before E9), columns host, QEMU, model
    for text in (md, html):
        assert text.index("Claim matrix") < text.index("Overview") < text.index("E3 x86-split-lock [host]")
        assert text.index(">E3<" if text is html else "| E3 |") < text.index(">E9<" if text is html else "| E9 |")
    assert "| claim | experiment | host | QEMU-functional | timing model |" in md
    assert "50.0x [host]; 0.5 of the claimed 100x; differs" in md
    # notes are whole in both; report.md links exactly the plots that exist (no QEMU timing plot)
    assert long_note in md and long_note in html
    linked = set(__import__("re").findall(r"\]\((plots/[^)]+)\)", md))
    assert linked == {f"plots/{p.name}" for p in (final / "plots").iterdir()} == {"plots/loop-order.model.png", "plots/overview.png"}
    assert "emulation time, not a prediction" in md
    assert "Source: Split locks (a, 2012); original machine: Xeon." in md


def test_report_of_a_run_missing_an_entry_is_a_one_line_error(tmp_path):
    from trapline import report
    from trapline.errors import UsageError
    final, _, _ = _finished_run(tmp_path, 0o022)
    (final / "entries" / "loop-order.model.json").unlink()
    with pytest.raises(UsageError, match=r"missing entries/loop-order.model.json"):
        report.render(final)


# ------------------------------------------------------------ the results directory: a full disk, for real

def _in_a_tmpfs(tmp_path, size: str, body: str) -> dict:
    """Run the Python `body` with FS naming a tmpfs of `size` mounted for it alone, in a
    private mount namespace (`unshare --mount` as root; else `--user --map-root-user` too,
    an unprivileged tmpfs), so that nothing stays mounted whatever happens. The body
    prints one JSON object, returned. Skips, saying why, only where neither can mount."""
    import subprocess
    import sys
    import textwrap
    from conftest import ROOT
    fs = tmp_path / "fs"
    fs.mkdir()
    script = textwrap.dedent(f"""
        import json, os, signal, subprocess, sys, time
        from pathlib import Path
        ROOT, FS = {str(ROOT)!r}, Path({str(fs)!r})
        sys.path.insert(0, ROOT)
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size={size}", "tmpfs", str(FS)],
                           capture_output=True, text=True)
        if m.returncode:
            print("cannot mount:", m.stderr.strip())
            sys.exit(77)

        def fill():
            '''Write zeros until the file system is full (ENOSPC for real); the filler's path.'''
            fd = os.open(FS / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                for chunk in (1 << 16, 1 << 12, 1):
                    while True:
                        try:
                            os.write(fd, b"\\0" * chunk)
                        except OSError:
                            break
            finally:
                os.close(fd)
            return FS / "filler"

        def files(d):
            return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*")) if Path(d).exists() else []
    """) + textwrap.dedent(body)
    why = []
    for pre in ([["unshare", "--mount"]] if os.geteuid() == 0 else []) + \
            [["unshare", "--user", "--map-root-user", "--mount"]]:
        try:
            r = subprocess.run(pre + [sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                               cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        except OSError as e:
            why.append(f"{' '.join(pre)}: {e}")
            continue
        if r.returncode == 0:
            return json.loads(r.stdout.strip().splitlines()[-1])
        if r.returncode != 77 and "unshare:" not in r.stderr:
            raise AssertionError(f"the ENOSPC scenario failed (status {r.returncode}):\n{r.stdout}\n{r.stderr}")
        why.append(f"{' '.join(pre)}: {(r.stdout + r.stderr).strip()}")
    pytest.skip("no tmpfs could be mounted for a real ENOSPC: " + "; ".join(why))


def test_a_full_disk_is_one_error_and_the_run_resumes_once_there_is_space(tmp_path):
    """Real ENOSPC on a 3 MB tmpfs: too little space for a run's size is refused before the
    run (nothing made); a disk that fills while the state, an entry or the report is
    written is one NoSpace naming the directory and what is left, with no temporary file,
    no summary, nothing renamed and no `latest`; once space is freed, the same run ends."""
    out = _in_a_tmpfs(tmp_path, "3m", """
        from trapline import results
        from trapline.errors import NoSpace
        root, out = FS / "results", {}
        try:
            results.RunDir.open({"command": "run"}, root=root, entries=40)
        except NoSpace as e:
            out["precheck"] = str(e)
        out["after_precheck"] = files(FS)
        rd = results.RunDir.open({"command": "run"}, root=root, entries=0)
        filler = fill()
        entry = {"id": "e", "platform": "host", "status": "reproduced"}
        for step, call in (("save", lambda: rd.save_entry(entry, "raw " * 5000)),
                           ("finish", lambda: rd.finish({"run_id": rd.run_id}, {"m": 1}, {"report.md": "# r" * 9000}))):
            try:
                call()
                out[step] = None
            except NoSpace as e:
                out[step] = str(e)
            out[f"after_{step}"] = files(root)
        filler.unlink()
        rd.save_entry(entry, "raw " * 5000)
        final = rd.finish({"run_id": rd.run_id}, {"m": 1}, {"report.md": "# r" * 9000})
        out["run_dir"], out["latest"], out["final"] = str(rd.path), os.readlink(root / "latest"), files(root)
        print(json.dumps(out))
    """)
    assert "no space for the run" in out["precheck"] and "free" in out["precheck"] and "needs about 42 MB" \
        in out["precheck"], out["precheck"]
    assert out["after_precheck"] == [], out["after_precheck"]
    run = out["run_dir"]
    for step in ("save", "finish"):
        msg = out[step]
        assert msg and msg.startswith("no space left in ") and " free" in msg and "resumes" in msg, (step, msg)
        assert "\n" not in msg and run in msg, (step, msg)
        left = out[f"after_{step}"]
        assert not [f for f in left if os.path.basename(f).startswith(".") and f != ".incomplete"], left
        assert not [f for f in left if f.endswith("summary.json") or f.startswith("latest") or
                    not f.startswith(".incomplete")], left
        assert any(f.endswith("state.json") for f in left), left  # the run can resume
    assert "needs" not in out["save"] or "(" in out["save"]
    name = os.path.basename(run)
    assert out["latest"] == name and f"{name}/summary.json" in out["final"] and f"{name}/entries/e.host.json" in \
        out["final"], out["final"]


def test_a_disk_that_fills_during_a_run_is_one_line_and_the_rerun_resumes(tmp_path):
    """The CLI on a real ENOSPC: the disk fills while `run` runs (the harness is stopped
    once its run exists, the tmpfs filled, the harness let go): one line, exit 1, no
    traceback, nothing finished; the same command after freeing space resumes the run."""
    out = _in_a_tmpfs(tmp_path, "8m", """
        root = FS / "results"
        env = dict(os.environ, PYTHONPATH=ROOT, TRAPLINE_RESULTS=str(root))
        argv = [sys.executable, "-m", "trapline", "run", "loop-order", "--platform", "host", "--quick"]
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(root.glob(".incomplete/*/state.json")):
            time.sleep(0.002)
        os.kill(p.pid, signal.SIGSTOP)
        filler = fill()
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=300)
        out = {"rc": p.returncode, "err": err, "after": files(root)}
        filler.unlink()
        r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        out.update(rc2=r.returncode, err2=r.stderr, final=files(root))
        print(json.dumps(out))
    """)
    lines = out["err"].strip().splitlines()
    assert out["rc"] == 1 and "Traceback" not in out["err"], out["err"]
    assert lines[-1].startswith("trapline: failed: no space left in ") and "free" in lines[-1], lines
    assert not [ln for ln in lines[:-1] if not ln.startswith("[")], lines  # progress lines, then the one error
    assert not [f for f in out["after"] if not f.startswith(".incomplete")], out["after"]  # no run finished
    assert not [f for f in out["after"] if f.endswith("/lock")], out["after"]  # its owner let go of it
    assert [f for f in out["after"] if f.endswith("/state.json")], out["after"]  # and kept it to resume
    assert out["rc2"] == 0 and "resuming run" in out["err2"], out["err2"]
    assert "latest" in out["final"]
