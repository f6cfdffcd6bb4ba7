"""``qconform scoreboard``: the bundled third-party runtimes side by side on the golden corpus.

One ``pytest --runner=NAME --report=DIR/NAME`` run per installed runtime (exactly the command a user
types, in a subprocess each, so runtimes never share a process and can run in parallel), then a
comparison built only from the report.json files: ``scoreboard.md``, ``scoreboard.html`` and
``scoreboard.json`` (the same tables as data, and what ``--check`` reads). ``--from-reports DIR``
re-renders from kept report directories without running anything: the output depends on the
reports alone (no clock, no absolute path), so the same reports give the same bytes.

The default output folder is ``qconform/docs/scoreboard/`` of a source checkout, beside the other
documents (which can link to it). It is not package data (the wheel ships ``docs/*.md`` only): a
scoreboard is a measurement of some runtime versions on one machine, not part of the suite. Outside
a checkout (an installed wheel) the default is ``./qconform-scoreboard``, never site-packages.

``stale(dir)`` says why a committed scoreboard no longer describes this checkout: the corpus changed,
or an installed runtime is another version than the one measured (a runtime not installed here is
not a reason: nobody can re-measure it here).
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from html import escape
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import qconform
from qconform.report import certificate
from qconform.report.model import ReportError, load
from qconform.runner import BUNDLED, ENTRY_POINT_GROUP, RunnerError, describe, resolve
from qconform.runtimes import RUNTIMES
from qconform.verdicts import CRASHED, DEVIATING, FAIL, HEADLINE, INFO, NOT_RUN, PASS, TIMEOUT, UNSUPPORTED, Status

FORMAT = 1
FILES = ("scoreboard.md", "scoreboard.html", "scoreboard.json")
DATA = "scoreboard.json"
#: qconform's own kernels: bundled runners, but no runtime anyone ships; left out by default.
OWN = tuple(name for name, rt in RUNTIMES.items() if rt.own)
#: Top deviation models listed per runtime.
TOP = 10
REPORT_FILES = ("report.html", "summary.md", "report.json")

PKG = Path(qconform.__file__).resolve().parent
CHECKOUT = PKG.parent if (PKG.parent / "pyproject.toml").is_file() else None


def default_out() -> Path:
    """``qconform/docs/scoreboard`` of a source checkout; ``./qconform-scoreboard`` elsewhere."""
    return PKG / "docs" / "scoreboard" if CHECKOUT else Path("qconform-scoreboard")


def runtimes() -> list[str]:
    """The bundled third-party runtimes, in ``BUNDLED`` order (installed or not)."""
    return [n for n in BUNDLED if n not in OWN]


def _order(name: str) -> tuple:
    """Bundled names first in ``BUNDLED`` order, then others by name: the order of every table,
    whatever order ``--runners`` gave (a re-render must not depend on it)."""
    names = list(BUNDLED)
    return (names.index(name), "") if name in names else (len(names), name)


# ----------------------------------------------------------------------------------------------
# running the runtimes
# ----------------------------------------------------------------------------------------------
def pytest_command(name: str, report_dir: Path, marker: str | None = None) -> list[str]:
    """The certification command users run (tests/conftest.py ``run_pytest``, ``qconform certify``)."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", f"--runner={name}",
            f"--report={report_dir}", "-q", "--tb=no", *(["-m", marker] if marker else [])]


def installed(name: str) -> tuple[dict | None, str]:
    """(describe(), "") of a runner that starts here, else (None, the one-line reason)."""
    try:
        return describe(resolve(name)), ""
    except RunnerError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a runtime broken here is skipped like a missing one
        return None, f"runner {name!r} cannot start: {type(exc).__name__}: {exc}".splitlines()[0]


def _summary(report: Mapping[str, Any]) -> str:
    c = report["counts"]
    parts = [f"{c.get(v, 0)} {v}" for v in HEADLINE] + [f"{c.get(CRASHED, 0) + c.get(TIMEOUT, 0)} crashed/timeout"]
    return f"{c.get('collected', 0)} cases: " + ", ".join(parts)


def _say(line: str) -> None:
    print(line, flush=True)  # progress shows at once, also through a pipe or a CI log


def certify_command(name: str, report_dir: Path, scheduler: str) -> list[str]:
    """The run of one runtime on a Dask cluster: ``qconform certify`` (the engine's own front-end,
    the same report.json as the pytest command) against the cluster's scheduler."""
    return [sys.executable, "-m", "qconform.cli", "certify", "--runner", name, "--report", str(report_dir),
            "--scheduler", scheduler]


def run_one(name: str, reports: Path, marker: str | None = None, say: Callable[[str], None] = _say,
            scheduler: str | None = None) -> bool:
    """Run one runtime over the corpus into ``reports/name``; True when a fresh report.json came out.
    pytest's own output goes to ``reports/name/pytest.log`` (its tail is shown when no report came)."""
    out = (reports / name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").unlink(missing_ok=True)  # an old report must never pass for this run's
    log = out / "pytest.log"
    say(f"{name}: started")
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        command = certify_command(name, out, scheduler) if scheduler else pytest_command(name, out, marker)
        rc = subprocess.run(command, cwd=CHECKOUT or Path.cwd(),
                            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False).returncode
    seconds = time.monotonic() - t0
    try:
        report = load(out / "report.json")
    except ReportError:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        say(f"{name}: no report after {seconds:.0f} s (exit status {rc}); end of {log}:")
        for line in tail:
            say(f"    {line}")
        return False
    say(f"{name}: finished in {seconds:.0f} s: {_summary(report)}"
        + ("" if report.get("complete") else f" (INCOMPLETE: {report['counts'].get(NOT_RUN, 0)} not run)"))
    return True


def run_all(names: Sequence[str], reports: Path, jobs: int = 1, marker: str | None = None,
            say: Callable[[str], None] = _say, scheduler: str | None = None) -> list[str]:
    """Run the runtimes, ``jobs`` at a time (a thread each waits on its pytest process); the names
    that produced a report."""
    lock = threading.Lock()

    def one_line(line: str) -> None:  # whole lines, never two runners' halves
        with lock:
            say(line)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = list(pool.map(lambda n: run_one(n, reports, marker, one_line, scheduler), names))
    return [n for n, ok in zip(names, done) if ok]


# ----------------------------------------------------------------------------------------------
# the comparison, as data
# ----------------------------------------------------------------------------------------------
def found_reports(root: Path) -> list[str]:
    """Runner names with a ``root/NAME/report.json``."""
    return sorted((p.parent.name for p in root.glob("*/report.json")), key=_order)


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _links(report_dir: Path, out: Path) -> dict[str, str]:
    """Relative links from the scoreboard to a runtime's report files (only when they sit inside
    the output folder: a link out of it would break once the folder is committed or moved)."""
    if not _inside(report_dir, out):
        return {}
    rel = Path(os.path.relpath(report_dir.resolve(), out.resolve())).as_posix()
    return {f: f"{rel}/{f}" for f in REPORT_FILES if (report_dir / f).is_file()}


def _diagnosis(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the diagnosis said about the run's deviations (report.json ``failures`` and ``diagnosis``)."""
    failures = report.get("failures") or []
    names: Counter = Counter()
    steps: Counter = Counter()
    named = unnamed = undiagnosed = failing = failing_named = 0
    for f in failures:
        if f.get("verdict") == FAIL:  # outputs to explain (an error or a crash has none)
            failing += 1
            failing_named += bool(f.get("diagnosis"))
        diag = f.get("diagnosis")
        if diag is None:  # absent: not diagnosed (an error, a crash, --diagnose=off, the budget)
            undiagnosed += 1
        elif diag:
            named += 1
            names.update(dict.fromkeys(diag, 1))
        else:
            unnamed += 1
            steps[f.get("diagnosis_step") or "?"] += 1
    summary = report.get("diagnosis") or {}
    adds = {o["model"]: o.get("adds", 0) for o in summary.get("overall") or [] if "model" in o}
    models = [{"model": m, "cases": n, "adds": adds.get(m, 0)}
              for m, n in sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))]
    return {"deviations": len(failures), "named": named, "unnamed": unnamed, "undiagnosed": undiagnosed,
            "failing": failing, "failing_named": failing_named,
            "models": models, "steps": dict(sorted(steps.items())),
            "errors": sum(e.get("cases", 0) for e in summary.get("errors") or [])}


def page_path(name: str) -> str:
    """Where a runtime's page goes, relative to the scoreboard folder."""
    return f"runtimes/{name}.md"


def certificate_path(name: str) -> str:
    """Where a runtime's machine-readable certificate goes, relative to the scoreboard folder."""
    return f"runtimes/{name}.certificate.json"


#: The certificate file's format tag (bump on an incompatible change).
CERTIFICATE_FORMAT = "qconform-certificate/1"


def _scopes(report: Mapping[str, Any], scoped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per op version (``scoped``: ``certificate.scopes(report)``): its verdict word, its counts, and
    each deviating type combination with the deviation models that reproduce it (what a runtime's
    page shows: the certification report in the few KB a repository can keep; the full one is
    report.html)."""
    failures = {f["id"]: f for f in report.get("failures") or []}
    grouped: dict[str, dict[str, list[dict]]] = {}
    for c in report["cases"]:
        ov, types = c["id"].split("/")[:2]
        grouped.setdefault(ov, {}).setdefault(types, []).append(c)
    out = []
    for scope in scoped:
        ov = scope["op_version"]
        counts: Counter = Counter()
        bad = []
        for types, rows in sorted(grouped[ov].items()):
            counts.update(Status.DEVIATES if c["verdict"] in DEVIATING else c["verdict"] for c in rows)
            dev = [failures.get(c["id"], {"id": c["id"], "verdict": c["verdict"]}) for c in rows if c["verdict"] in DEVIATING]
            if not dev:
                continue
            models: Counter = Counter()
            for f in dev:
                diag = f.get("diagnosis")
                models.update(diag if diag else ["(unexplained)" if diag == [] else f"({f['verdict']}, not diagnosed)"])
            example = min(dev, key=lambda f: f["id"])
            bad.append({"types": types, Status.DEVIATES: len(dev), "ran": sum(c["verdict"] != UNSUPPORTED for c in rows),
                        "models": dict(sorted(models.items(), key=lambda kv: (-kv[1], kv[0]))),
                        "example": example["id"], "problem": _first_line(example.get("problem") or "")})
        out.append({"op_version": ov, "verdict": scope["verdict"],
                    "counts": {k: counts.get(k, 0) for k in (PASS, Status.DEVIATES, UNSUPPORTED, INFO)},
                    "deviating_types": bad})
    return out


#: The machine-readable certificate's row: one per op version (types "*") and per type combination.
CERTIFICATE_COLUMNS = ("op_version", "types", "verdict", "cases", PASS, Status.DEVIATES, "accepted", UNSUPPORTED, INFO)


def _verdicts(scope: Mapping[str, Any]) -> list[list[Any]]:
    """One op version's certificate rows: the op version as a whole ("*"), then each type
    combination (``certificate.verdict_of`` says what each verdict word means)."""
    def row(types: str, v: Mapping[str, Any]) -> list[Any]:
        return [scope["op_version"], types, v["verdict"], v["cases"], v[PASS], v["new"] + v["accepted"],
                v["accepted"], v[UNSUPPORTED], v[INFO]]

    return [row("*", scope), *(row(t["types"], t) for t in scope["types"])]


def _first_line(text: str, width: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _op_versions(report: Mapping[str, Any]) -> dict[tuple, dict[str, int]]:
    """(domain, op, opset, label) -> pass / deviate / unsupported, summed over the matrix cells."""
    rows: dict[tuple, Counter] = {}
    for cell in report.get("matrix") or []:
        key = (cell.get("domain") or "", cell.get("op") or "?", int(cell.get("opset") or 0), cell["op_version"])
        cnt = rows.setdefault(key, Counter())
        for verdict, n in (cell.get("counts") or {}).items():
            cnt[Status.DEVIATES if verdict in DEVIATING else verdict] += n
    return {k: {v: c[v] for v in (PASS, Status.DEVIATES, UNSUPPORTED)} for k, c in rows.items()}


def build(reports: Mapping[str, Mapping[str, Any]], links: Mapping[str, Mapping[str, str]] | None = None) -> dict:
    """The scoreboard as one JSON-able dict, from report dicts keyed by runner name."""
    links = links or {}
    names = sorted(reports, key=_order)
    rts, digests, per_ov = [], {}, {}
    for name in names:
        r = reports[name]
        who, plat, c = r.get("runner") or {}, r.get("platform") or {}, r["counts"]
        if who.get("remote") and isinstance(who.get("platform"), dict):  # a device worker: its platform
            plat = who["platform"]
        digest = (r.get("corpus") or {}).get("digest") or ""
        digests.setdefault(digest, []).append(name)
        scoped = certificate.scopes(dict(r))
        rts.append({
            "name": name,
            "runner": {k: who.get(k) for k in ("name", "version", "device", "options")},
            "platform": " ".join(str(x) for x in (plat.get("label") or plat.get("machine"), plat.get("system"),
                                                  plat.get("implementation"), plat.get("python")) if x),
            "qconform_version": r.get("qconform_version", ""),
            "corpus_digest": digest,
            "corpus_cases": (r.get("corpus") or {}).get("cases"),
            "selection": list((r.get("invocation") or {}).get("filters") or []),
            "complete": bool(r.get("complete")),
            "counts": {k: int(v) for k, v in sorted(c.items())},
            "diagnosis": _diagnosis(r),
            **({} if name in BUNDLED else {"command": _command(r)}),
            "links": {"certificate": page_path(name), "certificate.json": certificate_path(name),
                      **dict(links.get(name) or {})},
            "overall": certificate.overall(r, scoped),
            "scopes": _scopes(r, scoped),
            "verdicts": [_verdicts(sc) for sc in scoped],
        })
        for key, cell in _op_versions(r).items():
            per_ov.setdefault(key, {})[name] = cell
    return {
        "format": FORMAT,
        "corpus": {"digests": {d: n for d, n in sorted(digests.items())}},
        "runtimes": rts,
        "op_versions": [{"op_version": key[3], "cells": cells} for key, cells in sorted(per_ov.items())],
    }


def _command(report: Mapping[str, Any]) -> str:
    """How a row that is not a bundled runner's name was certified (an execution provider through
    the onnxruntime runner, a vendor's runner): the report's command as typed, its folder as DIR."""
    import re

    line = (report.get("invocation") or {}).get("command_line") or ""
    return re.sub(r"(--report[= ])\S+", r"\1DIR", line)


def merge(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict:
    """``old`` (a scoreboard.json) with the rows of ``new`` added or replacing its rows of the same
    name: a runtime measured elsewhere (another environment, a variant that cannot share this one's
    onnxruntime) joins the committed comparison without re-running the others."""
    names = {rt["name"] for rt in new["runtimes"]}
    rts = sorted([rt for rt in old["runtimes"] if rt["name"] not in names] + list(new["runtimes"]),
                 key=lambda rt: _order(rt["name"]))
    cells: dict[str, dict] = {}
    for ov in old["op_versions"]:
        cells[ov["op_version"]] = {k: v for k, v in ov["cells"].items() if k not in names}
    for ov in new["op_versions"]:
        cells.setdefault(ov["op_version"], {}).update(ov["cells"])
    digests: dict[str, list[str]] = {}
    for rt in rts:
        digests.setdefault(rt["corpus_digest"], []).append(rt["name"])
    order = [ov["op_version"] for ov in old["op_versions"]] + [ov["op_version"] for ov in new["op_versions"]]
    return {**old, "corpus": {"digests": dict(sorted(digests.items()))}, "runtimes": rts,
            "op_versions": [{"op_version": k, "cells": cells[k]} for k in dict.fromkeys(order)]}


def collect(root: Path, names: Iterable[str], out: Path) -> dict:
    """``build`` over the report directories ``root/NAME`` (read by ``qconform.report.model.load``)."""
    reports, links = {}, {}
    for name in names:
        reports[name] = load(root / name / "report.json")
        links[name] = _links(root / name, out)
    return build(reports, links)


# ----------------------------------------------------------------------------------------------
# rendering
# ----------------------------------------------------------------------------------------------
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
    lines.append(("selection", "", " | ".join(sel) + " (a partial scoreboard)" if sel else "the whole corpus"))
    incomplete = [rt["name"] for rt in data["runtimes"] if not rt["complete"]]
    if incomplete:
        lines.append(("INCOMPLETE runs", "", ", ".join(incomplete) + " (cases that did not run count as not-run)"))
    return lines


ABOUT = ("Bit-exact conformance of ONNX runtimes to qconform's golden corpus: one "
         "`pytest --runner=NAME --report=DIR/NAME` run per runtime, compared by `qconform scoreboard`. "
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
           f"- measured by: `pytest --runner={name} --report=DIR` (DIR/report.html lists every case, with "
           "each deviating element's inputs, expected and actual bits); back to the [scoreboard](../scoreboard.md)",
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


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:20px;color:#212121;max-width:1240px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:24px 0 8px} h3{font-size:15px;margin:14px 0 6px}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:13px}
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
            "full_report": (rt.get("command") or f"pytest --runner={rt['name']} --report=DIR")
                           + " (DIR/report.json, report.html)",
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


# ----------------------------------------------------------------------------------------------
# staleness
# ----------------------------------------------------------------------------------------------
def current_digest() -> str:
    """The shipped corpus's digest, checked against its MANIFEST (``qconform.corpus.verify``)."""
    from qconform import corpus
    from qconform.plugin import default_golden

    return corpus.verify(default_golden())


def installed_version(name: str) -> str | None:
    """The version a runner's describe() gives here (the call that recorded it), None where it cannot start."""
    info = installed(name)[0]
    return None if info is None or info.get("version") is None else str(info["version"])


def stale(scoreboard_dir: Path) -> list[str]:
    """Why the scoreboard in ``scoreboard_dir`` no longer matches this checkout (empty: current): its
    corpus digest is not the shipped corpus's, or an installed runtime's version is not the one
    measured. A runtime that cannot start here is no reason: nobody could re-measure it here."""
    from qconform.corpus import CorpusError

    path = Path(scoreboard_dir) / DATA
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded = list(data["runtimes"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{path}: no readable scoreboard ({type(exc).__name__}): run qconform scoreboard"]
    try:
        digest = current_digest()
    except CorpusError as exc:
        return [f"the corpus does not verify, so nothing can be compared with it: {exc}"]
    reasons = []
    old = {}
    for rt in recorded:
        if rt.get("corpus_digest") != digest:
            old.setdefault(rt.get("corpus_digest"), []).append(rt.get("name"))
    for d, names in sorted(old.items(), key=lambda kv: str(kv[0])):
        reasons.append(f"corpus: measured on digest {d} ({', '.join(map(str, names))}), the corpus is now {digest}")
    for rt in recorded:
        name, was = rt.get("name"), (rt.get("runner") or {}).get("version")
        now = installed_version(str(name))
        if now is not None and now != str(was):
            reasons.append(f"{name}: measured version {was}, installed {now}")
    return reasons


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------
def _known(name: str) -> bool:
    return name in BUNDLED or any(ep.name == name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _rel(p: Path) -> str:
    """A path as the user would type it: relative to the current directory where it is below it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def main(args) -> int:
    out = Path(args.out) if args.out else default_out()
    if args.check:
        reasons = stale(out)
        for r in reasons:
            print(f"qconform: stale scoreboard {_rel(out)}: {r}", file=sys.stderr)
        if not reasons:
            print(f"{_rel(out)}: current (corpus digest and installed runtime versions match)")
        return 1 if reasons else 0
    asked = [n.strip() for n in (args.runners or "").split(",") if n.strip()]
    bad = [n for n in asked if not _known(n)]
    if bad:
        print(f"qconform: unknown runner(s) {', '.join(bad)}; bundled: {', '.join(BUNDLED)}", file=sys.stderr)
        return 2
    if args.from_reports:
        root = Path(args.from_reports)
        names = [n for n in found_reports(root) if not asked or n in asked]
        missing = [n for n in asked if n not in names]
        if missing:
            print(f"qconform: no report.json for {', '.join(missing)} under {root}", file=sys.stderr)
            return 2
        if not names:
            print(f"qconform: no NAME/report.json under {root}", file=sys.stderr)
            return 2
        return _render(root, names, out, add=args.add)
    if args.add:
        print("qconform: --add goes with --from-reports DIR (the rows to add come from reports)", file=sys.stderr)
        return 2
    names = []
    for name in sorted(dict.fromkeys(asked or runtimes()), key=_order):
        info, why = installed(name)
        if info is None:
            _say(f"{name}: skipped: {why}")
        else:
            names.append(name)
    if not names:
        print("qconform: no runtime to run", file=sys.stderr)
        return 2
    if (args.cluster or args.scheduler) and args.marker:
        print("qconform: -m selects pytest items; on a cluster the runtimes run through qconform certify, "
              "which takes the whole corpus", file=sys.stderr)
        return 2
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // 2)
    with contextlib.ExitStack() as stack:
        scheduler = args.scheduler or (_start_cluster(stack, args.cluster) if args.cluster else None)
        if scheduler and not args.jobs:
            jobs = len(names)  # the cluster spreads their cases: every runtime at once
        _say(f"running {', '.join(names)} over the corpus, {jobs} at a time"
             + (f" (cases: -m {args.marker!r})" if args.marker else "")
             + (f" on the Dask cluster at {scheduler}" if scheduler else ""))
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="qconform-scoreboard-"))
        root = Path(args.reports) if args.reports else Path(tmp)
        done = run_all(names, root, jobs, args.marker, scheduler=scheduler)
        if not done:
            print("qconform: no runtime produced a report", file=sys.stderr)
            return 2
        code = _render(root, done, out)
    return code or (1 if len(done) < len(names) else 0)


def _start_cluster(stack: contextlib.ExitStack, spec: str) -> str:
    """A LocalCluster for the whole scoreboard (``--cluster local:N``); its scheduler's address."""
    import dask

    from qconform import cluster

    stack.enter_context(dask.config.set(cluster.local_config()))
    local = cluster.local_cluster(cluster.parse_cluster(spec))
    stack.callback(cluster.quietly_close, None, local)
    return local.scheduler_address


def _render(root: Path, names: Sequence[str], out: Path, add: bool = False) -> int:
    try:
        data = collect(root, names, out)
        if add:
            data = merge(json.loads((out / DATA).read_text(encoding="utf-8")), data)
    except (ReportError, OSError, ValueError, KeyError) as exc:
        print(f"qconform: {exc}", file=sys.stderr)
        return 2
    for p in write(data, out):
        print(f"wrote {_rel(p)}")
    return 0


def add_arguments(p) -> None:
    p.add_argument("--runners", metavar="A,B,C", default=None,
                   help=f"runners to compare (default: every installed one of {', '.join(runtimes())})")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="runners run in parallel (default: one per 2 cores; each run uses 2 worker processes)")
    p.add_argument("--reports", metavar="DIR", default=None,
                   help="keep each runner's report directory as DIR/NAME (default: a temporary directory); "
                        "inside --out, the scoreboard links to them")
    p.add_argument("--from-reports", metavar="DIR", default=None,
                   help="run nothing: render from the report directories DIR/NAME/report.json")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="local:N", default=None,
                       help="run every runtime at once on a Dask LocalCluster of N workers started here (each "
                            "runtime through qconform certify --scheduler); needs qconform[dask]")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run the runtimes on an existing Dask cluster (its workers need every runtime installed)")
    p.add_argument("--add", action="store_true",
                   help="with --from-reports: add (or replace) the rows of the runtimes under DIR and keep the "
                        "other rows of the scoreboard in --out as they are (a runtime measured in another "
                        "environment, e.g. an onnxruntime variant with its execution provider)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where scoreboard.md, scoreboard.html and scoreboard.json go (default: "
                        "qconform/docs/scoreboard in a source checkout, else ./qconform-scoreboard)")
    p.add_argument("-m", dest="marker", metavar="EXPR", default=None,
                   help="only the cases matching this pytest marker expression (a partial scoreboard, "
                        "marked as such), e.g. \"op_QuantizeLinear and opset_21\"")
    p.add_argument("--check", action="store_true",
                   help="run nothing: exit 1 with the reasons when the scoreboard in --out no longer matches "
                        "the corpus digest or an installed runtime's version")


__all__ = ["add_arguments", "build", "collect", "default_out", "installed", "installed_version", "main", "merge",
           "render_html", "render_markdown", "run_all", "run_one", "runtimes", "stale", "write"]
