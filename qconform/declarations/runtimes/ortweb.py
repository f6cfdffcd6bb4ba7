"""onnxruntime-web (Node.js, the WASM backend), declared once (its runner ``runners.ortweb_runner``), with its
reproducer template."""
from __future__ import annotations

from qconform.declarations.runtime import Runtime, call_helper, with_template

_ORTWEB_JS = """\
JS = r\"\"\"
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
\"\"\"
req = {k: [v.dtype.name, list(v.shape), base64.b64encode(v.tobytes()).decode()] for k, v in inputs.items()}
p = subprocess.run(["node", "-e", JS], input=json.dumps(req), capture_output=True, text=True)
if p.returncode:
    raise RuntimeError(p.stderr.strip().splitlines()[-1])
actual = {k: np.frombuffer(base64.b64decode(b), t).reshape(dims) for k, (t, dims, b) in json.loads(p.stdout).items()}
"""


_ORTWEB = "qconform.runners.ortweb_runner"


def _ortweb_env() -> dict[str, str]:
    """Where node finds onnxruntime-web: the copy qconform's runner installed (a user runs
    ``npm install`` in the finding's folder instead, see the README)."""
    return {"NODE_PATH": str(call_helper(f"{_ORTWEB}:install_dir") / "node_modules")}


ONNXRUNTIME_WEB = with_template(
    # the whole corpus takes onnxruntime-web about 20 s (most models are refused at once); its facts
    # are keyed by the version the runner pins (and installs on first use where node and npm are)
    Runtime("onnxruntime-web", f"{_ORTWEB}:OrtWebRunner", dist="onnxruntime-web", module=_ORTWEB,
            version=f"{_ORTWEB}:pinned_version", pin="1.30.0"),
    "import base64\nimport json\nimport subprocess",
    "subprocess.run([\"node\", \"-p\", \"require('onnxruntime-web').env.versions.web\"], capture_output=True, "
    "text=True).stdout.strip()",
    _ORTWEB_JS,
    note="The script drives Node.js (`node` on PATH) with onnxruntime-web's WASM backend, one thread, "
         "graph optimisations off, as qconform's runner does; inputs and outputs travel as raw bytes.",
    env=_ortweb_env, version_of=lambda: call_helper(f"{_ORTWEB}:installed_version"), tools=("node",),
    install="pip install numpy && npm install onnxruntime-web@{version}   # into this folder")

__all__ = ["ONNXRUNTIME_WEB"]
