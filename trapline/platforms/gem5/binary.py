"""Where gem5 comes from, and what it is.

trapline builds its own gem5 (`./run.sh gem5 build`: gem5's pinned release source plus
trapline's changes, from_source.py) and still runs a gem5 the user brings (docs/gem5.md,
"Get gem5"). One place finds it:

    find(flag)        the --gem5 PATH value, else $GEM5, else trapline's gem5 built for the
                      current changes (from_source.built), else gem5.opt or gem5 on PATH;
                      none: Gem5Missing, one line saying how to get one; GEM5=none:
                      Gem5Missing whatever is there (gem5 switched off, as the Docker
                      image's --build-arg GEM5=none)
    facts(path)       for the manifest: sha256, version, ISAs, Ruby protocol, and which of
                      trapline's changes it has ("build": stock or trapline's)
    lacking(facts, changes)
                      the changes a lane needs that this gem5 lacks, and why it matters

``gem5.opt --version`` does not exist and ``-B`` fails in v24, so the version
comes from a table keyed by the binary's sha256 (KNOWN) and, for any binary,
from a tiny gem5 run (gem5_configs/probe.py, about 0.2 s) that also lists the
ISAs it was built with. Both are cached in ``<cache>/gem5/facts.json``: the
sha256 (of a 48 MB file) by path, size and mtime, the probe by sha256.

For the tests and CI, which never compile gem5: ``for_tests()`` is $GEM5 when set,
else trapline's build for the current changes in the cache, else trapline's gem5
shared beside the stock one (``../shared/gem5/gem5-v24.0.0.1-trapline-<changes
sha256[:16]>.opt.xz``: taken only while that hash is the repository's changes, and
only if the binary itself says so), else a gem5 on PATH, else the shared stock one
(``../shared/gem5/gem5-v24.0.0.1-X86_SPARC.opt.xz`` beside the clone, or
``$TRAPLINE_GEM5_XZ``). An xz is unpacked once into ``<cache>/gem5/<xz
sha256>/gem5.opt`` (a known one verified against KNOWN_XZ, atomically: concurrent
test workers wait for one unpacker).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import lzma
import os
import shutil
import tempfile
from pathlib import Path

from trapline.build import cache_root
from trapline.errors import RunFailed, UsageError
from trapline.proc import run_command, tail
from trapline.results import atomic_json, sha256_file

from trapline.paths import ROOT, shared
from trapline.platforms.gem5 import from_source
PROBE = ROOT / "gem5_configs" / "probe.py"
PROBE_MARK = "TRAPLINE-PROBE "
ENV = "GEM5"                      # the gem5 binary; "none": no gem5, whatever is built or on PATH
OFF = "none"
XZ_ENV = "TRAPLINE_GEM5_XZ"       # tests and CI: an xz-compressed gem5 binary to unpack
NAMES = ("gem5.opt", "gem5")      # looked for on PATH, in this order
SHARED_XZ = Path("gem5") / "gem5-v24.0.0.1-X86_SPARC.opt.xz"  # in ../shared/ (paths.shared)
# trapline's gem5 shared beside it for the tests and CI, named by its changes' sha256 (first 16 hex digits)
SHARED_TRAPLINE = "gem5-v24.0.0.1-trapline-{}.opt.xz"

# gem5 binaries trapline has met, by sha256: what they are (/work/shared/gem5/README.md for the first).
KNOWN = {
    "6f40e66a0a463f228a1be0a42947bdde15c93f32f2b6907c4831db994e73291f":
        "v24.0.0.1 (X86+SPARC, Ruby MESI_Two_Level)",
}
# xz files of those binaries: xz sha256 -> the unpacked binary's sha256
KNOWN_XZ = {
    "8311d770309f442a0e4bd78c13b01de7373dc0e1e7997743277ae0e9b74ca58b":
        "6f40e66a0a463f228a1be0a42947bdde15c93f32f2b6907c4831db994e73291f",
}
BUILD_IT = "./run.sh gem5 build"
HOW_TO_GET = (f"build trapline's gem5 with {BUILD_IT} (gem5 v24.0.0.1 with trapline's changes, {from_source.DURATION}), "
              "or pass --gem5 PATH, set GEM5=PATH, or put gem5.opt on PATH: docs/gem5.md, 'Get gem5'")


class Gem5Missing(RunFailed):
    """No gem5 binary was found (the message says how to get one)."""


def find(flag: str | os.PathLike | None = None, environ: dict | None = None) -> Path:
    """The gem5 binary: `flag` (the --gem5 value), else $GEM5, else trapline's gem5 built
    for the current changes, else gem5.opt or gem5 on PATH. A path given by the flag or
    GEM5 that is not an executable file is a UsageError naming where it came from; no
    gem5 at all, or GEM5=none, is Gem5Missing. `environ` (default the process's) gives
    GEM5, PATH and TRAPLINE_CACHE (where trapline's builds are)."""
    env = os.environ if environ is None else environ
    if env.get(ENV) == OFF:
        raise Gem5Missing(f"gem5 switched off ({ENV}={OFF}); to use one, unset {ENV}: {HOW_TO_GET}")
    for where, value in (("--gem5", flag), (ENV, env.get(ENV))):
        if value:
            p = Path(value).expanduser()
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise UsageError(f"{where} {value}: not an executable file; {HOW_TO_GET}")
            return p.resolve()
    own = from_source.built(environ=env)
    if own is not None:
        return own
    for name in NAMES:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
        if found:
            return Path(found).resolve()
    raise Gem5Missing(f"gem5 not found: {HOW_TO_GET}")


# ---------------------------------------------------------------- facts

def _facts_file() -> Path:
    return cache_root() / "gem5" / "facts.json"


def _load_facts() -> dict:
    try:
        d = json.loads(_facts_file().read_text())
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_facts(d: dict) -> None:
    try:
        atomic_json(_facts_file(), d)
    except OSError:
        pass  # a cache: a read-only or full disk only costs the next run a rehash


def _sha256_key(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def sha256_of(path: Path, remember: bool = True) -> str:
    """The binary's sha256, cached by its resolved path, size and mtime (remember=False: not
    written to the cache, as for a binary not yet known to be gem5)."""
    path = Path(path).resolve()
    key = _sha256_key(path)
    cache = _load_facts()
    hit = cache.get("sha256", {}).get(key)
    if hit:
        return hit
    digest = sha256_file(path)
    if remember:
        cache = _load_facts()
        cache.setdefault("sha256", {})[key] = digest
        _save_facts(cache)
    return digest


def probe(path: Path, timeout: float = 120) -> dict:
    """What the binary says about itself: {"version", "isas", "protocol"} (a tiny gem5
    run of gem5_configs/probe.py), cached by sha256 once it said so. A program that is
    not gem5 (it ends without a word of gem5's) is a UsageError naming it, and nothing is
    cached of it; RunFailed with gem5's last lines when a gem5 cannot run (a missing
    runtime library, a binary for another machine)."""
    path = Path(path).resolve()
    digest = sha256_of(path, remember=False)
    hit = _load_facts().get("probe", {}).get(digest)
    if hit:
        return hit
    with tempfile.TemporaryDirectory(prefix="trapline-gem5-probe-") as tmp:
        try:
            status, out, err = run_command([str(path), "-q", f"--outdir={tmp}", str(PROBE)], timeout, cwd=Path(tmp))
        except OSError as e:
            raise RunFailed(f"gem5 {path} cannot be started: {e.strerror}") from None
    line = next((ln for ln in out.splitlines() if ln.startswith(PROBE_MARK)), None)
    said = (out + err).lower()
    if status is not None and line is None and "gem5" not in said and "error while loading shared libraries" not in said:
        raise UsageError(f"{path} is not gem5: asked what it is (gem5 -q {PROBE.name}) it exited with status "
                         f"{status} and said nothing of gem5's; {HOW_TO_GET}")
    if status != 0 or line is None:
        why = "timed out" if status is None else f"exited with status {status}"
        raise RunFailed(f"gem5 {path} {why} when asked what it is (gem5 {PROBE.name}); its runtime libraries are "
                        f"Debian packages (run.sh installs them, docs/gem5.md); last lines:\n{tail(out + err, 10)}")
    found = json.loads(line[len(PROBE_MARK):])
    cache = _load_facts()
    cache.setdefault("probe", {})[digest] = found
    cache.setdefault("sha256", {})[_sha256_key(path)] = digest
    _save_facts(cache)
    return found


def facts(path: Path) -> dict:
    """For the manifest: {"path", "sha256", "bytes", "version", "reports_version", "isas",
    "protocol", "build", "changes", "changes_sha256"}. version is KNOWN's description of
    the sha256, trapline's build's own description, or "unknown version (sha256 ...)";
    reports_version is what gem5 itself says; build is "trapline" (a binary of
    `./run.sh gem5 build`, which says so itself: m5.trapline_build) or "stock"."""
    path = Path(path).resolve()
    p = probe(path)
    digest = sha256_of(path)
    own = p.get("trapline") or {}
    changes = list(own.get("changes", []))
    version = KNOWN.get(digest) or (f"{own.get('release', '?')} with trapline's changes "
                                    f"{str(own.get('changes_sha256', ''))[:12]} ({', '.join(changes) or 'none'})"
                                    if own else f"unknown version (sha256 {digest})")
    return {"path": str(path), "sha256": digest, "bytes": path.stat().st_size, "version": version,
            "reports_version": p.get("version"), "isas": list(p.get("isas", [])), "protocol": p.get("protocol", ""),
            "build": "trapline" if own else "stock", "changes": changes,
            "changes_sha256": own.get("changes_sha256")}


def lacking(g: dict, needs) -> list[str]:
    """The changes in `needs` that the gem5 of facts `g` does not have."""
    return [n for n in needs if n not in g.get("changes", [])]


def described(g: dict) -> str:
    """One line: which gem5 this is ("trapline's gem5 (changes 1a2b3c4d5e6f: ...)" or "a stock gem5 ...")."""
    if g.get("build") == "trapline":
        return (f"trapline's gem5 (changes {str(g.get('changes_sha256'))[:12]}: {', '.join(g.get('changes', []))}), "
                f"{g.get('path')}")
    return f"a stock gem5 ({g.get('version')}), {g.get('path')}"


# ---------------------------------------------------------------- the shared binary (tests, CI)

def shared_xz(environ: dict | None = None) -> Path | None:
    """$TRAPLINE_GEM5_XZ, else ../shared/gem5/<xz> beside the clone (or beside any
    directory above it: a git worktree sits deeper than the clone); None if neither."""
    env = os.environ if environ is None else environ
    if env.get(XZ_ENV):
        p = Path(env[XZ_ENV]).expanduser()
        if not p.is_file():
            raise UsageError(f"{XZ_ENV} {p}: no such file")
        return p.resolve()
    p = shared(*SHARED_XZ.parts)
    return p.resolve() if p.is_file() else None


def unpack(xz: Path) -> Path:
    """The gem5 binary in `xz`, unpacked once into <cache>/gem5/<xz sha256[:16]>/gem5.opt:
    to a temporary file, checked against KNOWN_XZ (an unknown xz is unpacked as it is),
    made executable and renamed into place under a lock."""
    xz = Path(xz)
    key = sha256_file(xz)
    root = cache_root() / "gem5"
    out = root / key[:16] / "gem5.opt"
    if out.is_file():
        return out
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{key[:16]}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".gem5.opt.", dir=out.parent)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as dst, lzma.open(xz) as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    dst.write(block)
            want = KNOWN_XZ.get(key)
            if want and h.hexdigest() != want:
                raise RunFailed(f"{xz} unpacks to a binary with sha256 {h.hexdigest()}, not {want}")
            os.chmod(tmp, 0o755)
            os.replace(tmp, out)
        except lzma.LZMAError as e:
            raise RunFailed(f"{xz} is not a readable xz file: {e}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return out


def shared_binary(environ: dict | None = None) -> Path:
    """The shared stock gem5 (shared_xz) unpacked into the cache; Gem5Missing naming
    where it was looked for when there is none."""
    xz = shared_xz(environ)
    if xz is None:
        raise Gem5Missing(f"no shared gem5 binary: set {XZ_ENV} or put {SHARED_XZ.name} in "
                          f"../shared/{SHARED_XZ.parent}/ beside the clone")
    return unpack(xz)


def shared_trapline_xz(environ: dict | None = None) -> Path | None:
    """trapline's gem5 for the current changes shared beside the stock binary (in the folder
    of shared_xz: ../shared/gem5/, or $TRAPLINE_GEM5_XZ's), named SHARED_TRAPLINE with the
    changes' sha256; None when there is none for these changes."""
    stock = shared_xz(environ)
    where = stock.parent if stock is not None else shared(*SHARED_XZ.parent.parts)
    p = where / SHARED_TRAPLINE.format(from_source.changes_sha256()[:16])
    return p.resolve() if p.is_file() else None


def shared_trapline(environ: dict | None = None) -> Path | None:
    """shared_trapline_xz() unpacked into the cache, if the binary says it has exactly the
    current changes (m5.trapline_build); None otherwise."""
    xz = shared_trapline_xz(environ)
    if xz is None:
        return None
    exe = unpack(xz)
    return exe if facts(exe).get("changes_sha256") == from_source.changes_sha256() else None


def for_tests(environ: dict | None = None) -> Path:
    """The gem5 the tests and CI use, never compiled here: $GEM5 (GEM5=none: none), else
    trapline's build for the current changes in the cache, else trapline's gem5 for them
    shared in ../shared/gem5/ (shared_trapline), else a gem5 on PATH, else the shared stock
    binary unpacked into the cache. Gem5Missing (the reason a test is skipped) when there
    is none."""
    env = os.environ if environ is None else environ
    if env.get(ENV) or from_source.built(environ=env) is not None:
        return find(environ=environ)
    own = shared_trapline(environ)
    if own is not None:
        return own
    try:
        return find(environ=environ)
    except Gem5Missing as e:
        try:
            return shared_binary(environ)
        except Gem5Missing as e2:
            raise Gem5Missing(f"{e}; and {e2}") from None


# ---------------------------------------------------------------- python -m trapline.platforms.gem5 binary

def main(argv: list[str] | None = None) -> int:
    """`python -m trapline.platforms.gem5 binary [PATH]`: the gem5 find() finds (or PATH) and its
    facts as one JSON line, cached on the way (the Docker image's build calls it while
    its cache is writable: docs/docker.md). No gem5: the how-to-get line, exit 1."""
    import sys
    from trapline.platforms.gem5.machine_json import cli_status
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 or any(a.startswith("-") for a in argv):
        print("usage: python -m trapline.platforms.gem5 binary [PATH]", file=sys.stderr)
        return 2
    return cli_status(lambda: print(json.dumps(facts(find(argv[0] if argv else None)))))


if __name__ == "__main__":
    import sys
    sys.exit(main())
