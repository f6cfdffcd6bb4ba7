"""Writing one finding's directory: model, arrays, script, README and finding.json."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import qconform
from qconform.apps.findings._common import CHECKOUT, FORMAT, META, SEMANTICS, VERIFY_RUNS
from qconform.apps.findings.groups import Group
from qconform.apps.findings.observe import Observation, closest_reading, skip_mask, storable, write_npz
from qconform.apps.findings.script import mark_line, normalise, render_script, run_script, shows, signature
from qconform.apps.findings.spec import spec_quotes
from qconform.declarations.runtimes import Template
from qconform.verdicts import FAIL


def _semantics_link(directory: Path) -> str:
    if CHECKOUT and directory.resolve().is_relative_to(CHECKOUT):
        return Path(os.path.relpath(SEMANTICS, directory.resolve())).as_posix()
    return "qconform/docs/semantics.md"


def _docs_links(text: str, docs: str) -> str:
    """Links relative to qconform/docs (``](#anchor)`` into semantics.md, ``](diagnosis.md#x)``),
    made relative to a document at ``docs`` (the path from it to qconform/docs, '' for docs itself)."""
    text = re.sub(r"\]\(#([\w-]+)\)", lambda m: f"]({docs}semantics.md#{m[1]})", text)
    return re.sub(r"\]\(([\w-]+\.md)(#[\w-]+)?\)",
                  lambda m: f"]({docs}{m[1]}{m[2] or ''})" if (SEMANTICS.parent / m[1]).is_file() else m[0], text)


def _md(text: str, link: str) -> str:
    """One paragraph of a README, its docs links relative to the README (``link``: its semantics.md)."""
    return _docs_links(" ".join(text.split()), link[: -len("semantics.md")])


def _evidence_table(case, outputs, reading: str, limit: int = 8) -> list[str]:
    from qconform.compare import compare, evidence

    if outputs is None:
        return []
    try:
        rows = evidence(case, outputs, compare(case, outputs, against=reading))
    except Exception:  # noqa: BLE001 - a structural mismatch has no element rows
        return []
    if not rows:
        return []
    out = ["| output | index | inputs | expected | actual |", "|---|---|---|---|---|"]
    for r in rows[:limit]:
        out.append(f"| {r[0]} | [{r[1]}] | {r[2].replace('|', '/')} | {r[3]} ({r[4]}) | {r[5]} ({r[6]}) |")
    if len(rows) > limit:
        out.append(f"| … | | {len(rows) - limit} more | | |")
    return out


def _pip_line(tpl: Template, version: str) -> str:
    return tpl.install.format(version=version) if tpl.install else f"pip install {tpl.package}=={version} numpy"


def render_readme(g: Group, tpl: Template, case, version: str, platform_label: str, obs: Observation,
                  script_output: str, coded: Mapping[str, Any], link: str, seen_on: Sequence[str], reading) -> str:
    out = [f"# {_title(g, tpl)}", ""]
    does = _md(g.does, link)
    out += [f"**What {tpl.runtime} does.** {does[:1].upper() + does[1:]}", ""]
    if g.kind == "must-reject":
        out += ["**Expected.** The model is invalid (the spec below), so the runtime must refuse it.", ""]
    if g.spec:
        out += [f"**What the spec says.** {_md(g.spec, link)}", ""]
    quotes = spec_quotes(g.spec, case.clause)
    if quotes:
        out += ["The spec's words (as quoted in qconform's semantics document):" if g.spec else
                f"**What the spec says** ([{case.clause}]({link}#{case.clause})):", ""]
    for a, q in quotes:
        out += [q, f"> — [{a}]({link}#{a})", ""]
    if g.characterised:
        out += ["**What the failing cases have in common** (qconform's characterisation of what no deviation model "
                "explains):", ""] + [f"- {line}" for line in g.characterised] + [""]
    if g.mechanism == "unexplained" and obs.outputs is not None:
        from qconform.compare import compare
        from qconform.diagnosis.diagnose import localise

        step = localise(case, obs.outputs, compare(case, obs.outputs, against=reading.name))
        if step:
            out += [f"**Where it differs.** {step[:1].upper() + step[1:]}.", ""]
    if len(case.readings) > 1 and g.kind != "must-reject":
        names = ", ".join(f"`{r.name}`" for r in case.readings)
        out += [(f"**Readings.** The text permits several results here ({names}); `expected.npz` holds "
                 f"`{reading.name}`, the one nearest to what {tpl.runtime} returned, and {tpl.runtime} matches none "
                 f"([readings]({link}#readings-index))."), ""]
    if not g.fact:
        out += [f"**qconform's diagnosis.** `{g.mechanism}`" + (
            " (a deviation model of qconform/docs/diagnosis.md that reproduces these outputs bit for bit)"
            if g.kind == FAIL and g.mechanism != "unexplained" else ""), ""]
    if g.evidence:
        out += [f"**Seen elsewhere.** {_md(g.evidence, link)}", ""]
    out += ["**Case.** `" + case.id + "` of the qconform corpus"
            + (f" (fact {g.fact}, versions `{g.versions or 'all'}`"
               + (f", platform `{g.platform}`" if g.platform else "") + ")" if g.fact else
               f"; {g.cases} failing case(s) in this group, e.g. " + ", ".join(f"`{c}`" for c in g.case_ids[:3])), ""]
    out += [f"**Seen on.** {tpl.package} " + ", ".join(seen_on) + f", {platform_label} "
            f"({sys.platform}); qconform {qconform.__version__}.", ""]
    out += ["**Run it.**", "", "```sh", f"python -m venv venv && venv/bin/{_pip_line(tpl, version)}",
            "venv/bin/python repro.py   # exit 1 and a MISMATCH line while the runtime deviates", "```", ""]
    if tpl.note:
        out += [tpl.note, ""]
    out += [f"Output with {tpl.runtime} {version}:", "", "```", script_output.rstrip("\n"), "```", ""]
    rows = _evidence_table(case, obs.outputs, reading.name) if g.kind != "must-reject" else []
    if rows:
        out += ["Elements that differ (values, then bits):", ""] + rows + [""]
    files = ["`model.onnx`: the single-node model", "`inputs.npz`: the graph inputs",
             "`expected.npz`: the outputs the spec gives"
             + (" (none: the model must be rejected)" if g.kind == "must-reject" else "")
             + ("; `readings.npz`: the outputs of every other reading the text permits (the script accepts "
                "each)" if len(case.readings) > 1 and g.kind != "must-reject" else ""),
             "`actual.npz`: the outputs " + tpl.runtime + " returned" if obs.outputs is not None else
             "no `actual.npz`: the run raised (the output above)"]
    if coded:
        files.append("arrays of types numpy lacks hold one element code each (uint8, uint16 for bfloat16): "
                     + ", ".join(f"`{n}` is {t.name}" for n, t in coded.items()))
    out += ["**Files.** " + "; ".join(files) + ".", ""]
    return "\n".join(out).rstrip("\n") + "\n"


_DRIFT_DOES = re.compile(r"what qconform's deviation model `[^`]+` computes on every case of the group "
                         r"\(\[diagnosis\]\([^)]*\)\): (?:Your )?")


def _title(g: Group, tpl: Template) -> str:
    does = _DRIFT_DOES.sub("", " ".join(g.does.split()))  # a drift-written row: the model's own words
    first = re.split(r"(?<=[.;:])\s", does, maxsplit=1)[0].rstrip(".;:, ")
    first = re.sub(r"\]\(#[\w-]+\)", "]", first)
    if len(first) > 160:
        first = first[:160].rsplit(" ", 1)[0] + " …"
    return f"{tpl.runtime} {g.op_versions}: {first}".replace('"""', "'''").replace("\\", "/")


def _files_digest(directory: Path, names: Iterable[str]) -> str:
    h = hashlib.sha256()
    for n in names:
        p = directory / n
        h.update(n.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"-") + b"\0")
    return h.hexdigest()


def write_finding(out: Path, g: Group, tpl: Template, case, obs: Observation, version: str,
                  must_reject: bool = False) -> tuple[Path | None, str, str]:
    """Write one finding directory (into ``out/<runtime>/<key>``) and run its script: (the directory,
    or None when the script did not show the runtime's deviation, the verdict line it printed or '',
    its whole output)."""
    from qconform import platform as plat
    from qconform.model import build_model

    final = out / g.runtime / g.key
    tmp = out / g.runtime / f".{g.key}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model = build_model(case, check=False)
    (tmp / "model.onnx").write_bytes(model.SerializeToString())
    coded: dict[str, Any] = {}
    feeds = {}
    for name, arr in case.feeds.items():
        feeds[name], t = storable(arr)
        if t is not None:
            coded[name] = t
    write_npz(tmp / "inputs.npz", feeds)
    expected = {}
    reading = closest_reading(case, obs.outputs)
    for name, arr in zip(case.output_names, reading.outputs):
        expected[name], t = storable(arr)
        if t is not None:
            coded[name] = t
    if not must_reject:
        write_npz(tmp / "expected.npz", expected)
    else:
        write_npz(tmp / "expected.npz", {})
    if obs.outputs is not None:
        write_npz(tmp / "actual.npz", {n: storable(a)[0] for n, a in zip(case.output_names, obs.outputs)})
    skips = {} if must_reject else skip_mask(case, obs.outputs, reading)
    others = [] if must_reject else [r for r in case.readings if r is not reading]
    if others:  # every other reading the text permits: the script says OK for any of them
        write_npz(tmp / "readings.npz", {f"{r.name}/{n}": storable(a)[0]
                                         for r in others for n, a in zip(case.output_names, r.outputs)})
        skips.update({f"{r.name}/{n}": m for r in others for n, m in skip_mask(case, obs.outputs, r).items()})
    if skips:
        write_npz(tmp / "skip.npz", skips)
    reason = re.sub(r"\s*\(\[[\w-]+\]\(#[\w-]+\)\)", "", " ".join(g.spec.split())) or "see README.md"
    (tmp / "repro.py").write_text(render_script(tpl, _title(g, tpl), coded, bool(skips),
                                                reason if must_reject else "", [r.name for r in others]),
                                  encoding="utf-8")
    outputs = set()  # each run's output, normalised
    for k in range(VERIFY_RUNS):
        rc, output = run_script(tmp, tpl)
        line = mark_line(output) if rc == 1 else ""
        if not shows(line, obs):  # the script does not show what the runner saw: the old directory stays
            shutil.rmtree(tmp)
            if k:
                output += f"\n(run {k + 1} of {VERIFY_RUNS}: the runtime's outputs differ from run to run)"
            return None, line, output
        outputs.add(normalise(output))
    if len(outputs) > 1:  # the same mismatch line, other values: not a reproducer either
        shutil.rmtree(tmp)
        return None, "", f"{VERIFY_RUNS} runs printed different outputs: the runtime's outputs differ from run to run"
    data_files = ["model.onnx", "inputs.npz", "expected.npz", "actual.npz", "skip.npz", "repro.py"]
    data_files += ["readings.npz"] if (tmp / "readings.npz").is_file() else []
    seen_on, shown = [version], (version, normalise(output))
    old_meta = final / META
    if old_meta.is_file():
        try:
            old = json.loads(old_meta.read_text(encoding="utf-8"))
            if old.get("case") == case.id and old.get("data_sha256") == _files_digest(tmp, data_files) \
                    and signature(old.get("shows", "")) == signature(line):
                seen_on = sorted(set(old.get("seen_on", [])) | {version}, key=_version_key)
                if _version_key(old["output_version"]) > _version_key(version):  # the newest run's output stays
                    shown = (old["output_version"], old["output"])
                    line = old["shows"]
        except (ValueError, OSError, KeyError):
            pass
    label = plat.label()
    link = _semantics_link(final)
    (tmp / "README.md").write_text(render_readme(g, tpl, case, shown[0], label, obs, shown[1], coded, link,
                                                 seen_on, reading), encoding="utf-8")
    meta = {
        "format": FORMAT, "runtime": g.runtime, "key": g.key, "op_versions": g.op_versions,
        "mechanism": g.mechanism, "kind": g.kind, "fact": g.fact, "versions": g.versions, "platform": g.platform,
        "case": case.id, "clause": case.clause, "reading": reading.name,
        "readings": [r.name for r in case.readings], "does": " ".join(g.does.split()), "cases": g.cases,
        **({"characterised": list(g.characterised)} if g.characterised else {}),
        "package": tpl.package, "seen_on": seen_on, "platform_label": label,
        "verdict": obs.verdict,
        "shows": line, "data_sha256": _files_digest(tmp, data_files),
        "output_version": shown[0], "output": shown[1],
    }
    (tmp / META).write_text(json.dumps(meta, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final, line, output


def _version_key(v: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(v), v)
    except InvalidVersion:
        return (1, v, v)
