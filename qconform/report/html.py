"""report.html: one static certificate a customer can open offline — identity, verdict per scope,
totals, filters, failures with their evidence.

Rendered on the server side from the report dict, so it reads without JavaScript; a few lines of
inline JS only filter what is shown. No external resource of any kind (no fonts, CDNs, images).
"""
from __future__ import annotations


from html import escape

from qconform.report.certificate import NOT_FULLY_RUN
from qconform.verdicts import CRASHED, ERROR, FAIL, INFO, NOT_RUN, PASS, TIMEOUT, UNSUPPORTED, VERDICTS, Conformance, \
    Stale, Status

#: Colour per verdict and heat-map status (the totals, the failure badges, the matrix).
COLOURS = {PASS: "#2e7d32", Status.PARTIAL: "#9ccc65", FAIL: "#c62828", ERROR: "#ef6c00", CRASHED: "#ef6c00",
           TIMEOUT: "#ef6c00", UNSUPPORTED: "#9e9e9e", INFO: "#90caf9", NOT_RUN: "#eceff1"}
#: Verdicts and statuses drawn light, with dark text.
LIGHT = frozenset({Status.PARTIAL, NOT_RUN, Conformance.NOT_RUN, NOT_FULLY_RUN})

#: What every page qconform renders shares (a certificate, the scoreboard): the page and its headings.
BASE_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:20px;color:#212121;max-width:1240px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:24px 0 8px} h3{font-size:15px;margin:14px 0 6px}
"""
CSS = BASE_CSS + """.meta{color:#555;font-size:13px} .meta code{font-size:12px}
.banner{padding:8px 12px;border-radius:4px;margin:10px 0;font-weight:600}
.ok{background:#e8f5e9;color:#1b5e20} .bad{background:#ffebee;color:#b71c1c} .warn{background:#fff8e1;color:#8d6e00}
.totals{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.total{border-radius:6px;padding:6px 12px;color:#fff;min-width:80px}
.total b{display:block;font-size:20px} .total.light{color:#212121}
table{border-collapse:collapse} td,th{padding:2px 6px}
.filters{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;z-index:2}
.filters label{margin-right:10px} .filters input[type=search]{width:320px}
details.f{border:1px solid #e0e0e0;border-radius:4px;margin:4px 0;padding:4px 8px}
details.f summary{cursor:pointer} .v{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
.mm td,.mm th,.cases td,.cases th{border:1px solid #e0e0e0;font-size:12px;text-align:left}
.mm code,.cases code{font-size:12px} .hidden{display:none}
pre{white-space:pre-wrap;overflow-wrap:anywhere} td,th{overflow-wrap:anywhere}
.rollup{width:100%} .rollup td{vertical-align:top} .rollup td:first-child{width:20%}
.rollup td:nth-child(3){width:25%} .rollup th,.diag th,.rollup td:nth-child(2),.diag td:nth-child(2){overflow-wrap:normal}
.ident{font-size:13px;border-collapse:collapse;width:100%} .ident th{text-align:left;white-space:nowrap;
 vertical-align:top;color:#555;font-weight:600;width:150px} .ident td{vertical-align:top}
.overall{font-size:16px;font-weight:600;padding:10px 12px;border-radius:4px;margin:10px 0}
.scopes{border-collapse:collapse;width:100%;font-size:13px} .scopes th{position:sticky;top:0;background:#fff;
 text-align:left;border-bottom:2px solid #bbb;z-index:1} .scopes td{border-bottom:1px solid #eee;vertical-align:top}
.scopes td.sv{color:#fff;white-space:nowrap;font-weight:600;width:1%} .scopes td.sv.light{color:#212121}
.scopes details summary{cursor:pointer} .scopes table{width:100%;font-size:12px;margin:4px 0}
.expl{display:none} .rollup td{font-size:12px;padding:1px 4px;line-height:1.2}
.chips{display:flex;flex-wrap:wrap;gap:3px;margin:8px 0} .chip{color:#fff;border-radius:3px;padding:1px 5px;
 font-size:11px;white-space:nowrap} .chip.light{color:#212121} .printonly{display:none}
@media print{body{margin:0;max-width:none;font-size:11px} .filters,button{display:none}
 .caselist{display:none} .printonly{display:block} .expl{display:inline}
 details.f,details.ty{break-inside:avoid} tr{break-inside:avoid} .scopes th{position:static}
 a{color:inherit;text-decoration:none}}
html.print body{margin:0;max-width:none;font-size:11px} html.print .filters{display:none}
html.print .caselist{display:none} html.print .printonly{display:block}
"""

#: Colour of each scope verdict (qconform/report/certificate.py).
SCOPE_COLOURS = {Conformance.DEVIATES: "#c62828", Conformance.ACCEPTED: "#ef6c00",
                 Conformance.CONFORMANT: "#2e7d32", Conformance.SELECTION_PASSED: "#a5d6a7",
                 Conformance.UNSUPPORTED: "#9e9e9e",
                 Conformance.INFORMATION: "#90caf9", Conformance.NOT_RUN: "#eceff1", NOT_FULLY_RUN: "#cfd8dc"}

JS = """
function qcFilter(){
  const on=new Set([...document.querySelectorAll('.fv:checked')].map(e=>e.value));
  const ov=document.getElementById('fov').value, q=document.getElementById('fq').value.toLowerCase();
  const tp=document.getElementById('ftp').value;
  let n=0;
  document.querySelectorAll('[data-verdict]').forEach(e=>{
    const show=on.has(e.dataset.verdict)&&(!ov||e.dataset.ov===ov)&&(!tp||e.dataset.tp===tp)
      &&(!q||e.dataset.id.toLowerCase().includes(q));
    e.classList.toggle('hidden',!show); if(show&&e.tagName==='DETAILS')n++;});
  document.getElementById('nshown').textContent=n;
}
function qcReset(){document.getElementById('fov').value='';document.getElementById('ftp').value='';
  document.getElementById('fq').value='';document.querySelectorAll('.fv').forEach(e=>e.checked=true);qcFilter();}
function qcHash(){
  // report.html#ov=QuantizeLinear-21&tp=float32→int8&q=text&v=fail,error&open=1: a shareable view
  const h=new URLSearchParams(location.hash.slice(1));
  if(h.has('ov'))document.getElementById('fov').value=h.get('ov');
  if(h.has('tp'))document.getElementById('ftp').value=h.get('tp');
  if(h.has('q'))document.getElementById('fq').value=h.get('q');
  if(h.has('v')){const v=new Set(h.get('v').split(','));
    document.querySelectorAll('.fv').forEach(e=>e.checked=v.has(e.value));}
  qcFilter();
  if(h.has('open'))document.querySelectorAll('details.f:not(.hidden)').forEach(d=>d.open=true);
}
document.addEventListener('DOMContentLoaded',qcHash);
window.addEventListener('hashchange',qcHash);
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _badge(verdict: str) -> str:
    colour = COLOURS.get(verdict, "#607d8b")
    fg = "#212121" if verdict in LIGHT else "#fff"
    return f'<span class="v" style="background:{colour};color:{fg}">{_e(verdict)}</span>'


def _plain(value) -> str:
    """A value as a reader reads it, not as Python prints it: lists joined, mappings as 'key value'."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k} {_plain(v)}" for k, v in value.items())
    return str(value)


def _identity(report: dict) -> str:
    """What was tested, on what, with which suite: the block a customer reads first."""
    from qconform.report.certificate import other_corpus, packing_line, platforms, resumed_line
    from qconform.runner import ran_elsewhere

    r, corpus, inv = report["runner"], report["corpus"], report["invocation"]
    p, host, declared = platforms(report)  # where it ran elsewhere: the device's word, never this host's

    def shown(text: str) -> str:
        """A platform row: labelled as the device's declaration where it ran elsewhere."""
        return text + (f" — {_e(declared)}" if declared else "") if text else unknown
    opts = ", ".join(f"{k}={_plain(v)}" for k, v in sorted((r.get("options") or {}).items())) or "none"
    extra = {k: v for k, v in r.items()
             if k not in ("name", "version", "device", "options", "platform", "source", "load", "execution_provider")}
    ep = r.get("execution_provider") or {}
    src = r.get("source") or {}
    packages = ", ".join(f"{k} {v}" for k, v in sorted((p.get("packages") or {}).items()))
    unknown = "not declared by the device" if host is not None else "?"
    machine = " · ".join(_e(x) for x in (p.get("cpu"), p.get("label"), p.get("platform")) if x)
    host_packages = ", ".join(f"{k} {v}" for k, v in sorted(((host or {}).get("packages") or {}).items()))
    other = other_corpus(report)
    base = inv.get("baseline")
    rows = [
        ("runner", f"<b>{_e(r.get('name', '?'))}</b> {_e(r.get('version', ''))} on {_e(r.get('device', '?'))}"),
        ("runner options", _e(opts) + ("".join(f" · {_e(k)}: {_e(_plain(v))}" for k, v in sorted(extra.items())))),
        *([("execution provider", _e(" · ".join(f"{k} {_plain(v)}" for k, v in ep.items())))] if ep else []),
        ("runner source", f"<code>{_e(src.get('path', '?'))}</code> SHA-256 <code>{_e(src.get('sha256', ''))}</code>"
                          if src else "not known"),
        ("platform", shown(machine + (f" · Python {_e(p['python'])}" if machine and p.get("python") else ""))),
        ("ISA features", shown(_e(" ".join(p.get("features") or [])))),
        ("packages", shown(_e(packages))),
        *([("controller", f"{_e(host.get('label', ''))} · {_e(host.get('platform', ''))}: built the models, compared "
                          f"and reported; the runtime ran on the device ({_e(ran_elsewhere(r))}). Its packages: "
                          f"{_e(host_packages or '?')}")] if host is not None else []),
        ("suite", f"qconform {_e(report['qconform_version'])} · corpus <code>{_e(corpus.get('digest', ''))}</code> "
                  f"({_e(corpus.get('cases', '?'))} cases: the SHA-256 over the corpus MANIFEST, which lists every "
                  f"case file's SHA-256)" + (f" · <b>{_e(other)}</b>" if other else "")
                  + f" · profile {_e(inv.get('profile', ''))}"),
        ("command", f"<code>{_e(inv.get('command_line') or ' '.join(inv.get('args', [])))}</code>"),
        ("date", f"{_e(report['timing'].get('started', ''))} · {_e(report['timing'].get('duration_s', ''))} s"
                 + (f" · <b>{_e(resumed_line(report))}</b>" if resumed_line(report) else "")),
        *([("packing", _e(packing_line(report)))] if packing_line(report) else []),
        ("accepted deviations", (f"baseline <code>{_e(base['path'])}</code> SHA-256 <code>{_e(base.get('sha256'))}</code>"
                                 if base else "none (no baseline)")),
        ("report digest", f"<code>{_e((report.get('integrity') or {}).get('content_sha256', ''))}</code> "
                          "(check with <code>qconform report verify DIR</code>)"),
    ]
    return ('<table class="ident" id="identity">'
            + "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>")


def _scope_cell(sc: dict) -> str:
    word = sc["verdict"]
    light = " light" if word in LIGHT else ""
    label = word
    if sc["new"]:
        label += f" ({sc['new']} new)"
    elif sc["accepted"]:
        label = f"{word} ({sc['accepted']}" + (f", {sc['accepted_unnamed']} named by no diagnosis model"
                                               if sc["accepted_unnamed"] else "") + ")"
    return f'<td class="sv{light}" style="background:{SCOPE_COLOURS[word]}">{_e(label)}</td>'


def _short(op_version: str) -> str:
    """An op version as a chip names it: com.microsoft's domain as "ms." (the full name is its title)."""
    return op_version.replace("com.microsoft.", "ms.", 1)


def _chips(scoped: list[dict]) -> str:
    """Every op version's verdict in a few lines: on the first screen, beside the identity."""
    chips = "".join(f'<span class="chip{" light" if sc["verdict"] in LIGHT else ""}" title="{_e(sc["op_version"])}" '
                    f'style="background:{SCOPE_COLOURS[sc["verdict"]]}"><b>{_e(_short(sc["op_version"]))}</b> '
                    f'{_e(sc["verdict"])}</span>' for sc in scoped)
    return f'<div class="chips" id="verdicts">{chips}</div>'


def _not_run(sc: dict, sep: str) -> str:
    """A scope's cases that did not run, where any: why it is not conformant."""
    return f"{sep}<b>{sc[NOT_RUN]} not run</b>" if sc.get(NOT_RUN) else ""


def _scopes(scoped: list[dict]) -> str:
    """Op versions, each with its type combinations folded under it: fits a laptop screen."""
    rows = []
    for sc in scoped:
        detail = "".join(
            f"<tr><td><code>{_e(t['types'])}</code></td>{_scope_cell(t)}<td>{t[PASS]} pass · {t['new']} new · "
            f"{t['accepted']} accepted · {t[UNSUPPORTED]} not supported" + _not_run(t, " · ") + "</td><td>"
            + "<br>".join(_e(x) for x in t["reasons"]) + "</td></tr>" for t in sc["types"])
        rows.append(
            f'<tr data-ov="{_e(sc["op_version"])}"><td><b>{_e(sc["op_version"])}</b></td>{_scope_cell(sc)}'
            f"<td>{sc['cases']} cases: {sc[PASS]} pass, {sc['new']} deviating (new), {sc['accepted']} accepted, "
            f"{sc[UNSUPPORTED]} not supported" + _not_run(sc, ", ")
            + (f"<br>accepted because: {'; '.join(_e(x) for x in sc['reasons'])}" if sc["reasons"] else "")
            + f'<details class="ty"><summary>{len(sc["types"])} type combinations</summary>'
            f'<table><tr><th>types</th><th>verdict</th><th>cases</th><th>accepted because</th></tr>{detail}'
            f"</table></details></td></tr>")
    return ('<table class="scopes"><thead><tr><th>op version</th><th>verdict</th><th>cases and type combinations'
            f'</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _failure(f: dict) -> str:
    attrs = (f'data-verdict="{_e(f["verdict"])}" data-ov="{_e(f["op_version"])}" data-tp="{_e(f["type_pair"])}" '
             f'data-id="{_e(f["id"])}" id="{_e(f["id"])}"')
    bits = [f"<b>{_e(f['id'])}</b>", _badge(f["verdict"])]
    if f["mismatches"]:
        bits.append(f"{f['mismatches']} element(s) differ")
    if f.get("baseline"):
        bits.append(f"<i>baseline: {_e(f['baseline'])}</i>")
    body = [f'<div>clause: <a href="semantics.html#{_e(f["clause"])}"><code>{_e(f["clause"])}</code></a>'
            + (f" · compared with reading <code>{_e(f['reading'])}</code>" if f.get("reading") else "")
            + (f" · {f['masked']} don't-care element(s) skipped" if f.get("masked") else "") + "</div>"]
    if "diagnosis" in f:
        body.append("<div>diagnosis: " + (", ".join(f"<code>{_e(m)}</code>" for m in f["diagnosis"])
                                          or "no known deviation explains this") + "</div>")
    if f.get("problem"):
        body.append(f"<pre>{_e(f['problem'])}</pre>")
    if f["first_mismatches"]:
        rows = ["<tr><th>element</th><th>inputs</th><th>expected</th><th>expected bits</th>"
                "<th>actual</th><th>actual bits</th></tr>"]
        for m in f["first_mismatches"]:
            ins = ", ".join(f"{k}={v}" for k, v in m["inputs"].items())
            rows.append(f"<tr><td><code>{_e(m['output'])}[{_e(','.join(map(str, m['index'])))}]</code></td>"
                        f"<td><code>{_e(ins)}</code></td><td>{_e(m['expected_value'])}</td>"
                        f"<td><code>{_e(m['expected_hex'])}</code></td><td>{_e(m['actual_value'])}</td>"
                        f"<td><code>{_e(m['actual_hex'])}</code></td></tr>")
        more = f["mismatches"] - len(f["first_mismatches"])
        body.append(f'<table class="mm">{"".join(rows)}</table>'
                    + (f"<div>… and {more} more</div>" if more > 0 else ""))
    if f.get("evidence_file"):
        body.append(f'<div><a href="{_e(f["evidence_file"])}" download>every mismatching element '
                    f'({f["evidence_rows"]} rows, CSV: inputs, expected and actual as numbers and bits)</a></div>')
    return f'<details class="f" {attrs}><summary>{" · ".join(bits)}</summary>{"".join(body)}</details>'


def _fixed(report: dict) -> str:
    """An incomplete run, verdicts read back from an earlier run, and accepted deviations this run
    no longer shows (fixed, or not run)."""
    from qconform.report.certificate import resumed_line

    g, out = report.get("gate") or {}, []
    if resumed_line(report):
        out.append(f'<div class="banner warn" id="resumed">{_e(resumed_line(report))}.</div>')
    if not report["complete"]:
        c = report["counts"]
        out.append(f'<div class="banner bad">Incomplete run{" (interrupted)" if report["interrupted"] else ""}: '
                   f'{c[NOT_RUN]} of {c["collected"]} collected case(s) did not run'
                   + (f': {_e(report["stopped"])}' if report.get("stopped") else "") + '. No conformance is stated.</div>')
    for e in g.get("expired") or []:
        out.append(f'<div class="banner bad">The acceptance of <code>{_e(e["id"])}</code> expired on '
                   f'{_e(e["expires"])}: its deviations count as new.</div>')
    stale = [s for s in g.get("stale") or [] if s.get("state") != Stale.REDUNDANT]
    if stale:
        items = "".join(f"<li><code>{_e(s['id'])}</code>: {_e(s['why'])}</li>" for s in stale)
        out.append(f'<div class="banner warn">Accepted deviations this run no longer shows<ul>{items}</ul></div>')
    redundant = len(g.get("stale") or []) - len(stale)
    if redundant:
        out.append(f'<div class="banner warn">{redundant} baseline entr{"y" if redundant == 1 else "ies"} accepted '
                   "nothing: an entry before each (a behaviour this run names) accepts its cases; "
                   "<code>qconform baseline refresh</code> removes them.</div>")
    return "".join(out)


def _readings(report: dict) -> str:
    if not report["readings_followed"]:
        return ""
    rows = "".join(f"<tr><td>{_e(r['op_version'])}</td><td>{r['cases']}</td><td>"
                   + ", ".join(f"<code>{_e(k)}</code> {n}" for k, n in r["matched"].items()) + "</td></tr>"
                   for r in report["readings_followed"])
    return ("<h2>Readings followed</h2><p class=meta>Where the spec permits several readings, which one the runner's "
            "passing results matched.</p><table class=cases><tr><th>op-version</th><th>cases</th>"
            f"<th>matched reading (cases)</th></tr>{rows}</table>")


def _rollup(report: dict) -> str:
    """What deviates, by behaviour: one row per behaviour, not per case or op version; a model's
    explanation is its name's tooltip on screen (one screen for a whole run) and printed in full."""
    from qconform.report.certificate import behaviours

    rows = behaviours(report)
    if not rows:
        return ""
    from qconform.isolation import reason_line

    # a model's explanation as the report's diagnosis carries it (the report alone is rendered)
    explained = {c["model"]: c.get("explanation") or "" for g in (report.get("diagnosis") or {}).get("groups") or ()
                 for c in g.get("candidates") or ()}
    out = []
    for r in rows:
        ex = r["example"]
        first = (ex.get("first_mismatches") or [None])[0]
        shown = (f"<code>{_e(first['output'])}[{','.join(map(str, first['index']))}]</code>: expected "
                 f"<code>{_e(first['expected_hex'])}</code>, got <code>{_e(first['actual_hex'])}</code>"
                 if first else _e(reason_line(ex.get("problem") or "")[:120]))
        what = _e(explained.get(r["behaviour"], "")) if r["model"] else ""
        by_op: dict[str, list[int]] = {}
        for ov in r["op_versions"]:
            op, _, v = ov.rpartition("-")
            by_op.setdefault(op, []).append(int(v) if v.isdigit() else 0)
        parts = [(f"{op} {', '.join(map(str, sorted(vs)))}", len(vs)) for op, vs in sorted(by_op.items())]
        shown_parts, more = [], 0
        for text, n in parts:  # a short line on screen; every op version in the tooltip and report.json
            if shown_parts and sum(len(t) + 2 for t in shown_parts) + len(text) > 60:
                more += n
            else:
                shown_parts.append(text)
        ovs = f'<span title="{_e("; ".join(t for t, _ in parts))}">{_e("; ".join(shown_parts))}</span>'
        out.append(f'<tr><td><b title="{what}">{_e(r["behaviour"])}</b>' + (f'<span class="expl"><br>{what}</span>' if what else "")
                   + f"</td><td>{r['cases']}" + (f" ({r['accepted']} accepted)" if r["accepted"] else "")
                   + f"</td><td>{ovs}" + (f"; +{more} more" if more > 0 else "")
                   + f'</td><td><a href="#{_e(ex["id"])}">{_e(ex["id"])}</a> · {shown}</td></tr>')
    return ('<h2 id="by-behaviour">What deviates, by behaviour</h2><table class="cases rollup"><tr><th>behaviour'
            "</th><th>cases</th><th>op versions</th><th>one example</th></tr>" + "".join(out) + "</table>")


def _diagnosis(report: dict) -> str:
    groups = (report.get("diagnosis") or {}).get("groups") or []
    if not groups:
        return ""
    rows = "".join(
        f"<tr><td>{_e(g['label'])}</td><td>{len(g.get('failing', []))}</td><td>"
        + ("<br>".join(f"<code>{_e(c['model'])}</code> ({len(c.get('explained', []))}): {_e(c.get('explanation', ''))}"
                       for c in g.get("candidates", []) if c.get("rank") == 1) or "no known deviation explains this")
        + f"</td><td>{len(g.get('unexplained', []))}</td></tr>" for g in groups)
    return ("<h2>Diagnosis</h2><p class=meta>Known deviations (qconform/docs/diagnosis.md) that reproduce the runner's "
            "failing outputs exactly, ranked per op version and type group.</p><table class='cases diag'><tr><th>group</th>"
            f"<th>failing</th><th>explained by (cases)</th><th>unexplained</th></tr>{rows}</table>")


def _characterisation(report: dict) -> str:
    """What the failures no model explains have in common, and where the runner raises: a lead where
    the diagnosis has no name (qconform/docs/diagnosis.md#characterisation)."""
    ch = report.get("characterisation") or {}
    groups, errors, ov = ch.get("groups") or [], ch.get("errors") or [], ch.get("overall")
    if not groups and not errors:
        return ""
    out = ['<h2 id="characterisation">What no known deviation explains, characterised</h2><p class=meta>For the '
           "failing cases no deviation model reproduces: the simplest description that separates their deviating "
           "elements from the conforming ones (those cases' other elements and the group's passing cases), with its "
           "precision and recall, and what the deviating elements hold instead. A lead for the vendor, never a "
           "verdict.</p>"]
    if ov and ov.get("descriptions"):
        out.append(f"<p><b>Across {ov['groups']} groups:</b> {_e(ov['descriptions'][0]['sentence'])}</p>")
    if groups:
        rows = []
        for g in groups:
            descs = g.get("descriptions") or []
            said = "<br>".join(_e(d["sentence"]) for d in descs[:2]) or _e(g.get("everything", ""))
            said += "".join(f"<br>{_e(str(s['cases']))} case(s): {_e(s['problem'])}" for s in g.get("structural") or ())
            rel = (g.get("relations") or [None])[0]
            what = _e(f"{rel['relation']} ({rel['elements']} of {g.get('related', g['deviating'])})") if rel else ""
            rows.append(f"<tr><td>{_e(g['label'])}</td><td>{len(g['unexplained'])}</td><td>{said}</td>"
                        f"<td>{what}</td></tr>")
        out.append("<table class='cases diag'><tr><th>group</th><th>unexplained</th><th>what they have in common"
                   f"</th><th>what the deviating elements hold</th></tr>{''.join(rows)}</table>")
    if errors:
        rows = "".join(
            f"<tr><td>{e['cases']} {_e(e['verdict'])}</td><td><code>{_e(e['cause'])}</code><br><span class=meta>e.g. "
            f"{_e(', '.join(e['examples'][:2]))}</span></td><td>"
            + ("<br>".join(_e(d["sentence"]) for d in (e.get("descriptions") or [])[:2]) or "-") + "</td></tr>"
            for e in errors)
        out.append("<h3>Errors on valid cases, by cause</h3><table class='cases diag'><tr><th>cases</th><th>cause</th>"
                   f"<th>which cases raise it</th></tr>{rows}</table>")
    return "".join(out)


def _reasons(report: dict) -> str:
    """Why the runner refused what it refused: each distinct reason once, with its case count
    (every case's verdict is in report.json)."""
    reasons = report.get("reasons") or []
    if not reasons:
        return ""
    rows = "".join(f"<tr><td>{r['cases']}</td><td>{_e(r['text'])}</td></tr>"
                   for r in sorted(reasons, key=lambda r: -r["cases"]))
    return (f'<details><summary><b>Not supported by the runner: {len(reasons)} reason(s)</b></summary>'
            f'<table class="cases"><tr><th>cases</th><th>reason</th></tr>{rows}</table></details>')


def render(report: dict) -> str:
    r, c = report["runner"], report["counts"]
    from qconform.report.certificate import certified

    runner = certified(r) + (f" {r['device']}" if r.get("device") and not r.get("execution_provider") else "")
    totals = "".join(f'<div class="total{" light" if v in LIGHT else ""}" style="background:{COLOURS[v]}">'
                     f"<b>{c[v]}</b>{v}</div>" for v in VERDICTS if c.get(v) or v in (PASS, FAIL))
    present = [v for v in VERDICTS if c.get(v)]
    boxes = "".join(f'<label><input type="checkbox" class="fv" value="{v}" checked onchange="qcFilter()">{v}</label>'
                    for v in present)
    ovs = "".join(f'<option value="{_e(o)}">{_e(o)}</option>'
                  for o in dict.fromkeys(m["op_version"] for m in report["matrix"]))
    tps = "".join(f'<option value="{_e(t)}">{_e(t)}</option>'
                  for t in sorted({m["type_pair"] for m in report["matrix"]}))
    failures = "\n".join(_failure(f) for f in report["failures"]) or "<p>No failures.</p>"
    from qconform.report.certificate import overall, scopes, tone

    scoped = scopes(report)
    statement = overall(report, scoped)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>qconform certificate — {_e(runner)}</title><style>{CSS}</style><script>{JS}</script></head><body>
<h1>ONNX quantization operators: bit-exact conformance of {_e(runner)}</h1>
<div class="overall {tone(report, scoped)}" id="overall">{_e(statement)}</div>
{_identity(report)}
{_fixed(report)}
<div class="totals">{totals}</div>
<div class="meta">collected {c['collected']} · reported {c['reported']} · ran {c['ran']} · verdicts and
clauses: <a href="semantics.html">the semantics</a> (every decision with the spec sentence it rests on)</div>
{_chips(scoped)}
<h2>Verdict per op version</h2>
{_scopes(scoped)}
{_rollup(report)}
{_characterisation(report)}
<p class="printonly meta">Every failing case, with every differing element, is in report.html (on screen) and
report.json beside this document; printed: the verdicts, and one example per behaviour above.</p>
<section class="caselist">
<div class="filters">{boxes}
<select id="fov" onchange="qcFilter()"><option value="">all op versions</option>{ovs}</select>
<select id="ftp" onchange="qcFilter()"><option value="">all type pairs</option>{tps}</select>
<input id="fq" type="search" placeholder="filter by case id" oninput="qcFilter()">
<button onclick="qcReset()">reset</button></div>
<h2 id="failures">Failures (<span id="nshown">{len(report['failures'])}</span> shown of {len(report['failures'])})</h2>
{failures}
{_diagnosis(report)}
</section>
{_readings(report)}
<h2>Cases</h2>
{_reasons(report)}
</body></html>
"""
