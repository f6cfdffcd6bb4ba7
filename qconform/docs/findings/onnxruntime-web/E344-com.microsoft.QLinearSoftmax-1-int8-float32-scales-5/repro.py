"""onnxruntime-web com.microsoft QLinearSoftmax-1: quantizes with floor(1 / y_scale) in place of 1 / y_scale, as onnxruntime natively (its E325) (see README.md). Exit status 1 when the outputs differ from expected.npz."""
import os
import numpy as np
import base64
import json
import subprocess

os.chdir(os.path.dirname(os.path.abspath(__file__)))
inputs, expected = dict(np.load("inputs.npz")), dict(np.load("expected.npz"))
print("onnxruntime-web", subprocess.run(["node", "-p", "require('onnxruntime-web').env.versions.web"], capture_output=True, text=True).stdout.strip())
try:
    JS = r"""
    const ort = require('onnxruntime-web'), fs = require('fs');
    const VIEW = {float32: Float32Array, float16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
                  int16: Int16Array, uint16: Uint16Array, int32: Int32Array};
    (async () => {
      ort.env.wasm.numThreads = 1; ort.env.logLevel = 'fatal';
      const s = await ort.InferenceSession.create(fs.readFileSync('model.onnx'),
          {executionProviders: ['wasm'], graphOptimizationLevel: 'disabled'});
      const feeds = {};
      for (const [k, [type, dims, b64]] of Object.entries(JSON.parse(fs.readFileSync(0, 'utf8')))) {
        const b = new Uint8Array(Buffer.from(b64, 'base64')); feeds[k] = new ort.Tensor(type, new VIEW[type](b.buffer), dims); }
      const r = await s.run(feeds), d = (t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      console.log(JSON.stringify(Object.fromEntries(s.outputNames.map((n) => [n, [r[n].type, r[n].dims, d(r[n]).toString('base64')]]))));
    })().catch((e) => { console.error(String(e)); process.exit(1); });
    """
    req = {k: [v.dtype.name, list(v.shape), base64.b64encode(v.tobytes()).decode()] for k, v in inputs.items()}
    p = subprocess.run(["node", "-e", JS], input=json.dumps(req), capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr.strip().splitlines()[-1])
    actual = {k: np.frombuffer(base64.b64decode(b), t).reshape(dims) for k, (t, dims, b) in json.loads(p.stdout).items()}
except Exception as exc:
    raise SystemExit(f"expected: {expected}\nMISMATCH: the run raised {type(exc).__name__}: {exc}")
bad = 0
for name, e in expected.items():
    a = np.asarray(actual[name])
    if (a.dtype, a.shape) != (e.dtype, e.shape):
        raise SystemExit(f"MISMATCH: {name}: expected {e.dtype}{list(e.shape)}, actual {a.dtype}{list(a.shape)}")
    differ = (a.view(f"u{a.itemsize}") != e.view(f"u{e.itemsize}")) & ~((a != a) & (e != e))
    for i in np.argwhere(differ)[:8].tolist():
        print(f"{name}{i}: expected {e[tuple(i)]}, actual {a[tuple(i)]}")
    bad += int(differ.sum())
print(f"MISMATCH: {bad} element(s) differ" if bad else "OK: the outputs are the expected ones")
raise SystemExit(1 if bad else 0)
