"""trapline's gem5 build (trapline/platforms/gem5/from_source.py, `./run.sh gem5 build`) and
which gem5 the platform finds (binary.find: --gem5, $GEM5, trapline's build, PATH).

Without building gem5 (that takes about 50 minutes): every change in gem5_configs/changes/
applies to the pinned release source (the touched files, unpacked from ../shared/gem5's
tarball); switching change sets rewrites exactly the files that differ and brings back
the release's own; a patch that no longer applies, a tarball whose sha256 is not the
pinned one and a missing build tool are one line and exit 2, before anything is built,
with the tree as it was; the finder prefers trapline's build over a gem5 on PATH and
says which it found; run.sh installs the packages the build checks for.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, trapline
from trapline.errors import UsageError
from trapline.platforms.gem5 import binary, from_source


def _tree_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(d)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAPLINE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------ the changes

def test_every_change_is_a_folder_with_a_readme_and_something_to_build():
    names = from_source.names()
    assert {"bus-lock", "numa-first-touch", "sparc-glibc", "sparc-prefetch"} <= set(names)
    for c in from_source.changes():
        readme = (c.path / "README.md").read_text()
        for heading in ("**Why.**", "**What.**", "**Tested.**", "**Cost.**"):
            assert heading in readme, f"{c.name}/README.md lacks {heading}"
        assert c.files(), f"{c.name} has neither a patch nor extras/"
        for patch in c.patches:
            touched = from_source._touched(patch)
            assert touched, f"{patch} touches no file"
            for path, _created in touched:
                assert path in readme, f"{c.name}/README.md does not name {path}, which its patch changes"


def test_the_changes_hash_covers_patches_and_extras_but_not_the_readmes(tmp_path, monkeypatch):
    work = tmp_path / "changes"
    shutil.copytree(from_source.CHANGES_DIR, work)
    monkeypatch.setattr(from_source, "CHANGES_DIR", work)
    before = from_source.changes_sha256()
    (work / "bus-lock" / "README.md").write_text("rewritten\n")
    assert from_source.changes_sha256() == before
    cc = work / "bus-lock" / "extras" / "bus_lock.cc"
    cc.write_text(cc.read_text() + "\n// one more line\n")
    assert from_source.changes_sha256() != before


def _shared_source() -> Path:
    p = from_source.shared(*from_source.SHARED_SOURCE)
    if not p.is_file():
        pytest.skip(f"no gem5 source tarball at {p} (the release source the build pins)")
    return p


@pytest.fixture(scope="module")
def release_files(tmp_path_factory):
    """The release's own copies of every file a patch touches (unpacked from the tarball)."""
    tarball = _shared_source()
    out = tmp_path_factory.mktemp("release")
    members = sorted({p for c in from_source.changes() for patch in c.patches
                      for p, created in from_source._touched(patch) if not created})
    top = "gem5-v24.0.0.1"
    r = subprocess.run(["tar", "-xJf", str(tarball), "-C", str(out), *[f"{top}/{m}" for m in members]],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out / top


def test_every_patch_applies_to_the_pinned_release_in_order(release_files, tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(release_files, tree)
    written = from_source.apply_changes(tree, log=lambda s: None)
    assert written, "the changes wrote nothing"
    # the tree is the release plus the patches: applying again writes nothing
    assert from_source.apply_changes(tree, log=lambda s: None) == []
    faults = (tree / "src/arch/sparc/faults.cc").read_text()
    assert "p->fixupFault(vaddr, tc)" in faults and "isStrongPrefetch(inst)" in faults
    assert "first_touch_pools" in (tree / "src/sim/Workload.py").read_text()
    assert '{ 347, "getrandom", getrandomFunc<SparcLinux> }' in (tree / "src/arch/sparc/linux/syscalls.cc").read_text()


def test_a_change_set_that_drops_a_patch_brings_back_the_release_files(release_files, tmp_path, monkeypatch):
    tree = tmp_path / "src"
    shutil.copytree(release_files, tree)
    pristine = (tree / "src/arch/sparc/linux/syscalls.cc").read_bytes()
    from_source.apply_changes(tree, log=lambda s: None)
    assert (tree / "src/arch/sparc/linux/syscalls.cc").read_bytes() != pristine
    untouched_mtime = (tree / "src/sim/process.hh").stat().st_mtime_ns
    work = tmp_path / "changes"
    shutil.copytree(from_source.CHANGES_DIR, work)
    shutil.rmtree(work / "sparc-glibc")
    monkeypatch.setattr(from_source, "CHANGES_DIR", work)
    written = from_source.apply_changes(tree, log=lambda s: None)
    assert written == ["src/arch/sparc/linux/linux.hh", "src/arch/sparc/linux/syscalls.cc", "src/sim/syscall_emul.hh"]
    assert (tree / "src/arch/sparc/linux/syscalls.cc").read_bytes() == pristine
    # a file whose content stays is not rewritten (scons sees no change there)
    assert (tree / "src/sim/process.hh").stat().st_mtime_ns == untouched_mtime


def test_a_patch_that_no_longer_applies_is_one_line_and_leaves_the_tree(release_files, tmp_path, monkeypatch):
    tree = tmp_path / "src"
    shutil.copytree(release_files, tree)
    work = tmp_path / "changes"
    shutil.copytree(from_source.CHANGES_DIR, work)
    patch = work / "sparc-glibc" / "sparc-glibc.patch"
    patch.write_text(patch.read_text().replace('-    { 54, "ioctl" },', '-    { 54, "ioctl_not_in_gem5" },'))
    monkeypatch.setattr(from_source, "CHANGES_DIR", work)
    before = _tree_digest(tree)
    with pytest.raises(UsageError) as e:
        from_source.apply_changes(tree, log=lambda s: None)
    msg = str(e.value)
    assert msg.startswith("gem5 change sparc-glibc/sparc-glibc.patch no longer applies to gem5 v24.0.0.1")
    assert "\n" not in msg
    assert _tree_digest(tree) == before


def test_extras_are_synced_as_one_folder_per_change_with_the_build_info(tmp_path):
    tree = tmp_path / "src-x"
    tree.mkdir()
    extras = from_source.sync_extras(tree, "ab" * 32)
    assert sorted(p.name for p in extras.iterdir()) == ["bus-lock", "numa-first-touch", "overlap-stats", "prefetchers",
                                                         "trapline_build"]
    info = (extras / "trapline_build" / "trapline_build.py").read_text()
    ns: dict = {}
    exec(info, ns)
    assert ns["CHANGES"] == from_source.names() and ns["CHANGES_SHA256"] == "ab" * 32
    assert (extras / "bus-lock" / "bus_lock.cc").read_bytes() == \
        (from_source.CHANGES_DIR / "bus-lock" / "extras" / "bus_lock.cc").read_bytes()
    stale = extras / "bus-lock" / "old.cc"
    stale.write_text("// gone from the changes\n")
    from_source.sync_extras(tree, "ab" * 32)
    assert not stale.exists()


# ------------------------------------------------------------------ bad input, before any work

def test_a_tarball_that_is_not_the_pinned_source_is_refused_naming_both_hashes(tmp_path, cache):
    fake = tmp_path / "gem5-src.tar.xz"
    fake.write_bytes(b"not gem5")
    r = trapline("gem5", "build", "--source", str(fake), env={"TRAPLINE_CACHE": str(cache)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trapline: error: --source {fake}: sha256 "), r.stderr
    assert hashlib.sha256(b"not gem5").hexdigest() in lines[0] and next(iter(from_source.SOURCES)) in lines[0]
    assert not (cache / "gem5").exists() or not any((cache / "gem5").glob("src-*"))


def test_a_missing_source_file_is_one_line(tmp_path, cache):
    r = trapline("gem5", "build", "--source", str(tmp_path / "nope.tar.xz"), env={"TRAPLINE_CACHE": str(cache)})
    assert r.returncode == 2
    assert r.stderr.strip() == (f"trapline: error: --source {tmp_path / 'nope.tar.xz'}: no such file; it takes gem5 "
                                f"v24.0.0.1's release source tarball (sha256 {next(iter(from_source.SOURCES))})")


def test_a_missing_build_tool_is_one_line_naming_its_debian_package(tmp_path, cache):
    _shared_source()
    # a PATH without scons (and the rest): the build stops before unpacking anything
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("tar", "xz", "sha256sum"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, bindir / tool)
    env = {"TRAPLINE_CACHE": str(cache), "PATH": str(bindir)}
    r = subprocess.run([sys.executable, "-m", "trapline", "gem5", "build"], capture_output=True, text=True,
                       env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=300)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert line.startswith("trapline: error: gem5's build needs Debian packages that are missing: ")
    assert "scons" in line and "protobuf-compiler" in line and "\n" not in line
    assert not any((cache / "gem5").glob("src-*")) if (cache / "gem5").exists() else True


def test_the_tests_never_compile_gem5(tmp_path, cache):
    """conftest sets TRAPLINE_NO_GEM5_BUILD=1 for every test and what it runs: with the pinned
    source and every build tool there, `gem5 build` still stops before unpacking anything."""
    assert os.environ.get(from_source.NO_BUILD_ENV) == "1"
    _shared_source()
    r = trapline("gem5", "build", env={"TRAPLINE_CACHE": str(cache)}, timeout=300)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith("trapline: error: ")
    if "Debian packages that are missing" not in line:  # (a machine without the build tools says that first)
        assert "gem5 is not compiled here (TRAPLINE_NO_GEM5_BUILD=1" in line, line
    assert not (cache / "gem5").exists() or not any((cache / "gem5").glob("src-*"))


def test_the_builder_runs_as_a_script_with_four_trapline_files_and_lists_its_packages(tmp_path):
    """The Docker image's gem5 stage copies from_source.py and the modules it imports alone;
    run.sh installs the packages it lists for `gem5 build`."""
    for name in ("__init__.py", "errors.py", "paths.py", "proc.py", "results.py"):
        (tmp_path / "trapline").mkdir(exist_ok=True)
        shutil.copy2(ROOT / "trapline" / name, tmp_path / "trapline" / name)
    script = tmp_path / "trapline" / "platforms" / "gem5" / "from_source.py"
    script.parent.mkdir(parents=True)
    shutil.copy2(ROOT / "trapline" / "platforms" / "gem5" / "from_source.py", script)
    r = subprocess.run([sys.executable, str(script), "packages"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    listed = r.stdout.split()
    assert listed == from_source.packages() and {"scons", "protobuf-compiler", "libhdf5-dev"} <= set(listed)
    assert "from_source.py\" packages" in (ROOT / "run.sh").read_text()


# ------------------------------------------------------------------ which gem5 runs

def test_the_finder_prefers_trapline_build_over_path_and_says_which(gem5_binary, tmp_path, cache, monkeypatch):
    """A binary in the cache's trapline-<key>/ for the current changes is found before a
    gem5.opt on PATH (an explicit --gem5 or GEM5 still wins). The stock binary stands in
    for the build here, so its facts still say stock: the build is recognised by its
    place and build.json, its changes by what the binary itself says (m5.trapline_build)."""
    monkeypatch.delenv("GEM5", raising=False)
    pathdir = tmp_path / "path"
    pathdir.mkdir()
    os.symlink(gem5_binary, pathdir / "gem5.opt")
    monkeypatch.setenv("PATH", f"{pathdir}:{os.environ['PATH']}")
    assert binary.find() == Path(gem5_binary).resolve()
    out = from_source.output_dir("0123456789abcdef")
    out.mkdir(parents=True)
    shutil.copy2(gem5_binary, out / "gem5.opt")
    (out / "build.json").write_text(json.dumps({"changes_sha256": from_source.changes_sha256()}))
    assert binary.find() == out / "gem5.opt"
    assert binary.find(str(gem5_binary)) == Path(gem5_binary).resolve()
    # a build of other changes is not taken
    (out / "build.json").write_text(json.dumps({"changes_sha256": "0" * 64}))
    assert binary.find() == Path(gem5_binary).resolve()


def test_which_says_stock_or_trapline_and_the_changes_hash(gem5_binary, cache):
    r = trapline("gem5", "which", "--gem5", str(gem5_binary), env={"TRAPLINE_CACHE": str(cache)}, timeout=300)
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    own = facts["changes"]
    assert facts["build"] in ("stock", "trapline")
    if facts["build"] == "stock":
        assert own == [] and facts["changes_sha256"] is None
    else:
        assert set(own) == set(from_source.names()) and len(facts["changes_sha256"]) == 64


def test_progress_estimates_the_time_left_from_a_whole_build_not_the_quick_first_steps(monkeypatch):
    lines, now = [], [1000.0]
    monkeypatch.setattr(from_source.time, "monotonic", lambda: now[0])
    prog = from_source._Progress(lines.append, expected=100, every=0, expected_seconds=90 * 60)
    now[0] += 6 * 60                      # 6 minutes for the first quarter of the steps
    for _ in range(25):
        prog("  [     CXX] X86_SPARC/base/x.cc -> .o")
    prog("a line that is not a step")
    assert prog.steps == 25
    assert lines[-1] == "gem5 build: 25 steps of about 100 (25%), 6 min so far, about 84 min left"
    rate = from_source._Progress(lines.append, expected=100, every=0)  # a resumed build: the steps' own rate
    now[0] += 6 * 60
    for _ in range(25):
        rate("  [     CXX] X86_SPARC/base/x.cc -> .o")
    assert lines[-1].endswith("6 min so far, about 18 min left")
