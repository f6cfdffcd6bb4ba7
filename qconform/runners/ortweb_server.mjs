// qconform's onnxruntime-web server: one Node.js process, driven by qconform/runners/ortweb_runner.py.
//
// Usage: node ortweb_server.mjs <node_modules dir that holds onnxruntime-web>
//
// Protocol: one JSON request per line on stdin, one JSON reply per line on stdout, in order.
// Every reply line starts with TAG, so anything else the runtime might print to stdout is told
// apart from the protocol (console.log/info/debug are sent to stderr anyway). Byte payloads travel
// as base64 of the tensor's raw bytes in the ONNX layout (little-endian; int4/uint4 packed two
// per byte, the first in the low nibble, as onnxruntime-web keeps them).
//
//   {"op": "hello", "threads": N, "optimize": 0|1}  -> {"ok": true, "versions": ..., "node": ...}
//   {"op": "create", "model": B64}                   -> {"ok": true, "session": ID, "live": N, "inputs": [...], "outputs": [...]}
//   {"op": "run", "session": ID, "inputs": {NAME: {"type": T, "dims": [...], "data": B64}}}
//                                                    -> {"ok": true, "outputs": [{"name", "type", "dims", "data"}]}
// Any request may carry "release": [IDs], sessions released before the op. A failure replies
// {"ok": false, "stage": op, "error": "Name: message"}; a WebAssembly trap (an abort in the
// runtime) also sets "fatal": true and the process exits after the reply: the instance is
// unusable after a trap, and the Python side starts a fresh process for the next request.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import readline from 'node:readline';

const TAG = '@qconform-ortweb ';
const out = process.stdout;
for (const k of ['log', 'info', 'debug']) console[k] = console.error;  // stdout is the protocol's

const nodeModules = process.argv[2];
const require = createRequire(path.join(nodeModules, 'noop.js'));
const ort = await import(pathToFileURL(require.resolve('onnxruntime-web')).href);

const sessions = new Map();
let nextId = 1;
let sessionOptions = { executionProviders: ['wasm'], graphOptimizationLevel: 'disabled', logSeverityLevel: 4 };

// Typed-array views of raw bytes per tensor type; float16 is carried as its uint16 bits (Node has
// no Float16Array, and onnxruntime-web accepts Uint16Array for float16), int4/uint4 as packed bytes.
const VIEW = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array,
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array, int4: Uint8Array, uint4: Uint8Array,
};

function fromB64(type, b64) {
  const buf = Buffer.from(b64, 'base64');
  const bytes = new Uint8Array(buf.byteLength);  // a fresh, aligned buffer
  bytes.set(buf);
  const View = VIEW[type];
  if (!View) throw new TypeError(`no typed array for tensor type ${type}`);
  if (bytes.byteLength % View.BYTES_PER_ELEMENT) throw new RangeError(`${bytes.byteLength} bytes is not a whole number of ${type} elements`);
  return new View(bytes.buffer, 0, bytes.byteLength / View.BYTES_PER_ELEMENT);
}

function toB64(data) {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
}

function errorText(e) {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

function isTrap(e) {
  return (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) ||
    (e instanceof Error && /^Aborted\(/.test(e.message));
}

async function release(ids) {
  for (const id of ids || []) {
    const s = sessions.get(id);
    sessions.delete(id);
    try {
      if (s) await s.release();
    } catch (e) {
      console.error(`ortweb server: releasing session ${id}: ${errorText(e)}`);
    }
  }
}

async function handle(req) {
  await release(req.release);
  switch (req.op) {
    case 'hello': {
      ort.env.wasm.numThreads = Number(req.threads ?? 1);
      ort.env.wasm.proxy = false;
      ort.env.logLevel = 'fatal';
      if (req.optimize) sessionOptions.graphOptimizationLevel = 'all';
      return { ok: true, versions: ort.env.versions, node: process.version,
               numThreads: ort.env.wasm.numThreads, sessionOptions };
    }
    case 'create': {
      const model = new Uint8Array(Buffer.from(req.model, 'base64'));
      const session = await ort.InferenceSession.create(model, sessionOptions);
      const id = nextId++;
      sessions.set(id, session);
      return { ok: true, session: id, live: sessions.size, inputs: session.inputNames, outputs: session.outputNames };
    }
    case 'run': {
      const session = sessions.get(req.session);
      if (!session) throw new Error(`no session ${req.session} in this process`);
      const feeds = {};
      for (const [name, t] of Object.entries(req.inputs)) {
        feeds[name] = new ort.Tensor(t.type, fromB64(t.type, t.data), t.dims);
      }
      const res = await session.run(feeds);
      const outputs = session.outputNames.map((name) => {
        const t = res[name];
        return { name, type: t.type, dims: Array.from(t.dims), data: toB64(t.data) };
      });
      for (const t of Object.values(res)) t.dispose?.();
      return { ok: true, outputs };
    }
    case 'exit':
      process.exit(0);
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let req = {};
  let reply;
  let fatal = false;
  try {
    req = JSON.parse(line);
    reply = await handle(req);
  } catch (e) {
    fatal = isTrap(e);
    reply = { ok: false, stage: req.op ?? 'parse', error: errorText(e), fatal };
  }
  const text = TAG + JSON.stringify(reply) + '\n';
  if (!out.write(text)) await new Promise((r) => out.once('drain', r));
  if (fatal) {
    process.stderr.write(`ortweb server: exiting after a WebAssembly trap: ${reply.error}\n`);
    process.exit(3);
  }
}
process.exit(0);
