"""Citing trapline and a run of it: `./run.sh cite [RUN]`.

Two things a paper may cite, each one BibTeX entry with one key:

    @software   trapline itself: title, authors and year from CITATION.cff (the one
                place they are written), the version (trapline.__version__, which
                CITATION.cff repeats and a test keeps equal) and the git commit.
    @misc       one run or sweep directory: its run id, date, command, the trapline
                commit that made it, the sha256 of its manifest.json and its content
                hash.

The content hash names the results themselves, not one file: the sha256 of the
directory's SHA256SUMS text (one line `<sha256>  <path>` per file, sorted by path,
the format `sha256sum -c` reads). A bundle (trapline/bundle.py) carries the same
SHA256SUMS plus its own two files (SHA256SUMS, .zenodo.json), which the content
hash leaves out, so a run directory and its bundle have the same content hash.

CITATION.cff also lists the original blog posts of the catalogue as `references`;
the bundle's .zenodo.json takes them from here.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from trapline import __version__, results
from trapline.errors import UsageError
from trapline.yamlfile import read_mapping

CFF = results.ROOT / "CITATION.cff"
SUMS = "SHA256SUMS"
ZENODO = ".zenodo.json"
BUNDLE_ONLY = (SUMS, ZENODO)  # files a bundle adds to a run; not part of its content hash


@dataclass(frozen=True)
class Reference:
    """One original post of the catalogue, as CITATION.cff lists it."""
    title: str
    authors: tuple[str, ...]
    date: str | None  # YYYY-MM-DD, or YYYY-MM, YYYY, or None when the catalogue gives none
    notes: str

    @property
    def text(self) -> str:
        """The reference as one line of prose (Zenodo's `references` take free text)."""
        when = f" ({self.date})" if self.date else ""
        return f"{'; '.join(self.authors)}{when}. \"{self.title}\" (blog post). {self.notes}"


@dataclass(frozen=True)
class Software:
    """What CITATION.cff says about trapline."""
    title: str
    authors: tuple[str, ...]
    version: str
    year: str
    license: str
    keywords: tuple[str, ...]
    references: tuple[Reference, ...] = field(default=())


def _person(a: dict) -> str:
    """A CFF person or entity as one display name ("Family, Given" for a person)."""
    if "name" in a:
        return str(a["name"])
    given, family = a.get("given-names", ""), a.get("family-names", "")
    return f"{family}, {given}" if given and family else str(family or given or "Unknown")


def _reference(r: dict) -> Reference:
    date = r.get("date-published")
    if date is None and r.get("year"):
        date = f"{r['year']}" + (f"-{int(r['month']):02d}" if r.get("month") else "")
    return Reference(title=str(r["title"]), authors=tuple(_person(a) for a in r.get("authors", [])),
                     date=str(date) if date else None, notes=str(r.get("notes", "")))


def load_cff(path: Path = CFF) -> Software:
    """CITATION.cff as typed data; a missing field is one error naming it."""
    d = read_mapping(path, UsageError)
    missing = [k for k in ("title", "authors", "version", "date-released") if k not in d]
    if missing:
        raise UsageError(f"{path.name}: missing field(s) {', '.join(missing)}")
    return Software(title=str(d["title"]), authors=tuple(_person(a) for a in d["authors"]),
                    version=str(d["version"]), year=str(d["date-released"])[:4],
                    license=str(d.get("license", "")), keywords=tuple(map(str, d.get("keywords", []))),
                    references=tuple(_reference(r) for r in d.get("references", [])))


# ------------------------------------------------------------------ content

def sums_text(sums: dict[str, str]) -> str:
    """SHA256SUMS: `<sha256>  <path>` per file, sorted by path (what `sha256sum -c` reads)."""
    return "".join(f"{sums[p]}  {p}\n" for p in sorted(sums))


def parse_sums(text: str) -> dict[str, str]:
    """SHA256SUMS back to {path: sha256}; a line of another shape is an error naming it."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (\S.*)", line)
        if not m:
            raise ValueError(f"{SUMS} line {n} is not '<sha256>  <path>': {line[:80]!r}")
        out[m.group(2)] = m.group(1)
    return out


def directory_sums(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every regular file under `path`; one that cannot be read
    is one line naming it."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.is_symlink():
            try:
                out[p.relative_to(path).as_posix()] = results.sha256_file(p)
            except OSError as e:
                raise UsageError(f"{p}: cannot be read ({e.strerror}); make it readable or move it away") from None
    return out


def content_hash(sums: dict[str, str]) -> str:
    """The sha256 of the SHA256SUMS of a run's own files (a bundle's additions left out)."""
    own = {p: h for p, h in sums.items() if p not in BUNDLE_ONLY}
    return hashlib.sha256(sums_text(own).encode()).hexdigest()


@dataclass(frozen=True)
class RunRecord:
    """What identifies one finished run (or sweep) directory."""
    path: Path
    run_id: str
    kind: str  # "run" or "sweep" (the manifest's kind)
    date: str  # YYYY-MM-DD (when it finished)
    command: str  # as the user typed it
    commit: str  # the trapline commit that made it
    dirty: bool
    version: str
    manifest_sha256: str
    content_sha256: str
    manifest: dict
    sums: dict[str, str]


def resolve(run: str | None) -> Path:
    """A run id, `latest` (the default), or a path to a run or sweep directory (one with a '/')."""
    if run and "/" in run:
        p = Path(run).expanduser().resolve()
        if not p.is_dir():
            raise UsageError(f"{run}: no such directory; name a run id, 'latest' or a run directory")
        if not (p / "manifest.json").is_file():
            raise UsageError(f"{p}: not a finished run or sweep directory (it has no manifest.json)")
        return p
    return results.find_run(run)


def command_line(manifest: dict) -> str:
    """The command that made the run, as typed: ./run.sh and the manifest's argv."""
    argv = manifest.get("argv") or []
    if len(argv) > 1:
        return "./run.sh " + shlex.join(argv[1:])
    a = manifest.get("args", {})
    return f"./run.sh {a.get('command', '?')}"


def record(path: Path) -> RunRecord:
    """The identity of the run directory at `path`, whose files are checked first (a run's
    summary, manifest and entries, a sweep's manifest: trapline/runfiles.py), so that a
    damaged run is one line naming the file and the field, not a citation of it."""
    from trapline import runfiles
    manifest, _ = runfiles.manifest(path)
    if manifest.get("kind", "run") == "run":
        runfiles.load(path)
    sums = directory_sums(path)
    git = manifest.get("git", {})
    when = str(manifest.get("finished") or manifest.get("started") or "")[:10]
    return RunRecord(path=path, run_id=str(manifest.get("run_id", path.name)),
                     kind="sweep" if manifest.get("kind") == "sweep" else "run", date=when,
                     command=command_line(manifest), commit=str(git.get("commit", "unknown")),
                     dirty=bool(git.get("dirty")), version=str(manifest.get("trapline", "?")),
                     manifest_sha256=sums["manifest.json"], content_sha256=content_hash(sums),
                     manifest=manifest, sums=sums)


# ------------------------------------------------------------------ BibTeX

_TEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "%": r"\%", "&": r"\&", "$": r"\$",
        "#": r"\#", "_": r"\_", "^": r"\^{}", "~": r"\~{}"}


def tex(s: str) -> str:
    """A string as a BibTeX field value: LaTeX's special characters escaped, braces balanced."""
    return "".join(_TEX.get(c, c) for c in s).replace("--", "-{}-")  # --quick, not an en dash


def _entry(kind: str, key: str, fields: dict[str, str]) -> str:
    body = "".join(f"  {k} = {{{v}}},\n" for k, v in fields.items() if v)
    return f"@{kind}{{{key},\n{body}}}\n"


def _authors(sw: Software) -> str:
    # an entity's name in double braces, so BibTeX does not read it as first/last names
    return " and ".join(f"{{{tex(a)}}}" if "," not in a else tex(a) for a in sw.authors)


def _key(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9.:_-]", "-", s)


def software_entry(sw: Software, git: dict) -> str:
    """@software for trapline at the checked-out commit."""
    commit = git.get("commit", "unknown")
    note = f"git commit {commit}" + (" with uncommitted changes" if git.get("dirty") else "")
    return _entry("software", _key(f"trapline-{sw.version}-{commit[:7]}"), {
        "author": _authors(sw), "title": tex(sw.title), "year": sw.year, "version": tex(sw.version),
        "note": tex(note), "license": tex(sw.license)})


def run_entry(sw: Software, rec: RunRecord) -> str:
    """@misc for one run or sweep directory, identified by its hashes."""
    dirty = " (with uncommitted changes)" if rec.dirty else ""
    note = (f"trapline {rec.kind} {rec.run_id}, made by `{rec.command}' with trapline {rec.version} at git commit "
            f"{rec.commit}{dirty}. Content sha256 {rec.content_sha256} (the sha256 of the SHA256SUMS of the "
            f"{rec.kind}'s files); manifest.json sha256 {rec.manifest_sha256}.")
    return _entry("misc", _key(f"trapline-{rec.kind}-{rec.run_id}"), {
        "author": _authors(sw), "title": tex(f"trapline results: {rec.kind} {rec.run_id}"),
        "year": rec.date[:4], "month": rec.date[5:7].lstrip("0"), "date": rec.date,
        "howpublished": tex(f"trapline {rec.version} {rec.kind} directory {rec.run_id}"), "note": tex(note)})


def bibtex(run: str | None = None) -> str:
    """The BibTeX `./run.sh cite [RUN]` prints: the software, then the run (the
    latest one when none is named; none when no run has finished yet)."""
    sw = load_cff()
    if sw.version != __version__:
        raise UsageError(f"CITATION.cff says version {sw.version} but trapline is {__version__}; "
                         "make them equal")
    out = software_entry(sw, results.git_info())
    try:
        path = resolve(run)
    except UsageError:
        if run is not None:
            raise
        return out  # nothing run yet: the software alone
    return out + "\n" + run_entry(sw, record(path))
