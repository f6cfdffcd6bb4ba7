"""report.html renders in a real headless browser: a screenshot shows the heat map's colours, and
the inline filters run (the DOM after load reflects a filter given in the URL fragment).

Chromium is a test-time dependency (Debian: ``apt-get install -y chromium``); without it these
tests skip, saying so.
"""
from __future__ import annotations

import json
import re
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from qconform import tools
from qconform.report import html
from qconform.report.html import COLOURS
from support import SUPPORT, FlipInt8Runner, copy_group  # noqa: F401

pytest_plugins = ["pytester"]

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    return copy_group(tmp_path_factory.mktemp("golden"))


def ort_report(pytester: pytest.Pytester, golden: Path) -> Path:
    """report.html of a run with passes, deviations and unsupported cases (a deliberately wrong runner:
    which cases a real runtime gets wrong changes with its release and the CPU)."""
    out = pytester.path / "report"
    pytester.runpytest(f"--runner={SUPPORT}:FlipInt8NoUint8Runner", f"--golden={golden}", f"--report={out}",
                       "-m", "family_specials", "--isolate=off", "-p", "no:randomly")
    assert (out / "report.html").exists()
    return out


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tools.find("chromium"), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def png_rgb(path: Path) -> np.ndarray:
    """The pixels (height, width, 3) of an 8-bit non-interlaced RGB/RGBA PNG, as Chromium writes it."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data[pos + 8:pos + 8 + length])
        elif kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), np.uint8)
    prev = np.zeros(width * bpp, np.uint8)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:]
        if f == 0:
            cur = line.copy()
        elif f == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint32) % 256).astype(np.uint8).ravel()
        elif f == 2:  # Up
            cur = line + prev
        else:  # Average, Paeth: sequential along the row
            cur, b = bytearray(line.tobytes()), prev.tobytes()
            for i in range(width * bpp):
                a, c = (cur[i - bpp], b[i - bpp]) if i >= bpp else (0, 0)
                if f == 3:
                    pred = (a + b[i]) // 2
                else:
                    p = a + b[i] - c
                    pa, pb, pc = abs(p - a), abs(p - b[i]), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else b[i] if pb <= pc else c
                cur[i] = (cur[i] + pred) & 0xFF
            cur = np.frombuffer(bytes(cur), np.uint8)
        out[y] = prev = cur
    return out.reshape(height, width, bpp)[:, :, :3]


@pytest.mark.needs("chromium")
def test_report_html_in_chromium(pytester: pytest.Pytester, golden: Path, tmp_path: Path):
    out = ort_report(pytester, golden)
    text = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text), "report.html references the network"
    assert "@import" not in text and "url(" not in text
    report = json.loads((out / "report.json").read_text())

    # The screenshot: a real page, with the heat map's pass / fail / unsupported cells on screen.
    shot = out / "report.png"  # kept beside the report for a human to look at
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", (out / "report.html").as_uri())
    assert shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]
    pixels = png_rgb(shot)
    assert pixels.shape == (1000, 1400, 3)
    for status in {m["status"] for m in report["matrix"]} & {"pass", "fail", "unsupported"}:
        cell = np.all(pixels == np.frombuffer(bytes.fromhex(COLOURS[status][1:]), np.uint8), axis=2)
        assert cell.sum() > 200, f"no {status} cells on screen"

    # The inline filters run: a filter in the URL fragment shows only the failures, expanded.
    fails = [f["id"] for f in report["failures"] if f["verdict"] == "fail"]
    assert fails
    dom = chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri() + "#v=fail&open=1").stdout
    details = re.findall(r'<details class="f( hidden)?"[^>]*data-id="([^"]+)"[^>]*?( open="")?>', dom)
    visible = [cid for hidden, cid, _ in details if not hidden]
    assert sorted(visible) == sorted(fails) and len(details) == len(report["failures"])
    assert all(is_open for hidden, _, is_open in details if not hidden)
    assert f'id="nshown">{len(fails)}<' in dom


def test_render_handles_an_empty_and_an_interrupted_report():
    report = {"schema_version": 1, "qconform_version": "0", "complete": False, "interrupted": True,
              "exit_status": 2, "runner": {"name": "r"}, "corpus": {"digest": "0" * 64, "cases": 0},
              "platform": {}, "invocation": {"profile": "default"}, "timing": {},
              "counts": {"collected": 0, "reported": 0, "ran": 0, "pass": 0, "fail": 0, "error": 0, "crashed": 0,
                         "timeout": 0, "unsupported": 0, "not-run": 0},
              "gate": {}, "matrix": [], "readings_followed": [], "failures": [], "cases": []}
    text = html.render(report)
    assert "Incomplete run (interrupted)" in text and "No failures." in text


WRAPPER = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="report.html" width="{w}" height="{h}" style="border:0"></iframe>
<pre id="out"></pre>
<script>
document.getElementById('f').onload = () => {{
  const d = document.getElementById('f').contentDocument;
  if ({print}) d.documentElement.classList.add('print');
  d.querySelectorAll('details').forEach(e => e.open = true);
  const r = id => d.getElementById(id).getBoundingClientRect();
  const wide = [...d.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > {w} + 1).length;
  document.getElementById('out').textContent = JSON.stringify({{
    scrollWidth: d.documentElement.scrollWidth, identityBottom: r('identity').bottom,
    overallBottom: r('overall').bottom, verdictsBottom: r('verdicts').bottom, wideTables: wide,
    rollupHeight: d.getElementById('by-behaviour') ? d.getElementById('by-behaviour').nextElementSibling
      .getBoundingClientRect().bottom - r('by-behaviour').top : 0}});
}};
</script></body></html>"""


def _measure(tmp_path: Path, out: Path, width: int, height: int, print_rules: bool) -> dict:
    page = out / f"measure-{width}-{int(print_rules)}.html"
    page.write_text(WRAPPER.format(w=width, h=height, print=str(print_rules).lower()))
    dom = chromium(tmp_path, "--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                   f"--window-size={width + 20},{height + 200}", page.as_uri()).stdout
    m = re.search(r'<pre id="out">(\{.*?\})</pre>', dom)
    assert m, dom[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"'))


@pytest.mark.needs("chromium")
def test_the_certificate_fits_a_laptop_screen_and_prints(pytester: pytest.Pytester, golden: Path, tmp_path: Path):
    """At 1280x800: no horizontal scrolling, the identity block and the overall verdict on the first
    screen; clause links resolve in the shipped semantics page; printed, no table is cut off."""
    baseline = pytester.path / "baseline.json"
    baseline.write_text(json.dumps({"qconform_baseline": 1, "entries": [
        {"id": "QuantizeLinear-21/float32-int8/*", "reason": "vendor bug 42: int8 codes flipped"}]}))
    out = pytester.path / "report"
    pytester.runpytest(f"--runner={SUPPORT}:FlipInt8NoUint8Runner", f"--golden={golden}", f"--report={out}",
                       "-m", "family_specials", "--isolate=off", "-p", "no:randomly", f"--baseline={baseline}")
    report = json.loads((out / "report.json").read_text())
    from qconform.report.certificate import scopes

    verdicts = {t["verdict"] for s in scopes(report) for t in [s, *s["types"]]}
    # a selection (-m): its passing scopes read "passed the selected cases", never "conformant"
    assert {"deviates", "deviates, accepted by baseline", "passed the selected cases"} <= verdicts, verdicts
    assert report["counts"]["unsupported"] > 0

    screen = _measure(tmp_path, out, 1280, 800, print_rules=False)
    assert screen["scrollWidth"] <= 1280, screen
    assert screen["identityBottom"] <= 800 and screen["overallBottom"] <= 800, screen
    assert screen["verdictsBottom"] <= 800, screen  # every op version's verdict on the first screen
    assert screen["wideTables"] == 0, screen

    text = (out / "report.html").read_text()
    # Evidence: every mismatching element of every failing case, downloadable, counted exactly.
    failing = [f for f in report["failures"] if f["mismatches"]]
    assert failing
    for f in failing:
        rows = (out / f["evidence_file"]).read_text().splitlines()
        assert len(rows) - 1 == f["mismatches"] == f["evidence_rows"], f["id"]
        assert f'href="{f["evidence_file"]}"' in text
    links = set(re.findall(r'href="semantics\.html#([^"]+)"', text))
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', (out / "semantics.html").read_text()))
    assert links and links <= anchors, links - anchors
    assert "Gate" not in text and "gate" not in re.sub(r"<[^>]+>", "", text).lower()

    printed = _measure(tmp_path, out, 720, 1000, print_rules=True)  # A4 minus margins at 96 dpi
    assert printed["scrollWidth"] <= 720 and printed["wideTables"] == 0, printed
    pdf = out / "report.pdf"  # kept beside the report for a human to look at
    chromium(tmp_path, f"--print-to-pdf={pdf}", "--no-pdf-header-footer", (out / "report.html").as_uri())
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.read_bytes().count(b"/Type /Page") > 1
    shot = out / "report-1280.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,800", (out / "report.html").as_uri())
    assert shot.exists()


def test_report_verify_catches_a_one_byte_edit(pytester: pytest.Pytester, golden: Path):
    from qconform.cli import main

    out = ort_report(pytester, golden)
    assert main(["report", "verify", str(out)]) == 0
    for name in ("report.json", "report.html", "summary.md"):
        data = bytearray((out / name).read_bytes())
        i = len(data) // 2
        data[i] = (data[i] + 1) % 256 if data[i] not in b"\n\r" else data[i]
        original = (out / name).read_bytes()
        (out / name).write_bytes(bytes(data))
        assert main(["report", "verify", str(out)]) == 1, name
        (out / name).write_bytes(original)
    assert main(["report", "verify", str(out)]) == 0


@pytest.mark.needs("chromium")
def test_a_whole_corpus_certificate_leads_with_its_verdicts_and_prints_short(tmp_path: Path):
    """Every op version of the corpus, a deviation in every seventh case spread over 22 behaviours
    (as many as onnxruntime-openvino 1.24.1's whole run): every op version's verdict is on the first
    1280x800 screen, the rollup by behaviour fits one more, and the printed certificate is at most 20
    pages, one example per behaviour."""
    from qconform import corpus
    from qconform.diagnosis.models import MODELS
    from qconform.record import CaseRecord
    from qconform.report import model, writer

    index = corpus.index(corpus.DEFAULT_ROOT)
    names = sorted(MODELS)[:22]
    records = []
    for i, ref in enumerate(index.refs):
        stub = CaseRecord.stub(ref).to_dict()
        if i % 7:
            records.append({**stub, "verdict": "pass" if i % 3 else "unsupported", "problem": f"no kernel {i % 5}"})
            continue
        records.append({**stub, "verdict": "fail", "mismatches": 1, "problem": None, "diagnosis": [names[i % 22]],
                        "first_mismatches": [{"output": stub["output_names"][0], "index": [0], "expected_bits": 1,
                                              "actual_bits": 2, "expected_value": "1", "actual_value": "2",
                                              "inputs": {"x": "0.5"}}]})
    meta = {"runner": {"name": "synthetic", "version": "1"}, "corpus": {"digest": "d", "cases": len(records)},
            "platform": writer.platform_meta(), "invocation": {"args": [], "profile": "default", "filters": []},
            "timing": {"started": "", "finished": "", "duration_s": 0}}
    report = model.build(records, [CaseRecord.stub(r).to_dict() for r in index.refs], meta)
    report["gate"], report["diagnosis"] = {}, {}
    out = tmp_path / "report"
    writer.write(out, report)
    screen = _measure(tmp_path, out, 1280, 800, print_rules=False)
    assert screen["verdictsBottom"] <= 800 and screen["identityBottom"] <= 800, screen
    assert 0 < screen["rollupHeight"] <= 800, screen
    html = (out / "report.html").read_text()
    rollup = html[html.index('id="by-behaviour"'):html.index("</table>", html.index('id="by-behaviour"'))]
    assert rollup.count("<tr>") == 1 + 22  # one row (one example) per behaviour
    pdf = out / "report.pdf"
    chromium(tmp_path, f"--print-to-pdf={pdf}", "--no-pdf-header-footer", (out / "report.html").as_uri())
    pages = pdf.read_bytes().count(b"/Type /Page") - pdf.read_bytes().count(b"/Type /Pages")
    assert 1 < pages <= 20, pages
