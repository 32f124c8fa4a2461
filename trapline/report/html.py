"""report.html: the section model (report/sections.py) spelled in standalone HTML, the
plots embedded. No layout decisions here beyond the style sheet: what to show, in
which order, is decided in sections.py."""

from __future__ import annotations

import base64
from html import escape as esc

from trapline.report.plots import STATUS_COLOR
from trapline.report.sections import Bullets, Cell, Image, Legend, Para, Pre, Report, Table

STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td.status{color:#fff;font-weight:bold}td.status a{color:#fff}.small{font-size:12px;color:#444}img{max-width:100%}
section{border-top:1px solid #ddd;margin-top:1.5em}
#claim-matrix td.status{white-space:nowrap;text-align:right}#claim-matrix td[title]{cursor:help}
.legend span{display:inline-block;color:#fff;font-weight:bold;padding:1px 6px;margin-right:4px}
.legend{font-size:12px;color:#444}details li{font-size:12px}"""


def _cell(c: Cell, tag: str = "td") -> str:
    t = esc(c.text)
    if c.link:
        t = f'<a href="#{esc(c.link)}">{t}</a>'
    if c.strong:
        t = f"<b>{t}</b>"
    title = f' title="{esc(c.title)}"' if c.title else ""
    if c.status:
        return (f'<{tag} class="status" data-status="{esc(c.status)}"{title} '
                f'style="background:{STATUS_COLOR[c.status]}">{t}</{tag}>')
    return f"<{tag}{title}>{t}</{tag}>"


def _block(b, images: dict[str, bytes]) -> str:
    if isinstance(b, Para):
        return f'<p class="small">{esc(b.text)}</p>' if b.small else f"<p>{esc(b.text)}</p>"
    if isinstance(b, Table):
        head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in b.header) + "</tr>"
        rows = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in b.rows)
        ident = f' id="{esc(b.id)}"' if b.id else ""
        table = f"<table{ident}>{head}{rows}</table>"
        if b.fold:
            return f"<details><summary>{esc(b.caption)}</summary>{table}</details>"
        return (f"<p>{esc(b.caption)}</p>" if b.caption else "") + table
    if isinstance(b, Bullets):
        items = "<ul>" + "".join(f"<li>{_cell(c, 'span')}</li>" for c in b.items) + "</ul>"
        return f"<details><summary>{esc(b.fold)}</summary>{items}</details>" if b.fold else items
    if isinstance(b, Legend):
        return ('<p class="legend">' + " ".join(f'<span style="background:{STATUS_COLOR[s]}">{esc(s)}</span>'
                                                f"{esc(m)}." for s, m in b.items) + "</p>")
    if isinstance(b, Image):
        return f'<img alt="{esc(b.alt)}" src="data:image/png;base64,{base64.b64encode(images[b.path]).decode()}">'
    if isinstance(b, Pre):
        return f"<details><summary>{esc(b.caption)}</summary><pre>{esc(chr(10).join(b.lines))}</pre></details>"
    raise TypeError(f"unknown block {type(b).__name__}")


def render(r: Report, images: dict[str, bytes]) -> str:
    body = []
    for s in r.sections:
        status = (f' <span style="color:{STATUS_COLOR[s.status]}">{esc(s.status)}</span>' if s.status else "")
        body.append(f'<section id="{esc(s.anchor)}">\n<h2>{esc(s.title)}{status}</h2>\n'
                    + "\n".join(_block(b, images) for b in s.blocks) + "\n</section>")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(r.title)}</title>\n'
            f"<style>{STYLE}</style></head><body>\n<h1>{esc(r.title)}</h1>\n<p>{esc(r.subtitle)}</p>\n"
            + "\n".join(body) + "\n</body></html>\n")
