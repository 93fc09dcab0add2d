// Shared by producer.js and worker.js: the Redis connection from a URL, a seeded
// random stream, and the service-time distributions qsim's scenarios name.
'use strict';

function connection(url) {
  const u = new URL(url || 'redis://127.0.0.1:6379/0');
  const db = parseInt((u.pathname || '/0').slice(1) || '0', 10);
  const conn = { host: u.hostname || '127.0.0.1', port: parseInt(u.port || '6379', 10), db,
                 maxRetriesPerRequest: null };
  if (u.password) conn.password = decodeURIComponent(u.password);
  if (u.username) conn.username = decodeURIComponent(u.username);
  return conn;
}

// mulberry32: a small seeded generator of uniforms in [0, 1)
function rng(seed) {
  let a = (seed >>> 0) || 1;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => {
    let u = 0;
    while (u === 0) u = uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  };
  const exponential = (mean) => -mean * Math.log(1 - uniform());
  const gamma = (shape, scale) => {  // Marsaglia-Tsang
    if (shape < 1) return gamma(shape + 1, scale) * Math.pow(uniform() || 1e-12, 1 / shape);
    const d = shape - 1 / 3, c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x, v;
      do { x = normal(); v = 1 + c * x; } while (v <= 0);
      v = v * v * v;
      const u = uniform();
      if (u < 1 - 0.0331 * x * x * x * x || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale;
    }
  };
  return { uniform, normal, exponential, gamma };
}

// One draw (seconds) of {kind, mean, cv, low, high} as in a qsim scenario's `service`.
function draw(r, spec) {
  const { kind, mean, cv } = spec;
  if (kind === 'constant') return mean;
  if (kind === 'exponential') return r.exponential(mean);
  if (kind === 'uniform') return spec.low + (spec.high - spec.low) * r.uniform();
  if (kind === 'gamma') { const a = 1 / (cv * cv); return r.gamma(a, mean / a); }
  if (kind === 'lognormal') {
    const s2 = Math.log(1 + cv * cv);
    return Math.exp(Math.log(mean) - s2 / 2 + Math.sqrt(s2) * r.normal());
  }
  throw new Error(`unknown service kind ${kind}`);
}

// A 32-bit seed from any strings (FNV-1a), e.g. (seed, job id, attempt): a job's draws do not
// depend on the order in which jobs run.
function seedOf(...parts) {
  let h = 0x811c9dc5;
  for (const c of parts.join('|')) {
    h ^= c.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

// The JSON config of argv[2]; what it leaves out is read from the environment qsim gives a worker
// command (qsim compare --target bullmq --worker-command): REDIS_URL, QSIM_QUEUE, QSIM_PREFIX,
// QSIM_CONCURRENCY, QSIM_WORKER_ID (the worker's name).
function config() {
  const raw = process.argv[2];
  const env = process.env;
  if (!raw && !env.QSIM_QUEUE) throw new Error('usage: node script.js \'<JSON config>\' (or set QSIM_QUEUE and REDIS_URL)');
  const cfg = raw ? JSON.parse(raw) : {};
  if (cfg.redis === undefined && env.REDIS_URL) cfg.redis = env.REDIS_URL;
  if (cfg.queue === undefined && env.QSIM_QUEUE) cfg.queue = env.QSIM_QUEUE;
  if (cfg.prefix === undefined && env.QSIM_PREFIX) cfg.prefix = env.QSIM_PREFIX;
  if (cfg.concurrency === undefined && env.QSIM_CONCURRENCY) cfg.concurrency = parseInt(env.QSIM_CONCURRENCY, 10);
  if (cfg.name === undefined && env.QSIM_WORKER_ID) cfg.name = env.QSIM_WORKER_ID;
  return cfg;
}

// Wait until `worker` is connected, print "ready", then close it and exit on SIGTERM/SIGINT.
async function serveUntilSignal(worker) {
  worker.on('error', (e) => process.stderr.write(`worker error: ${e}\n`));
  await worker.waitUntilReady();
  process.stdout.write('ready\n');
  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await worker.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

module.exports = { connection, rng, draw, config, seedOf, serveUntilSignal };
