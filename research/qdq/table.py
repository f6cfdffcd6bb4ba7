"""Render out/survey.json as a markdown table (one row per pattern)."""
import json
import os
import sys

rows = json.load(open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out", "survey.json")))


def cell(d, key):
    if d is None:
        return "—"
    if "refused" in d:
        r = d["refused"]
        if "fallback to CPU EP" in r:
            return "refused (node left to CPU)"
        return "refused: " + r.replace("QNN.backendValidateOpConfig() failed for node ", "validate ").replace("|", "/")[:70]
    if "bad_output" in d:
        return "bad output " + d["bad_output"]
    s = f"{d['differ']}/{d['of']}"
    if d.get("max"):
        s += f" (≤{d['max']})"
    if d.get("max_abs"):
        s += f" (≤{d['max_abs']:.3g})"
    if key == "ort_all":
        fused = [o for o in d["ops"] if o.startswith("QLinear") or o in ("MatMulIntegerToFloat", "QGemm", "QLinearConv")]
        if not any(o in ("DequantizeLinear", "QuantizeLinear") for o in d["ops"]):
            s += " " + "+".join(d["ops"])
        elif fused:
            s += " " + "+".join(fused)
        else:
            s += " unfused"
    if key == "openvino":
        lp = [e for e in d["exec"] if e.split(":")[1] in ("u8", "i8") and e.split(":")[0] not in ("Transpose", "Convert", "Reorder")]
        s += " LPT " + ",".join(lp) if lp else " f32"
    return s


print("| pattern | ORT_ENABLE_ALL (differ; kernel) | QNN HTP (differ) | OpenVINO CPU f32 hint (differ; low-precision op) |")
print("|---|---|---|---|")
for r in rows:
    if "ref_error" in r or len(r) == 1:
        print(f"| {r['pattern']} | reference failed: {r.get('ref_error', '')[:80]} | | |")
        continue
    print(f"| {r['pattern']} | {cell(r.get('ort_all'), 'ort_all')} | {cell(r.get('qnn'), 'qnn')} | {cell(r.get('openvino'), 'openvino')} |")
