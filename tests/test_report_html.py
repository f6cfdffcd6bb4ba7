"""report.html renders in a real headless browser: a screenshot shows the heat map's colours, and
the inline filters run (the DOM after load reflects a filter given in the URL fragment).

Chromium is a test-time dependency (Debian: ``apt-get install -y chromium``); without it these
tests skip, saying so.
"""
from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from qconform.report import html
from qconform.report.html import COLOURS
from support import SUPPORT, FlipInt8Runner, copy_group  # noqa: F401

pytest_plugins = ["pytester"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y "
                                                              "chromium); report.html is not rendered")
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
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
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


@needs_chromium
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
