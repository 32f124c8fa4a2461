"""trapline's gem5: gem5's pinned release source plus trapline's changes, built into the cache.

    ./run.sh gem5 build [--source TARBALL] [-j N]

The source is gem5 v24.0.0.1 (RELEASE): a release tarball whose sha256 is one of
SOURCES (``--source``, ``$TRAPLINE_GEM5_SOURCE``, or ../shared/gem5/'s copy beside
the clone), else a clone of gem5's repository at the release tag, checked against
its commit (COMMIT). The changes are the folders of gem5_configs/changes/, one per
change, named for what it gives (the name a lane asks for); each has a README.md
(what it does, why, the gem5 lines it touches, upstream reports, tests) and any of
*.patch (against the release, applied with ``patch -p1``, changes in name order)
and extras/ (gem5's EXTRAS: out-of-tree SimObjects, built as <EXTRAS>/<name>/).

Where things go (all under <cache>/gem5/, the cache is $TRAPLINE_CACHE):

    src-<source>/                 the source tree, unpacked once; gem5 builds in its build/X86_SPARC
    src-<source>.orig/            the release's own copy of every file a patch ever touched
    src-<source>.applied.json     which changes the tree holds now
    src-<source>-extras/          the EXTRAS directory scons reads (each change's extras/, and
                                  trapline_build/)
    trapline-<key>/gem5.opt       the stripped binary, with build.json beside it

<key> hashes the source, the changes and the build options (CONFIG, TARGET), so a
build of other changes is another binary while the tree and scons's own state are
shared: a second build recompiles only the files the changes touch. Files are
written into the tree only when their content differs, so scons sees no change
elsewhere. A killed build resumes where it stopped (scons keeps every finished
object); the binary is renamed into place only when complete.

A build carries a small Python module (m5.trapline_build: CHANGES_SHA256,
CHANGES) so that the binary says which changes it has wherever it is copied to
(gem5_configs/probe.py reports it; binary.facts reads it).

This module imports only the standard library and trapline's errors, paths, proc and
results, so the Docker image's gem5 stage runs it as a script with those files alone
(`python3 trapline/platforms/gem5/from_source.py build|packages`): an edit elsewhere in
trapline does not touch that stage.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trapline.errors import NoSpace, RunFailed, UsageError
from trapline.paths import ROOT, cache_root, shared
from trapline.proc import tail
from trapline.results import atomic_json, atomic_write, sha256_file

RELEASE = "v24.0.0.1"
COMMIT = "b1a44b89c7bae73fae2dc547bc1f871452075b85"   # gem5's tag v24.0.0.1
REPOSITORY = "https://github.com/gem5/gem5.git"
# release tarballs trapline builds from, by sha256
SOURCES = {
    "35435b6d105aacd5725e8a9a392d95f2deb2eb49c660fa6bd4580100d78bc1a8":
        "gem5 v24.0.0.1 release source (commit b1a44b89c7ba; tests/test-progs and ext/dramsys left out)",
}
SOURCE_ENV = "TRAPLINE_GEM5_SOURCE"
# set (to 1) where gem5 must never be compiled: the tests and CI (tests/conftest.py), which take a gem5
# already built (binary.for_tests); a build that would compile stops with one line
NO_BUILD_ENV = "TRAPLINE_NO_GEM5_BUILD"
SHARED_SOURCE = ("gem5", "gem5-v24.0.0.1-src.tar.xz")   # in ../shared/ (paths.shared)

# the changes: the clone's, or a copy of them under work ($TRAPLINE_GEM5_CHANGES: a change of
# your own, or the build benchmark's edited copy); the tree is shared, so switching back and
# forth recompiles only what differs
CHANGES_DIR = Path(os.environ.get("TRAPLINE_GEM5_CHANGES") or ROOT / "gem5_configs" / "changes")
VARIANT = "X86_SPARC"
TARGET = f"build/{VARIANT}/gem5.opt"
# gem5's Kconfig choices: X86 and SPARC, without Ruby (trapline's configurations use the classic
# caches; the change lean-build lets gem5's stdlib run on such a build), SystemC or the KVM CPU
CONFIG = "BUILD_ISA=y\nUSE_SPARC_ISA=y\nUSE_X86_ISA=y\n"
SETCONFIG = ("USE_SYSTEMC=n", "USE_KVM=n")
# what the build runs, and the Debian package of each (run.sh installs them for `gem5 build`)
BUILD_TOOLS = {"scons": "scons", "m4": "m4", "g++": "g++", "python3-config": "python3-dev",
               "protoc": "protobuf-compiler", "pkg-config": "pkg-config", "patch": "patch"}
BUILD_HEADERS = {"zlib.h": "zlib1g-dev", "google/protobuf/message.h": "libprotobuf-dev",
                 "gperftools/tcmalloc.h": "libgoogle-perftools-dev", "png.h": "libpng-dev",
                 "hdf5/serial/hdf5.h": "libhdf5-dev"}
# free space a build needs where the cache is: a whole build tree, or a rebuild and a binary
SPACE_COLD = 14 << 30
SPACE_WARM = 2 << 30
# scons's steps in a whole build of TARGET with no EXTRAS (measured: the progress estimate's
# denominator until this machine has finished a build and recorded its own count)
STEPS_DEFAULT = 2906    # a whole build of v24.0.0.1 with the changes (scons steps, measured)
SECONDS_DEFAULT = 2985 * 2    # a whole build's compile time times its jobs (49.8 min on 2 cores, measured)
# what a whole build takes, told wherever a user is asked to build (measured: docs/performance.md)
DURATION = "about 50 minutes on 2 cores, more beside other work"
STEP = re.compile(r"^\s*\[\s*[A-Z][A-Z ]*\]\s")


@dataclass
class Source:
    id: str          # "tar-<sha256>" or "git-<commit>"
    what: str        # one line for people
    tarball: Path | None = None

    @property
    def key(self) -> str:
        return self.id.split("-", 1)[1][:16]


INFO = "trapline_build"   # the EXTRAS folder saying which changes a binary has (no change may be called so)


@dataclass
class Change:
    name: str        # what it gives ("numa-first-touch"): the name a lane asks for
    path: Path       # its folder

    @property
    def patches(self) -> list[Path]:
        return sorted(self.path.glob("*.patch"))

    @property
    def extras(self) -> Path | None:
        d = self.path / "extras"
        return d if d.is_dir() else None

    def files(self) -> list[Path]:
        """What the binary is built from (the README is not)."""
        return self.patches + (_files_under(self.extras) if self.extras else [])


def changes() -> list[Change]:
    """trapline's changes to gem5, in the order they are applied (by name)."""
    if not CHANGES_DIR.is_dir():
        return []
    return [Change(d.name, d) for d in sorted(CHANGES_DIR.iterdir())
            if d.is_dir() and not d.name.startswith((".", "_")) and d.name != INFO]


def names() -> list[str]:
    return [c.name for c in changes()]


def _files_under(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def changes_sha256() -> str:
    """The changes' hash: every patch and extras file (path and content), not the READMEs."""
    h = hashlib.sha256()
    for c in changes():
        for f in c.files():
            h.update(f.relative_to(CHANGES_DIR).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def build_key(source: Source, changes_digest: str) -> str:
    h = hashlib.sha256("\n".join([source.id, changes_digest, CONFIG, " ".join(SETCONFIG), TARGET]).encode())
    return h.hexdigest()[:16]


def root(environ=None) -> Path:
    return cache_root(environ) / "gem5"


def output_dir(key: str, environ=None) -> Path:
    return root(environ) / f"trapline-{key}"


def built(source: Source | None = None, environ=None) -> Path | None:
    """The binary of trapline's gem5 for the current changes, if it was built: for `source`,
    else for any source (the newest such build); in the cache of `environ` (default the
    process's environment)."""
    digest = changes_sha256()
    if source is not None:
        p = output_dir(build_key(source, digest), environ) / "gem5.opt"
        return p if p.is_file() else None
    found = []
    for info in root(environ).glob("trapline-*/build.json"):
        try:
            d = json.loads(info.read_text())
        except (OSError, ValueError):
            continue
        exe = info.parent / "gem5.opt"
        if isinstance(d, dict) and d.get("changes_sha256") == digest and exe.is_file():
            found.append((exe.stat().st_mtime, exe))
    return max(found)[1] if found else None


# ---------------------------------------------------------------- the source

def find_source(flag: str | None, log) -> Source:
    """The release source: --source, $TRAPLINE_GEM5_SOURCE, ../shared/gem5's tarball, else a
    clone of gem5's repository at the tag (checked against COMMIT)."""
    for where, value in (("--source", flag), (SOURCE_ENV, os.environ.get(SOURCE_ENV))):
        if value:
            return _tarball(Path(value).expanduser(), where)
    p = shared(*SHARED_SOURCE)
    if p.is_file():
        return _tarball(p, "../shared")
    return _clone(log)


def _tarball(p: Path, where: str) -> Source:
    if not p.is_file():
        raise UsageError(f"{where} {p}: no such file; it takes gem5 {RELEASE}'s release source tarball "
                         f"(sha256 {next(iter(SOURCES))})")
    digest = sha256_file(p)
    if digest not in SOURCES:
        raise UsageError(f"{where} {p}: sha256 {digest} is not gem5 {RELEASE}'s pinned source; valid: "
                         + ", ".join(f"{k} ({v})" for k, v in SOURCES.items()))
    return Source(f"tar-{digest}", SOURCES[digest], p.resolve())


def _clone(log) -> Source:
    tree = root() / f"src-{COMMIT[:16]}"
    if not (tree / ".trapline-complete").exists():
        git = shutil.which("git")
        if git is None:
            raise UsageError(f"no gem5 source: pass --source TARBALL (gem5 {RELEASE}'s release source), or install "
                             "git to clone it")
        log(f"cloning gem5 {RELEASE} from {REPOSITORY}")
        tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=_mkdir(root())))
        try:
            r = subprocess.run([git, "clone", "-q", "--depth", "1", "--branch", RELEASE, REPOSITORY, str(tmp / "t")],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise UsageError(f"no gem5 source: cloning {REPOSITORY} failed ({tail(r.stderr, 1).strip()}); pass "
                                 f"--source TARBALL (gem5 {RELEASE}'s release source, sha256 {next(iter(SOURCES))})")
            head = subprocess.run([git, "-C", str(tmp / "t"), "rev-parse", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
            if head != COMMIT:
                raise UsageError(f"{REPOSITORY} tag {RELEASE} is commit {head}, not the pinned {COMMIT}")
            (tmp / "t" / ".trapline-complete").touch()
            if tree.exists():
                shutil.rmtree(tree)
            os.replace(tmp / "t", tree)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Source(f"git-{COMMIT}", f"gem5 {RELEASE} (git {REPOSITORY}, commit {COMMIT[:12]})")


def _mkdir(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return d


def tree_of(source: Source) -> Path:
    return root() / f"src-{source.key}"


def unpack(source: Source, log) -> Path:
    """The source tree, unpacked once (to a temporary folder renamed into place)."""
    tree = tree_of(source)
    if source.tarball is None or (tree / "SConstruct").is_file():
        _complete(tree)
        return tree
    log(f"unpacking {source.tarball.name} into {tree}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{tree.name}.", dir=_mkdir(root())))
    try:
        r = subprocess.run(["tar", "-xf", str(source.tarball), "-C", str(tmp), "--no-same-owner",
                            "--no-same-permissions"], capture_output=True, text=True)
        if r.returncode != 0:
            if "No space left" in r.stderr:
                raise OSError(errno.ENOSPC, r.stderr)
            raise RunFailed(f"unpacking {source.tarball} failed: {tail(r.stderr, 3)}")
        tops = [d for d in tmp.iterdir()]
        if len(tops) != 1 or not (tops[0] / "SConstruct").is_file():
            raise RunFailed(f"{source.tarball} is not a gem5 source tarball (one folder holding SConstruct)")
        os.replace(tops[0], tree)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(f"no space left in {root()} to unpack gem5's source; free some and run the same "
                          "command again") from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _complete(tree)
    return tree


# gem5's SConscripts read HAVE_DRAMSYS, which ext/dramsys/SConscript sets; a release source
# without ext/dramsys (as ../shared/gem5's) gets gem5's own file cut to its no-DRAMSys branch.
DRAMSYS_SCONSCRIPT = '''# Written by trapline's gem5 build (trapline/platforms/gem5/from_source.py): this source
# leaves ext/dramsys out, and gem5's SConscripts read HAVE_DRAMSYS. gem5's own
# ext/dramsys/SConscript, reduced to its "no DRAMSys checkout" branch.
Import("env")
env["HAVE_DRAMSYS"] = False
'''


def _complete(tree: Path) -> None:
    f = tree / "ext" / "dramsys" / "SConscript"
    if not f.exists():
        f.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(f, DRAMSYS_SCONSCRIPT)


# ---------------------------------------------------------------- the changes

def _touched(patch: Path) -> list[tuple[str, bool]]:
    """(path, created) for each file a -p1 unified diff changes."""
    out, old = [], None
    for line in patch.read_text().splitlines():
        if line.startswith("--- "):
            old = line[4:].split("\t")[0].strip()
        elif line.startswith("+++ ") and old is not None:
            new = line[4:].split("\t")[0].strip()
            path = new if new != "/dev/null" else old
            out.append((path.split("/", 1)[1], old == "/dev/null"))
            old = None
    return out


def apply_changes(tree: Path, log) -> list[str]:
    """Bring the tree to the release source plus the current patches; returns the files
    written. A patch that does not apply is a UsageError naming it, the tree untouched."""
    orig = tree.with_name(tree.name + ".orig")
    state_file = tree.with_name(tree.name + ".applied.json")
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        state = {"files": {}}
    patches = [p for c in changes() for p in c.patches]
    touched = {}
    for patch in patches:
        for path, created in _touched(patch):
            touched.setdefault(path, created)
    # the release's own copy of every file a patch touches, kept before it is first changed
    for path, created in touched.items():
        keep = orig / path
        if not keep.exists() and not (orig / (path + ".absent")).exists():
            if path in state["files"]:
                raise RunFailed(f"{tree}: {path} was changed but its release copy is gone from {orig}; "
                                f"delete {tree} and build again")
            if (tree / path).exists():
                keep.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / path, keep)
            else:
                (orig / (path + ".absent")).parent.mkdir(parents=True, exist_ok=True)
                (orig / (path + ".absent")).touch()
    with tempfile.TemporaryDirectory(prefix="trapline-gem5-patch-") as stage:
        st = Path(stage)
        for path in touched:
            if (orig / path).exists():
                (st / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(orig / path, st / path)
        for patch in patches:
            r = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-",
                                "-d", str(st), "-i", str(patch)], capture_output=True, text=True)
            if r.returncode != 0:
                raise UsageError(f"gem5 change {patch.relative_to(CHANGES_DIR)} no longer applies to gem5 {RELEASE}: "
                                 f"{' / '.join(tail(r.stdout + r.stderr, 3).splitlines())}")
        wanted: dict[str, bytes | None] = {}
        for path in set(touched) | set(state["files"]):
            if path in touched:
                wanted[path] = (st / path).read_bytes() if (st / path).exists() else None
            else:
                wanted[path] = (orig / path).read_bytes() if (orig / path).exists() else None
    written = []
    for path, blob in sorted(wanted.items()):
        dst = tree / path
        have = dst.read_bytes() if dst.exists() else None
        if have == blob:
            continue
        if blob is None:
            dst.unlink()
        else:
            atomic_write(dst, blob)
        written.append(path)
    atomic_json(state_file, {"files": {p: hashlib.sha256(b).hexdigest() for p, b in wanted.items()
                                       if b is not None and p in touched}})
    if written:
        log(f"gem5 source: {len(written)} file(s) changed by trapline's patches: {', '.join(written[:6])}"
            + (" ..." if len(written) > 6 else ""))
    return written


BUILD_INFO_SCONSCRIPT = '''# Written by trapline's gem5 build: which of trapline's changes this binary has.
Import("*")
PySource("m5", "trapline_build.py")
'''


def sync_extras(tree: Path, digest: str) -> Path:
    """<tree>-extras: each change's extras/ as <name>/, and a trapline_build folder saying
    which changes the binary has; files written only where their content differs."""
    dst = tree.with_name(tree.name + "-extras")
    want: dict[str, bytes] = {}
    for c in changes():
        if c.extras:
            for f in _files_under(c.extras):
                want[f"{c.name}/{f.relative_to(c.extras).as_posix()}"] = f.read_bytes()
    want[f"{INFO}/SConscript"] = BUILD_INFO_SCONSCRIPT.encode()
    want[f"{INFO}/trapline_build.py"] = (
        '"""trapline\'s changes in this gem5 (trapline/platforms/gem5/from_source.py)."""\n'
        f"CHANGES_SHA256 = {digest!r}\nCHANGES = {names()!r}\nRELEASE = {RELEASE!r}\n").encode()
    dst.mkdir(parents=True, exist_ok=True)
    for rel, blob in want.items():
        f = dst / rel
        if not f.is_file() or f.read_bytes() != blob:
            atomic_write(f, blob)
    for f in _files_under(dst):
        if f.relative_to(dst).as_posix() not in want:
            f.unlink()
    return dst


# ---------------------------------------------------------------- the build

def missing_dependencies() -> list[str]:
    """The Debian packages of the build tools and headers this machine lacks."""
    out = [pkg for tool, pkg in BUILD_TOOLS.items() if shutil.which(tool) is None]
    for header, pkg in BUILD_HEADERS.items():
        if not any((Path(d) / header).is_file() for d in ("/usr/include", "/usr/local/include")):
            out.append(pkg)
    return sorted(set(out))


def python_config() -> str:
    """The python3-config of the Python gem5 embeds: Debian's (python3-dev, the libpython3.11
    run.sh installs), not one earlier on PATH (a pyenv or venv shim would link another)."""
    debian = Path("/usr/bin/python3-config")
    return str(debian) if debian.exists() else (shutil.which("python3-config") or "python3-config")


def _scons(tree: Path, args: list[str], log_file, jobs: int | None = None, progress=None) -> int:
    env = dict(os.environ)
    if shutil.which("ccache") and Path("/usr/lib/ccache").is_dir():
        env["PATH"] = "/usr/lib/ccache:" + env.get("PATH", "")
    # gem5's SConstruct reads PYTHON_CONFIG from the environment only (site_scons/
    # gem5_scons/defaults.py); as a scons argument it was ignored
    env["PYTHON_CONFIG"] = python_config()
    cmd = ["scons", *args]
    if jobs:
        cmd.append(f"-j{jobs}")
    log_file.write(f"$ PYTHON_CONFIG={env['PYTHON_CONFIG']} {' '.join(cmd)}\n")
    log_file.flush()
    p = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        for line in p.stdout:
            log_file.write(line)
            if progress is not None:
                progress(line)
        return p.wait()
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(p.pid, signal.SIGKILL)
        raise


class _Progress:
    """One line every `every` seconds: steps done of the expected total, elapsed, left.
    With `expected_seconds` (a whole build: this machine's last whole build, else
    SECONDS_DEFAULT, per job) the time left is that share of it still to come: the
    first steps (generated and embedded Python files) are quick, so the rate of the
    steps so far would promise far too little."""

    def __init__(self, log, expected: int, every: float = 30.0, expected_seconds: float | None = None):
        self.log, self.expected, self.every = log, max(expected, 1), every
        self.expected_seconds = expected_seconds
        self.steps, self.t0, self.last = 0, time.monotonic(), time.monotonic()

    def left(self, spent: float, done: float) -> float:
        if self.expected_seconds:
            return max(self.expected_seconds * (1 - done), self.expected_seconds - spent, 60.0)
        return spent * (1 - done) / done if done > 0 else 0

    def __call__(self, line: str) -> None:
        if not STEP.match(line):
            return
        self.steps += 1
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            done = min(self.steps / self.expected, 0.99)
            spent = now - self.t0
            self.log(f"gem5 build: {self.steps} steps of about {self.expected} ({done:.0%}), "
                     f"{spent / 60:.0f} min so far, about {self.left(spent, done) / 60:.0f} min left")


def _last_errors(log_path: Path, n: int = 15) -> str:
    lines = log_path.read_text(errors="replace").splitlines()
    errs = [i for i, ln in enumerate(lines) if re.search(r"\berror\b|Error \d+|fatal", ln)]
    if errs:
        i = errs[0]
        return "\n".join(lines[max(0, i - 3):i + n])
    return "\n".join(lines[-n:])


def build(source_flag: str | None = None, jobs: int | None = None, log=None) -> Path:
    """Build trapline's gem5 (or find it built) and return its binary."""
    log = log or (lambda s: print(f"trapline: {s}", file=sys.stderr, flush=True))
    source = find_source(source_flag, log)
    digest = changes_sha256()
    key = build_key(source, digest)
    out = output_dir(key)
    if (out / "gem5.opt").is_file():
        log(f"trapline's gem5 (changes {digest[:12]}) is built: {out / 'gem5.opt'}")
        return out / "gem5.opt"
    missing = missing_dependencies()
    if missing:
        raise UsageError(f"gem5's build needs Debian packages that are missing: {' '.join(missing)} "
                         f"(./run.sh gem5 build installs them; or apt-get install {' '.join(missing)})")
    if os.environ.get(NO_BUILD_ENV) == "1":
        raise UsageError(f"gem5 is not compiled here ({NO_BUILD_ENV}=1: the tests and CI take a gem5 already built, "
                         f"from ../shared/gem5/ or the cache, docs/gem5.md 'Tests and CI'); unset it to build "
                         f"trapline's gem5")
    _mkdir(root())
    tree = tree_of(source)
    need = SPACE_WARM if (tree / "build" / VARIANT / "gem5.build" / "config").is_file() else SPACE_COLD
    free = shutil.disk_usage(root()).free
    if free < need:
        raise NoSpace(f"{root()}: {free / 2**30:.1f} GiB free, gem5's build needs about {need / 2**30:.0f} GiB")
    jobs = jobs or os.cpu_count() or 1
    t0 = time.monotonic()
    tree = unpack(source, log)
    apply_changes(tree, log)
    extras = sync_extras(tree, digest)
    log_path = root() / f"build-{key}.log"
    steps_file = root() / "build-steps.json"
    try:
        record = json.loads(steps_file.read_text())
        expected = int(record.get("steps", STEPS_DEFAULT))
        job_seconds = float(record["seconds"]) * int(record["jobs"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        expected, job_seconds = STEPS_DEFAULT, SECONDS_DEFAULT
    # cold: nothing of the build tree yet (a whole build, whose step count is worth recording);
    # a tree with objects but no binary is a build resumed after an interrupt
    cold = not (tree / "build" / VARIANT / "gem5.opt").is_file()
    fresh = not any((tree / "build" / VARIANT).glob("*/*.o")) if (tree / "build" / VARIANT).is_dir() else True
    with open(log_path, "a") as lf:
        if not (tree / "build" / VARIANT / "gem5.build" / "config").is_file():
            with tempfile.NamedTemporaryFile("w", suffix=".opts", delete=False) as opts:
                opts.write(CONFIG)
            try:
                if _scons(tree, ["defconfig", f"build/{VARIANT}", opts.name, f"EXTRAS={extras}"], lf) != 0 or \
                        _scons(tree, ["setconfig", f"build/{VARIANT}", *SETCONFIG], lf) != 0:
                    raise RunFailed(f"gem5's configuration failed; last lines of {log_path}:\n{_last_errors(log_path)}")
            finally:
                os.unlink(opts.name)
        log(f"building gem5 {RELEASE} with trapline's changes ({', '.join(c.name for c in changes()) or 'none'}; "
            f"sha256 {digest[:12]}) in {tree}, {jobs} jobs{', ccache' if shutil.which('ccache') else ''}; "
            f"log: {log_path}" + (f"; a whole build takes {DURATION}" if cold else ""))
        if fresh or not cold:
            steps_left, seconds_left = (expected, job_seconds / jobs) if fresh else (60, None)
        else:   # a whole build resumed: the share of its objects still to compile
            have = sum(1 for _ in (tree / "build" / VARIANT).rglob("*.o"))
            steps_left = max(expected - have, 60)
            seconds_left = job_seconds / jobs * steps_left / max(expected, 1)
        prog = _Progress(log, steps_left, expected_seconds=seconds_left)
        try:
            status = _scons(tree, [TARGET, f"EXTRAS={extras}"], lf, jobs, prog)
        except KeyboardInterrupt:
            log("gem5 build interrupted; the same command resumes it (scons keeps what it finished)")
            raise
    if status != 0:
        if shutil.disk_usage(root()).free < (256 << 20):
            raise NoSpace(f"{root()}: the disk filled up during gem5's build; free some space and run the same "
                          "command again (it resumes)")
        raise RunFailed(f"gem5's build failed (scons exit {status}); the compiler's last lines ({log_path}):\n"
                        f"{_last_errors(log_path)}")
    seconds = time.monotonic() - t0
    if fresh:
        try:
            atomic_json(steps_file, {"steps": prog.steps, "seconds": round(seconds), "jobs": jobs})
        except OSError:
            pass
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=root()))
    try:
        exe = tmp / "gem5.opt"
        shutil.copy2(tree / TARGET, exe)
        if shutil.which("strip"):
            subprocess.run(["strip", str(exe)], check=True)
        atomic_json(tmp / "build.json", {
            "release": RELEASE, "source": source.id, "source_what": source.what,
            "changes_sha256": digest, "changes": names(),
            "config": CONFIG.split(), "setconfig": list(SETCONFIG), "target": TARGET,
            "sha256": sha256_file(exe), "seconds": round(seconds), "jobs": jobs, "fresh": fresh, "cold": cold,
            "steps": prog.steps})
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(f"{root()}: no space left for the built gem5; free some and run the same command again") \
                from None
        raise
    log(f"built trapline's gem5 in {seconds / 60:.1f} min ({prog.steps} steps): {out / 'gem5.opt'}")
    return out / "gem5.opt"


def _jobs(text: str) -> int:
    """-j: a positive whole number of compile jobs."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"-j takes a positive whole number of compile jobs, not '{text}'")
    return int(text)


def _source(text: str) -> str:
    """--source: a file's path (a directory or nothing is refused before anything runs)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"--source takes gem5 {RELEASE}'s release source tarball, not an empty path")
    if Path(text).expanduser().is_dir():
        raise argparse.ArgumentTypeError(f"--source {text}: is a directory; it takes gem5 {RELEASE}'s release source "
                                         f"tarball (sha256 {next(iter(SOURCES))})")
    return text


def parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(prog="./run.sh gem5 build")
    p.add_argument("--source", metavar="TARBALL", type=_source,
                   help=f"gem5 {RELEASE}'s release source (default: ${SOURCE_ENV}, ../shared/gem5/, else a clone "
                        f"of {REPOSITORY} at {RELEASE})")
    p.add_argument("-j", "--jobs", type=_jobs, default=None, help="parallel compile jobs (default: the cores)")
    return p


def packages() -> list[str]:
    """The Debian packages the build needs (run.sh installs them for `gem5 build`)."""
    return sorted(set(BUILD_TOOLS.values()) | set(BUILD_HEADERS.values()))


def main(argv: list[str] | None = None) -> int:
    """As a script: `from_source.py build [--source TARBALL] [-j N]` (print the binary),
    `from_source.py packages` (one Debian package a line). Errors as ./run.sh prints them."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["packages"]:
        print("\n".join(packages()))
        return 0
    if argv[:1] != ["build"]:
        print("usage: from_source.py build [--source TARBALL] [-j N] | packages", file=sys.stderr)
        return 2
    args = parser(argparse.ArgumentParser(prog="from_source.py build")).parse_args(argv[1:])
    try:
        print(build(args.source, args.jobs))
    except UsageError as e:
        print(f"trapline: error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"trapline: failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
