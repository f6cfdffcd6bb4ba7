"""semantics.html: qconform/docs/semantics.md as a page that travels with every report.

A customer reading a certificate has neither the repository nor the wheel; each clause a case
points to must open as a page beside the report. semantics.md is plain Markdown with raw
``<a id="...">`` anchors (the clause ids); this renders the subset it uses -- headings, paragraphs,
lists, quotes, pipe tables, code spans and blocks, emphasis, links -- with no dependency and keeps every
anchor. ``tests/test_report_html.py`` checks every clause of the corpus resolves to one.
"""
from __future__ import annotations

import re
from html import escape
from importlib.resources import files

ANCHOR = re.compile(r'^<a id="([^"]+)"></a>\s*$')


def source() -> str:
    return files("qconform").joinpath("docs", "semantics.md").read_text(encoding="utf-8")


def anchors(text: str | None = None) -> set[str]:
    return {m.group(1) for m in (ANCHOR.match(ln) for ln in (text or source()).splitlines()) if m}


def _inline(text: str) -> str:
    parts = re.split(r"(``[^`]+``|`[^`]+`)", text)
    out = []
    for p in parts:
        if p.startswith("`"):
            out.append(f"<code>{escape(p.strip('`'))}</code>")
            continue
        p = escape(p, quote=False)
        p = re.sub(r"\[([^\]]+)\]\(#([^)]+)\)", r'<a href="#\2">\1</a>', p)
        p = re.sub(r"\[([^\]]+)\]\((https?://[^)]+)\)", r'<a href="\2">\1</a>', p)
        p = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", p)
        p = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<i>\1</i>", p)
        out.append(p)
    return "".join(out)


def render(text: str | None = None) -> str:
    lines = (text or source()).splitlines()
    body: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            body.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()

    while i < len(lines):
        ln = lines[i]
        m = ANCHOR.match(ln)
        if m:
            flush()
            body.append(f'<a id="{escape(m.group(1))}"></a>')
        elif ln.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            body.append(f"<pre>{escape(chr(10).join(block))}</pre>")
        elif re.match(r"^#{1,6} ", ln):
            flush()
            level = len(ln) - len(ln.lstrip("#"))
            body.append(f"<h{level}>{_inline(ln[level:].strip())}</h{level}>")
        elif ln.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-{2,}:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            i -= 1
            head, rest = rows[0], rows[1:]
            body.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                        + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rest)
                        + "</table>")
        elif ln.startswith(">"):  # the spec's own words, quoted
            flush()
            quoted = []
            while i < len(lines) and lines[i].startswith(">"):
                quoted.append(lines[i][1:].strip())
                i += 1
            i -= 1
            body.append("<blockquote>" + "".join(f"<p>{_inline(q)}</p>" for q in quoted if q) + "</blockquote>")
        elif re.match(r"^\s*([-*]|\d+\.) ", ln):
            flush()
            items = []
            while i < len(lines) and (re.match(r"^\s*([-*]|\d+\.) ", lines[i])
                                      or (lines[i].startswith("  ") and items)):
                if re.match(r"^\s*([-*]|\d+\.) ", lines[i]):
                    items.append(re.sub(r"^\s*([-*]|\d+\.) ", "", lines[i]))
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            i -= 1
            body.append("<ul>" + "".join(f"<li>{_inline(it)}</li>" for it in items) + "</ul>")
        elif not ln.strip():
            flush()
        else:
            para.append(ln.strip())
        i += 1
    flush()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\"><title>qconform semantics</title><style>"
            "body{font:15px/1.5 system-ui,sans-serif;max-width:1000px;margin:20px auto;padding:0 16px;color:#212121}"
            "code{font-size:13px;background:#f5f5f5;padding:0 2px}pre{background:#f5f5f5;padding:8px;"
            "white-space:pre-wrap}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;"
            "vertical-align:top}:target+*{background:#fff8e1}"
            "blockquote{margin:8px 0;padding:2px 12px;border-left:4px solid #90a4ae;background:#fafafa}"
            "blockquote p{margin:4px 0}"
            "</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
