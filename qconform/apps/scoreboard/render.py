"""Rendering the scoreboard: scoreboard.md, scoreboard.html, a page and a certificate per runtime."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from qconform.apps.scoreboard._common import DATA, TOP
from qconform.apps.scoreboard.data import CERTIFICATE_COLUMNS, CERTIFICATE_FORMAT, certificate_path, page_path
from qconform.report.html import BASE_CSS
from qconform.verdicts import CRASHED, HEADLINE, INFO, PASS, TIMEOUT, UNSUPPORTED, Status


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def _named(rt: Mapping[str, Any]) -> str:
    d = rt["diagnosis"]
    return f"{d['named']} of {d['deviations']} ({_pct(d['named'], d['deviations'])})" if d["deviations"] else "–"


def _failing_named(rt: Mapping[str, Any]) -> str:
    d = rt["diagnosis"]
    if "failing" not in d:  # a scoreboard written before the column existed
        return "?"
    return f"{d['failing_named']} of {d['failing']} ({_pct(d['failing_named'], d['failing'])})" if d["failing"] else "–"


def _headline(rt: Mapping[str, Any]) -> list[str]:
    c = rt["counts"]
    return [str(c.get("collected", 0)), *(str(c.get(v, 0)) for v in HEADLINE),
            str(c.get(CRASHED, 0) + c.get(TIMEOUT, 0)), _named(rt), _failing_named(rt)]


HEADLINE_COLS = ["cases", *HEADLINE, "crashed/timeout", "named by the diagnosis", "failing cases named"]


def _cell(cell: Mapping[str, int] | None) -> str:
    return f"{cell[PASS]} / {cell[Status.DEVIATES]} / {cell[UNSUPPORTED]}" if cell else "–"


def _options(rt: Mapping[str, Any]) -> str:
    return json.dumps(rt["runner"].get("options") or {}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _selection(data: Mapping[str, Any]) -> list[str]:
    return sorted({"; ".join(rt["selection"]) for rt in data["runtimes"] if rt["selection"]})


def _intro(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(label, code, text) lines of the header, shared by both renderings (code: shown as code)."""
    digests = data["corpus"]["digests"]
    by_name = {rt["name"]: rt for rt in data["runtimes"]}
    if len(digests) == 1:
        (digest, names), = digests.items()
        cases = by_name[names[0]]["corpus_cases"]
        lines = [("corpus digest", digest, f" ({cases} cases)" if cases is not None else "")]
    else:
        lines = [("corpus digest", "", "DIFFERENT corpora: " + "; ".join(f"{d} ({', '.join(n)})"
                                                                          for d, n in digests.items()))]
    lines.append(("qconform", "", ", ".join(sorted({rt["qconform_version"] for rt in data["runtimes"]})) or "?"))
    sel = _selection(data)
    some = [rt for rt in data["runtimes"] if rt["selection"]]
    if some and len(some) < len(data["runtimes"]):  # a runtime certified on its declared scope, the rest whole
        lines.append(("selection", "", "the whole corpus, except " + "; ".join(
            f"{rt['name']}: {'its declared scope' if rt['selection'] == ['scope'] else '; '.join(rt['selection'])}, "
            f"{rt['counts'].get('collected', 0):,} cases" for rt in some)))
    else:
        lines.append(("selection", "", " | ".join(sel) + " (a partial scoreboard)" if sel else "the whole corpus"))
    incomplete = [rt["name"] for rt in data["runtimes"] if not rt["complete"]]
    if incomplete:
        lines.append(("INCOMPLETE runs", "", ", ".join(incomplete) + " (cases that did not run count as not-run)"))
    return lines


#: How a bundled runtime's row is measured (``qconform scoreboard`` runs it, with ``--pack`` where
#: the row says it asked to pack; pytest's front end, ``pytest --runner=NAME --report=DIR``, writes
#: the same report).
MEASURED_BY = "qconform certify --runner {name}{pack} --report DIR"


def measured_by(rt: Mapping[str, Any]) -> str:
    """The command that measured a row: its own where it was added from elsewhere, else ``MEASURED_BY``."""
    return rt.get("command") or MEASURED_BY.format(name=rt["name"], pack=" --pack" if rt.get("packing") else "")


def packing_line(rt: Mapping[str, Any]) -> str:
    """What ``--pack`` did in a row's run ('' where it was not asked): the report says which cases."""
    p = rt.get("packing")
    if not p:
        return ""
    if not p["used"]:
        return f"not packed: {p['why']}"
    return f"{p['cases']:,} passing case(s) came from packed models: {p['why']}"


ABOUT = ("Bit-exact conformance of ONNX runtimes to qconform's golden corpus: one "
         f"`{MEASURED_BY.format(name='NAME', pack='')}/NAME` run per runtime (the report `pytest --runner=NAME "
         "--report=DIR/NAME` writes too; with `--pack` where a runtime's page says so), compared by "
         "`qconform scoreboard`. "
         "Re-render with `qconform scoreboard --from-reports DIR`; `qconform scoreboard --check` says "
         "when it no longer matches the corpus or the installed runtimes.")
NAMED_NOTE = ("“named by the diagnosis”: deviating cases (fail, error, crashed, timeout) for which the "
              "diagnosis named at least one deviation model that reproduces the runtime's bits "
              "(qconform/docs/diagnosis.md). “failing cases named”: the same for the fail verdicts alone, "
              "the cases with outputs to explain (an error or a crash has none).")
CELL_NOTE = ("Each cell: pass / deviate / unsupported, where deviate = fail + error + crashed + timeout; "
             "– where the runtime ran no case of the op version.")


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(data: Mapping[str, Any]) -> str:
    """scoreboard.md."""
    rts = data["runtimes"]
    names = [rt["name"] for rt in rts]
    out = ["# qconform scoreboard", "", ABOUT, ""]
    out += [f"- {label}: " + (f"`{code}`" if code else "") + _md(text) for label, code, text in _intro(data)]
    out += ["", "## Runtimes", "", "| runtime | describe() name | version | device | options | platform | certification report |",
            "|---|---|---|---|---|---|---|"]
    for rt in rts:
        r = rt["runner"]
        links = " · ".join(f"[{f}]({p})" for f, p in rt["links"].items()) or "–"
        out.append(f"| {_md(rt['name'])} | {_md(r.get('name'))} | {_md(r.get('version'))} | {_md(r.get('device'))} "
                   f"| `{_md(_options(rt))}` | {_md(rt['platform'])} | {links} |")
    out += ["", "## Headline", "", "| runtime | " + " | ".join(HEADLINE_COLS) + " |",
            "|---|" + "---:|" * len(HEADLINE_COLS)]
    out += [f"| {_md(rt['name'])} | " + " | ".join(_headline(rt)) + " |" for rt in rts]
    out += ["", NAMED_NOTE, ""]
    out += ["## Per op version", "", CELL_NOTE, "", "| op version | " + " | ".join(map(_md, names)) + " |",
            "|---|" + "---|" * len(names)]
    for row in data["op_versions"]:
        out.append(f"| {_md(row['op_version'])} | " + " | ".join(_cell(row["cells"].get(n)) for n in names) + " |")
    out += ["", "## Diagnosis", ""]
    for rt in rts:
        out += [f"### {rt['name']}", "", _diag_sentence(rt), ""]
        models = rt["diagnosis"]["models"]
        if models:
            out += ["| deviation model | deviating cases it reproduces | adds to the run's cover |", "|---|---:|---:|"]
            out += [f"| `{_md(m['model'])}` | {m['cases']} | {m['adds'] or '–'} |" for m in models[:TOP]]
            if len(models) > TOP:
                out.append(f"| … {len(models) - TOP} more model(s) | | |")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _diag_sentence(rt: Mapping[str, Any]) -> str:
    d = rt["diagnosis"]
    if not d["deviations"]:
        return "No deviating case."
    named = f"{d['named']} ({_pct(d['named'], d['deviations'])})"
    parts = [f"{d['deviations']} deviating case(s): a model named for {named}"]
    if d["unnamed"]:
        steps = ", ".join(f"{s} ×{n}" for s, n in d["steps"].items())
        parts.append(f"no model reproduces {d['unnamed']} (localised to: {steps})")
    if d["undiagnosed"]:
        parts.append(f"{d['undiagnosed']} not diagnosed (errors, crashes, timeouts, or beyond the per-group budget)")
    if d["errors"]:
        parts.append(f"a deviation model raised on {d['errors']} case(s) (a qconform bug)")
    return "; ".join(parts) + "."


def render_page(rt: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    """runtimes/NAME.md: one runtime's certification summary, from its report alone."""
    r, name = rt["runner"], rt["name"]
    title = " ".join(str(x) for x in (name, r.get("version")) if x)
    out = [f"# {title}: bit-exact conformance", "", f"**{_md(rt['overall'])}**", "",
           f"- runner: `{_md(r.get('name'))}` {_md(r.get('version'))}, device {_md(r.get('device'))}, "
           f"options `{_md(_options(rt))}`",
           f"- platform: {_md(rt['platform'])}",
           f"- corpus digest: `{rt['corpus_digest']}` ({rt['corpus_cases']} cases), qconform {rt['qconform_version']}",
           f"- selection: {_md('; '.join(rt['selection'])) + ' (a partial run)' if rt['selection'] else 'the whole corpus'}",
           f"- measured by: `{measured_by(rt)}` (DIR/report.html lists every case, with "
           "each deviating element's inputs, expected and actual bits); back to the [scoreboard](../scoreboard.md)",
           *([f"- packing: {_md(packing_line(rt))}"] if rt.get("packing") else []),
           f"- machine-readable: [{name}.certificate.json]({certificate_path(name).rsplit('/', 1)[1]}), the verdict "
           "of every op version and type combination",
           "", "## Per op version", "",
           "| op version | verdict | pass | deviate | unsupported | information |", "|---|---|---:|---:|---:|---:|"]
    for sc in rt["scopes"]:
        c = sc["counts"]
        out.append(f"| {_md(sc['op_version'])} | {_md(sc['verdict'])} | {c[PASS]} | {c[Status.DEVIATES]} "
                   f"| {c[UNSUPPORTED]} | {c[INFO]} |")
    out += ["", "## Deviating type combinations", "",
            "Each row: the cases of one op version and type combination that deviate, of those that ran, "
            "and which deviation models (qconform/docs/diagnosis.md) reproduce them; an example case "
            "with, for errors, the first line of the runtime's message.", ""]
    rows = [(sc["op_version"], t) for sc in rt["scopes"] for t in sc["deviating_types"]]
    if not rows:
        out.append("No deviating case.")
    else:
        out += ["| op version | types | deviating | of cases run | named by | example |", "|---|---|---:|---:|---|---|"]
        for ov, t in rows:
            models = ", ".join(f"`{_md(m)}` ×{n}" if not m.startswith("(") else f"{_md(m)} ×{n}"
                               for m, n in t["models"].items())
            example = f"`{_md(t['example'])}`" + (f": {_md(t['problem'])}" if t["problem"] else "")
            out.append(f"| {_md(ov)} | {_md(t['types'])} | {t[Status.DEVIATES]} | {t['ran']} | {models} | {example} |")
    out += ["", "## Diagnosis", "", _diag_sentence(rt), ""]
    models = rt["diagnosis"]["models"]
    if models:
        out += ["| deviation model | deviating cases it reproduces | adds to the run's cover |", "|---|---:|---:|"]
        out += [f"| `{_md(m['model'])}` | {m['cases']} | {m['adds'] or '–'} |"
                for m in models]
    return "\n".join(out).rstrip("\n") + "\n"


#: The certificate's page and headings (``report.html.BASE_CSS``), and the scoreboard's tables.
CSS = BASE_CSS + """.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #e0e0e0;padding:2px 8px;text-align:left;vertical-align:top} td.n{text-align:right}
th{background:#fafafa} code{font-size:12px;overflow-wrap:anywhere}
td.pass{background:#e8f5e9} td.deviate{background:#ffebee} td.unsupported{background:#f5f5f5} td.none{color:#999}
"""


def _cls(cell: Mapping[str, int] | None) -> str:
    if not cell:
        return "none"
    return Status.DEVIATES if cell[Status.DEVIATES] else Status.PASS if cell[PASS] else Status.UNSUPPORTED


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric_from: int = 99) -> list[str]:
    """An HTML table of already escaped cells; columns from ``numeric_from`` right-aligned."""
    out = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td class=n>{c}</td>" if i >= numeric_from else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    return out + ["</table>"]


def render_html(data: Mapping[str, Any]) -> str:
    """scoreboard.html: the same tables, self-contained (no script, no external resource)."""
    e = escape
    rts = data["runtimes"]
    names = [rt["name"] for rt in rts]
    about = e(ABOUT).replace("`", "")
    out = ["<!DOCTYPE html>", "<html lang=en><head><meta charset=utf-8><title>qconform scoreboard</title>",
           f"<style>{CSS}</style></head><body>", "<h1>qconform scoreboard</h1>", f"<p class=meta>{about}</p>",
           "<ul class=meta>"]
    out += [f"<li>{e(label)}: " + (f"<code>{e(code)}</code>" if code else "") + f"{e(text)}</li>"
            for label, code, text in _intro(data)]
    out += ["</ul>", "<h2>Runtimes</h2>"]
    rows = []
    for rt in rts:
        r = rt["runner"]
        links = " · ".join(f"<a href=\"{e(p)}\">{e(f)}</a>" for f, p in rt["links"].items()) or "–"
        rows.append([e(rt["name"]), e(str(r.get("name"))), e(str(r.get("version"))), e(str(r.get("device"))),
                     f"<code>{e(_options(rt))}</code>", e(rt["platform"]), links])
    out += _table(["runtime", "describe() name", "version", "device", "options", "platform", "certification report"],
                  rows)
    out += ["<h2>Headline</h2>"]
    out += _table(["runtime", *map(e, HEADLINE_COLS)], ([e(rt["name"]), *map(e, _headline(rt))] for rt in rts), 1)
    out += [f"<p class=meta>{e(NAMED_NOTE)}</p>", "<h2>Per op version</h2>", f"<p class=meta>{e(CELL_NOTE)}</p>",
            "<table>",
            "<tr><th>op version</th>" + "".join(f"<th>{e(n)}</th>" for n in names) + "</tr>"]
    for row in data["op_versions"]:
        cells = [row["cells"].get(n) for n in names]
        out.append(f"<tr><td>{e(row['op_version'])}</td>"
                   + "".join(f"<td class={_cls(c)}>{e(_cell(c))}</td>" for c in cells) + "</tr>")
    out += ["</table>", "<h2>Diagnosis</h2>"]
    for rt in rts:
        out += [f"<h3>{e(rt['name'])}</h3>", f"<p>{e(_diag_sentence(rt))}</p>"]
        models = rt["diagnosis"]["models"]
        if models:
            rows = [[f"<code>{e(m['model'])}</code>", str(m["cases"]), str(m["adds"] or "–")] for m in models[:TOP]]
            if len(models) > TOP:
                rows.append([f"… {len(models) - TOP} more model(s)", "", ""])
            out += _table(["deviation model", "deviating cases it reproduces", "adds to the run's cover"], rows, 1)
    out += ["</body></html>"]
    return "\n".join(out) + "\n"


#: What each runtime's own files hold and scoreboard.json leaves out.
PER_RUNTIME = ("scopes", "verdicts")


def render_certificate(rt: Mapping[str, Any]) -> str:
    """runtimes/NAME.certificate.json: the certificate a vendor hands on, machine-readable: what ran
    on what, the overall statement, and a verdict row per op version and per type combination, one
    row a line (a regression shows as a one-line diff). From the report alone: the head's keys
    sorted, the rows last, no run-specific field (date, duration, host), so the same runtime on the
    same corpus gives the same bytes."""
    head = {"format": CERTIFICATE_FORMAT, "runtime": rt["name"],
            "runner": rt["runner"], "platform": rt["platform"], "qconform_version": rt["qconform_version"],
            "corpus": {"digest": rt["corpus_digest"], "cases": rt["corpus_cases"]},
            "selection": rt["selection"], "complete": rt["complete"], "counts": rt["counts"],
            "overall": rt["overall"],
            "full_report": measured_by(rt)
                           + " (DIR/report.json, report.html)",
            **({"packing": packing_line(rt)} if rt.get("packing") else {}),
            "columns": list(CERTIFICATE_COLUMNS)}
    text = json.dumps(head, sort_keys=True, indent=1, ensure_ascii=False).removesuffix("\n}")
    rows = [json.dumps(r, ensure_ascii=False) for scope in rt["verdicts"] for r in scope]
    return text + ',\n "rows": [\n  ' + ",\n  ".join(rows) + "\n ]\n}\n"


def dumps(data: Mapping[str, Any]) -> str:
    """scoreboard.json: sorted keys, so equal data is equal bytes. A runtime's ``scopes`` (its
    page's rows, up to a few thousand) stay out: the pages hold them, and the JSON stays small."""
    slim = {**data, "runtimes": [{k: v for k, v in rt.items() if k not in PER_RUNTIME} for rt in data["runtimes"]]}
    return json.dumps(slim, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write(data: Mapping[str, Any], out: Path) -> list[Path]:
    """The three files into ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    texts = {"scoreboard.md": render_markdown(data), "scoreboard.html": render_html(data), DATA: dumps(data)}
    measured = [rt for rt in data["runtimes"] if "scopes" in rt]  # a merged row keeps its committed pages
    texts.update({page_path(rt["name"]): render_page(rt, data) for rt in measured})
    texts.update({certificate_path(rt["name"]): render_certificate(rt) for rt in measured})
    pages = out / page_path("x").rsplit("/", 1)[0]
    keep = {f"{pages.name}/{Path(p(rt['name'])).name}" for rt in data["runtimes"] for p in (page_path, certificate_path)}
    for old in [*pages.glob("*.md"), *pages.glob("*.certificate.json")]:  # a runtime no longer compared keeps none
        if f"{pages.name}/{old.name}" not in keep:
            old.unlink()
    paths = []
    for name, text in texts.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(text.encode("utf-8"))  # bytes: no newline translation anywhere
        paths.append(out / name)
    return paths
