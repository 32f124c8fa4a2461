"""report.md: the section model (report/sections.py) spelled in Markdown. No layout
decisions here: what to show, in which order, is decided in sections.py."""

from __future__ import annotations

from trapline.report.sections import Bullets, Cell, Image, Legend, Para, Pre, Report, Table


def _cell(c: Cell) -> str:
    t = c.text.replace("|", "\\|").replace("\n", " ")
    if c.link:
        t = f"[{t}](#{c.link})"
    t = f"**{t}**" if c.status or c.strong else t
    # no colour here: a status cell names its status unless its text does
    return f"{t} ({c.status})" if c.status and c.status not in c.text else t


def _block(b) -> list[str]:
    if isinstance(b, Para):
        return [b.text]
    if isinstance(b, Table):
        return ([b.caption, ""] if b.caption else []) + [
            "| " + " | ".join(h.replace("|", "\\|") for h in b.header) + " |",
            "|" + "---|" * len(b.header)] + ["| " + " | ".join(map(_cell, r)) + " |" for r in b.rows]
    if isinstance(b, Bullets):
        return ([f"{b.fold}:", ""] if b.fold else []) + [f"- {_cell(c)}" for c in b.items]
    if isinstance(b, Legend):
        return ["Status: " + "; ".join(f"**{s}**: {m}" for s, m in b.items) + "."]
    if isinstance(b, Image):
        return [f"![{b.alt}]({b.path})"]
    if isinstance(b, Pre):
        return [f"{b.caption}:", ""] + [f"    {line}" for line in b.lines]
    raise TypeError(f"unknown block {type(b).__name__}")


def render(r: Report) -> str:
    out = [f"# {r.title}", "", r.subtitle, ""]
    for s in r.sections:
        out += [f'<a id="{s.anchor}"></a>', "", f"## {s.title}" + (f": {s.status}" if s.status else ""), ""]
        for b in s.blocks:
            out += _block(b) + [""]
    return "\n".join(out)
