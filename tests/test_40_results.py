"""Results: atomic writes, no summary.json before completion, resume."""

import json
import os

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


def test_rundir_resumes_same_args_and_not_others(tmp_path):
    a = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    b = results.RunDir.open({"command": "run", "quick": True}, root=tmp_path)
    assert b.resumed and b.run_id == a.run_id
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
