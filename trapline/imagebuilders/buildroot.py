"""The Buildroot image builder: images/buildroot is a BR2_EXTERNAL tree (named
TRAPLINE) whose defconfigs describe each guest whole, built from source by the
user's Buildroot 2026.02.3: Buildroot's own glibc toolchain, Linux 6.1.192 (the
version Debian's linux-source-6.1 is) configured from the same
images/<arch>/config.fragment as images/build.sh, BusyBox, and the
trapline-guest package (our /init, images/tests and the experiment kernels, built
with Buildroot's compiler). Its post-image script lays the image out as build.sh
does, so the guest lanes boot it unchanged (docs/images.md).

    ./run.sh images --builder buildroot [--arch A] [--buildroot DIR]
    ./run.sh run ID --images buildroot         # Buildroot's tree from $BUILDROOT

Buildroot is a tool the user brings: --buildroot or $BUILDROOT names its tree, or
its release tarball, which is then unpacked into the cache by its sha256. Cache
($TRAPLINE_CACHE, default ~/.cache/trapline):

    buildroot/src-<sha256>/          a Buildroot tarball given as --buildroot, unpacked
    buildroot/dl/                    BR2_DL_DIR, unless the environment sets one
    buildroot/<arch>-<key>/          Buildroot's output directory (O=); key: Buildroot's tree, the
                                     defconfig, the external tree's Buildroot files, the fragment
    images/<arch>-buildroot-<key>/   the laid-out image, boot-<arch>.env and manifest.json; key:
                                     the output directory's and the trapline-guest package's sources

A source tarball Buildroot cannot download, a Buildroot that is missing or of
another version, and a package that fails: one line naming what is missing and
how to get it (UsageError, exit 2); the image cache only ever gets a complete
entry (built in a temporary directory, renamed into place).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from trapline import build, images
from trapline.results import cache_write, sha256_file
from trapline.errors import UsageError
from trapline.imagebuilders import ImageBuilder
from trapline.proc import run_command, tail, with_parent_death

PINNED = "2026.02.3"
RELEASE_URL = f"https://buildroot.org/downloads/buildroot-{PINNED}.tar.xz"
GIT_URL = "https://gitlab.com/buildroot.org/buildroot.git"
EXTERNAL = images.IMAGES / "buildroot"
PACKAGE_MK = EXTERNAL / "package" / "trapline-guest" / "trapline-guest.mk"
FORMAT = 1                 # bump when an entry's layout or the keys' meaning change
INFO_TIMEOUT_S = 600       # a defconfig, show-info, printvars: seconds of Makefile parsing
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def how_to_get() -> str:
    return (f"get Buildroot {PINNED} ({RELEASE_URL}, or git tag {PINNED} of {GIT_URL}) and give its "
            "directory or that tarball as --buildroot DIR or BUILDROOT=DIR")


def defconfig(arch: str) -> Path:
    return EXTERNAL / "configs" / f"trapline_{arch}_defconfig"


def version(tree: Path) -> str | None:
    """BR2_VERSION as Buildroot's Makefile says it."""
    try:
        m = re.search(r"^export BR2_VERSION := (\S+)", (tree / "Makefile").read_text(errors="replace"), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def locate(where: str | os.PathLike | None = None) -> Path:
    """Buildroot's tree: where, else $BUILDROOT; a tarball there is unpacked into the
    cache (by its sha256) first. UsageError when there is none, it is no Buildroot
    tree, or it is not the pinned version."""
    where = where or os.environ.get("BUILDROOT")
    if not where:
        raise UsageError(f"no Buildroot given: {how_to_get()}")
    p = Path(where).expanduser()
    if p.is_file():
        p = unpack(p)
    if not (p / "support" / "scripts" / "br2-external").is_file() or version(p) is None:
        raise UsageError(f"Buildroot: '{where}' is not a Buildroot tree (no Makefile with BR2_VERSION, no "
                         f"support/scripts/br2-external); {how_to_get()}")
    if version(p) != PINNED:
        raise UsageError(f"Buildroot: '{where}' is Buildroot {version(p)}, but images/buildroot is pinned to "
                         f"{PINNED}; {how_to_get()}")
    return p.resolve()


def unpack(tarball: Path) -> Path:
    """A Buildroot release tarball, unpacked once into cache/buildroot/src-<sha256[:16]>/
    (in a temporary directory, renamed into place); the tree inside it."""
    digest = sha256_file(tarball)
    root = build.cache_root() / "buildroot"
    dest = root / f"src-{digest[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-src-{digest[:16]}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".complete").is_file():
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-src-", dir=root))
            try:
                r = subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise UsageError(f"Buildroot: cannot unpack '{tarball}' ({tail(r.stderr, 1)}); {how_to_get()}")
                (tmp / ".complete").write_text(f"{digest}  {tarball.name}\n")
                shutil.rmtree(dest, ignore_errors=True)
                os.rename(tmp, dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    tops = [d for d in dest.iterdir() if d.is_dir()]
    return tops[0] if len(tops) == 1 else dest


# ------------------------------------------------------------------ content keys

def _digest(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(bytes.fromhex(sha256_file(f)))
    return h.hexdigest()


def tree_digest(tree: Path) -> str:
    """sha256 over every file of Buildroot's tree (path and content; a symbolic link's
    target), without an in-tree build's output/ and dl/. Remembered per fingerprint
    of the files' paths, sizes and mtimes: hashing the 15,000 files of a release takes
    a second or more, walking them 0.3 s."""
    entries = []
    for root, dirs, files in os.walk(tree):
        if Path(root) == tree:
            dirs[:] = [d for d in dirs if d not in (".git", "output", "dl")]
        for f in files:
            path = os.path.join(root, f)
            entries.append((os.path.relpath(path, tree), os.lstat(path)))
    entries.sort()
    fp = hashlib.sha256()
    for rel, st in entries:
        fp.update(f"{rel} {st.st_mode:o} {st.st_size} {st.st_mtime_ns}\n".encode())
    memo = build.cache_root() / "buildroot" / ".memo" / f"tree-{fp.hexdigest()[:40]}"
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    h = hashlib.sha256()
    for rel, st in entries:
        path = tree / rel
        h.update(rel.encode() + b"\0")
        h.update(os.readlink(path).encode() if stat.S_ISLNK(st.st_mode) else bytes.fromhex(sha256_file(path)))
    digest = h.hexdigest()
    cache_write(memo, digest + "\n")
    return digest


def rsync_filter() -> list[str]:
    """The trapline-guest package's rsync filter (TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS
    in its .mk, read from there: what Buildroot copies of trapline into the package)."""
    text = PACKAGE_MK.read_text()
    m = re.search(r"^TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS\s*=((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        raise RuntimeError(f"{PACKAGE_MK} sets no TRAPLINE_GUEST_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS")
    return shlex.split(m.group(1).replace("\\\n", " "))


def guest_sources(root: Path = images.ROOT) -> list[Path]:
    """The files of trapline that Buildroot copies into the trapline-guest package
    (rsync's own answer to the package's filter, as a dry run)."""
    out = subprocess.run(["rsync", "-a", "-n", "--out-format=%n", *rsync_filter(), f"{root}/", "/nonexistent-trapline/"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"rsync could not list the trapline-guest package's sources: {tail(out.stderr, 3)}")
    return sorted(root / n for n in out.stdout.splitlines() if n and (root / n).is_file())


# The external tree's files that only the trapline-guest package and the post-image
# script read: a change there rebuilds that package and the image, not the toolchain.
GUEST_SIDE = ("package/trapline-guest", "board")


def external_files(arch: str, guest_side: bool = False) -> list[Path]:
    """The external tree's files that configure arch's Buildroot build (not the other
    arches' defconfigs): the package's and post-image's (guest_side), or the rest."""
    def side(p: Path) -> bool:
        return p.relative_to(EXTERNAL).as_posix().startswith(GUEST_SIDE)
    return sorted(p for p in EXTERNAL.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and (p.parent.name != "configs" or p == defconfig(arch)) and side(p) == guest_side)


def keys(arch: str, tree: Path) -> tuple[str, str, dict]:
    """(output directory key, image key, what they were computed from): the output
    directory is Buildroot's whole build (toolchain, Linux, BusyBox), the image
    adds trapline's own part (the package, its sources, the post-image script), which
    a reused output directory rebuilds alone."""
    fragment = images.IMAGES / arch / "config.fragment"
    inputs = {"format": FORMAT, "arch": arch, "buildroot": version(tree), "buildroot_tree_sha256": tree_digest(tree),
              "external_sha256": _digest(EXTERNAL, external_files(arch)),
              "defconfig": defconfig(arch).name, "defconfig_sha256": sha256_file(defconfig(arch)),
              "fragment_sha256": sha256_file(fragment)}
    out_key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    inputs["guest_package_sha256"] = _digest(EXTERNAL, external_files(arch, guest_side=True))
    inputs["guest_sources_sha256"] = _digest(images.ROOT, guest_sources())
    image_key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return out_key, image_key, inputs


# ------------------------------------------------------------------ running Buildroot

class Make:
    """make in Buildroot's tree for one output directory (O=) with the TRAPLINE
    tree, BR2_DL_DIR and, from the environment, BR2_PRIMARY_SITE(_ONLY)."""

    def __init__(self, tree: Path, out: Path, dl: Path):
        self.tree, self.out, self.dl = tree, out, dl
        self.env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        self.env["BR2_DL_DIR"] = str(dl)
        self.site = [f"{k}={os.environ[k]}" for k in ("BR2_PRIMARY_SITE", "BR2_PRIMARY_SITE_ONLY") if os.environ.get(k)]

    def cmd(self, *targets: str) -> list[str]:
        return ["make", "-C", str(self.tree), f"O={self.out}", f"BR2_EXTERNAL={EXTERNAL}", *self.site, *targets]

    def quick(self, *targets: str) -> str:
        """A target that only reads the configuration (defconfig, show-info,
        printvars, savedefconfig): its stdout; UsageError with its tail if it fails."""
        status, out, err = run_command(self.cmd("-s", *targets), INFO_TIMEOUT_S, env=self.env)
        if status != 0:
            raise UsageError(f"Buildroot: make {' '.join(targets)} failed (status {status}): "
                             f"{' / '.join(tail(err or out, 3).splitlines())}")
        return out

    def configure(self, arch: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.quick(defconfig(arch).name)

    def info(self, variables: tuple[str, ...] = ()) -> tuple[dict, dict[str, str]]:
        """(show-info's JSON, the variables' values), from one parse of the Makefiles."""
        targets = ["show-info"] + (["printvars", f"VARS={' '.join(variables)}"] if variables else [])
        return parse_info(self.quick(*targets), variables)

    def stream(self, targets: list[str], logfile: Path, log=None, nice: str = "19") -> tuple[int, str, dict]:
        """A build step, its whole output in logfile, Buildroot's '>>> package version
        step' lines shown through log; (exit status, the last such line, show-info's
        JSON if a target was show-info)."""
        cmd = ["nice", "-n", nice] + self.cmd(*targets)
        last, info = "", {}
        logfile.parent.mkdir(parents=True, exist_ok=True)
        with open(logfile, "a") as lf:
            lf.write(f"$ {shlex.join(cmd)}\n")
            lf.flush()
            proc = subprocess.Popen(with_parent_death(cmd, env=self.env), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace", env=self.env,
                                    start_new_session=True)
            try:
                for line in proc.stdout:
                    if line.startswith("{") and not info:
                        info = json.loads(line)
                        continue
                    lf.write(line)
                    clean = ANSI.sub("", line).strip()
                    if clean.startswith(">>> "):
                        last = clean
                        if log:
                            log(f"    buildroot: {clean}")
                status = proc.wait()
            except BaseException:  # Ctrl-C: no build left running
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                raise
        return status, last, info


def parse_info(text: str, variables: tuple[str, ...] = ()) -> tuple[dict, dict[str, str]]:
    """show-info's JSON (one line starting with '{') and printvars' VAR=value lines
    for the named variables (a value defined with `define` spans several lines)."""
    info, values, current = {}, {}, None
    for line in text.splitlines():
        name = line.partition("=")[0]
        if line.startswith("{") and not info:
            info, current = json.loads(line), None
        elif "=" in line and name in variables:
            current = name
            values[name] = line.partition("=")[2]
        elif current:
            values[current] += "\n" + line
    return info, values


def recipe_lines(value: str) -> list[str]:
    """A printvars'd recipe (e.g. TRAPLINE_GUEST_BUILD_CMDS) as the shell command
    lines make would run, one shell each (leading tab and @ removed)."""
    return [l.strip().lstrip("@").strip() for l in value.splitlines() if l.strip().lstrip("@").strip()]


def sources(info: dict) -> list[str]:
    """The source files Buildroot needs, as paths under BR2_DL_DIR (<dl_dir>/<file>);
    packages built from a local directory (trapline-guest) need none."""
    out = set()
    for pkg in info.values():
        for d in pkg.get("downloads", []):
            if any(u.startswith("local+") for u in d.get("uris", [])):
                continue
            out.add(f"{pkg['dl_dir']}/{d['source']}")
    return sorted(out)


def missing_sources(info: dict, dl: Path) -> list[str]:
    return [s for s in sources(info) if not (dl / s).is_file()]


BUILT = ("target", "host")  # show-info's package types that are built (not rootfs entries)


def packages(info: dict) -> dict[str, str]:
    """name -> version of every package the defconfig builds (show-info; rootfs
    entries and virtual packages have none)."""
    return {k: v.get("version") or "" for k, v in sorted(info.items()) if v.get("type") in BUILT
            and not v.get("virtual")}


def download_dir() -> Path:
    return Path(os.environ.get("BR2_DL_DIR") or build.cache_root() / "buildroot" / "dl")


def _failure_line(logfile: Path) -> str:
    """The build log's last message, as one line: its last lines (up to 3) that are
    not make's own bookkeeping."""
    try:
        lines = logfile.read_text(errors="replace").splitlines()[-200:]
    except OSError:
        return ""
    said: list[str] = []
    for line in reversed(lines):
        s = ANSI.sub("", line).strip()
        if s.startswith(("make[", "make:", "$ ")):
            if said:
                break
            continue
        if s:
            said.insert(0, s)
        if len(said) == 3:
            break
    return " ".join(said)[:300]


def _load(entry: Path, arch: str) -> images.Image:
    facts = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", (entry / f"boot-{arch}.env").read_text(), re.M))
    manifest = json.loads((entry / "manifest.json").read_text())
    return images.Image(arch, Path(facts["KERNEL"]), Path(facts["INITRD"]),
                        Path(facts["DTB"]) if facts.get("DTB") else None, facts, "buildroot",
                        entry / "trapline-bin", manifest["provenance"])


# Files of Buildroot's BINARIES_DIR an image entry keeps (post-image.sh lays them out).
KEEP = ("System.map", "vmlinux", "linux.config", "trapline-guest.txt")


def _store(binaries: Path, entry: Path, arch: str, provenance: dict) -> None:
    """Copy the laid-out image into the cache entry (a temporary directory renamed
    into place) with its boot-<arch>.env pointing there and a manifest.json."""
    env_file = binaries / f"boot-{arch}.env"
    if not env_file.is_file():
        raise UsageError(f"Buildroot built no {env_file} (post-image.sh did not run?); see {binaries.parent}/build.log")
    facts = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", env_file.read_text(), re.M))
    booted = [Path(facts[k]).name for k in ("KERNEL", "INITRD", "DTB") if facts.get(k)]
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{arch}-buildroot-", dir=entry.parent))
    try:
        for n in booted + list(KEEP):
            shutil.copy2(binaries / n, tmp / n)
        shutil.copytree(binaries / "trapline-bin", tmp / "trapline-bin", symlinks=True)
        text = env_file.read_text().replace(f"{binaries}/", f"{entry}/").replace(f"={binaries}\n", f"={entry}\n")
        (tmp / f"boot-{arch}.env").write_text(text)
        provenance = dict(provenance, image_sha256={n: sha256_file(tmp / n) for n in booted})
        (tmp / "manifest.json").write_text(json.dumps({"provenance": provenance, "facts": facts}, indent=1) + "\n")
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_image(arch: str, where: str | None = None, log=None) -> images.Image:
    """The Buildroot image for arch: from the cache, or built (Buildroot's tree from
    where or $BUILDROOT)."""
    images.check_arch(arch)
    tree = locate(where)
    out_key, image_key, inputs = keys(arch, tree)
    cache = build.cache_root()
    entry = cache / "images" / f"{arch}-buildroot-{image_key[:24]}"
    if (entry / "manifest.json").is_file():
        if log:
            log(f"    buildroot: {arch} image cached: {entry}")
        return _load(entry, arch)
    work = cache / "buildroot"
    work.mkdir(parents=True, exist_ok=True)
    entry.parent.mkdir(parents=True, exist_ok=True)
    out = work / f"{arch}-{out_key[:16]}"
    with open(work / f".lock-{arch}-{out_key[:16]}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (entry / "manifest.json").is_file():
            return _load(entry, arch)
        t0 = time.monotonic()
        dl = download_dir()
        dl.mkdir(parents=True, exist_ok=True)
        mk = Make(tree, out, dl)
        if log:
            log(f"    buildroot: {defconfig(arch).name} in {out} (Buildroot {PINNED}, BR2_DL_DIR {dl})")
        mk.configure(arch)
        # one parse of the Makefiles: what the defconfig needs (show-info), then Buildroot's
        # own download step, which fetches what BR2_DL_DIR lacks (and checks what it has)
        logfile = out / "build.log"
        if log:
            log(f"    buildroot: the sources {defconfig(arch).name} needs, in {dl} or downloaded (make source)")
        status, last, info = mk.stream(["show-info", "source"], logfile, log, "0")
        if status != 0 and not last:  # stopped before any download: Buildroot's own host checks
            raise UsageError(f"Buildroot stopped before its download step: {_failure_line(logfile)} "
                             f"(whole log: {logfile})")
        need = sources(info)
        missing = missing_sources(info, dl) if info else ["(show-info printed nothing)"]
        if status != 0 or missing:
            shown = ", ".join(Path(m).name for m in missing[:5]) + (f" and {len(missing) - 5} more"
                                                                    if len(missing) > 5 else "")
            raise UsageError(
                f"Buildroot: {len(missing)} of the {len(need)} source files {defconfig(arch).name} needs are not "
                f"in BR2_DL_DIR={dl} and could not be downloaded (no network?): {shown}; copy them there "
                f"from a machine with internet (`make source` there), or set BR2_PRIMARY_SITE to a mirror "
                f"(docs/images.md)")
        if (out / "build" / "trapline-guest-local").exists():  # trapline's sources changed: rebuild that package
            mk.stream(["trapline-guest-dirclean"], logfile, log)
        jobs = os.environ.get("TRAPLINE_JOBS", "2")
        status, last, _ = mk.stream([f"BR2_JLEVEL={jobs}"], logfile, log, os.environ.get("TRAPLINE_NICE", "19"))
        if status != 0:
            raise UsageError(f"Buildroot failed for {defconfig(arch).name} at '{last or 'its start'}': "
                             f"{_failure_line(logfile)} (whole log: {logfile}; the output directory is kept, "
                             "so a rerun goes on from there)")
        provenance = {"builder": "buildroot", **inputs, "linux_version": _linux_version(info),
                      "packages": packages(info), "build_seconds": round(time.monotonic() - t0, 1),
                      "sources_sha256": {s: sha256_file(dl / s) for s in need if (dl / s).is_file()},
                      "host": f"{os.uname().machine}, {os.cpu_count()} cpus"}
        _store(out / "images", entry, arch, provenance)
        if log:
            log(f"    buildroot: {arch} image built in {provenance['build_seconds']:.0f} s: {entry}")
    return _load(entry, arch)


def _linux_version(info: dict) -> str:
    return (info.get("linux") or {}).get("version", "")


class Buildroot(ImageBuilder):
    name = "buildroot"
    summary = f"images/buildroot with the user's Buildroot {PINNED} (--buildroot DIR or BUILDROOT)"

    def check(self) -> None:
        locate()

    def image(self, ctx, arch: str) -> images.Image:
        ctx.log(f"guest image for {arch} from Buildroot (images/buildroot, cached by content hash)")
        return build_image(arch, log=ctx.log)
