// BullMQ (Node) side of benchmarks/engine_throughput.py: the same drains and pickup test as qsim's.
//
// node bench.js fill   '<JSON config>'   add `n` jobs named "noop" with addBulk (batches of 1000), then exit
// node bench.js add    '<JSON config>'   add `n` jobs named "noop" one `add` call each (as a service adds them)
// node bench.js work   '<JSON config>'   a Worker with `concurrency` running `handler` until SIGTERM;
//                                         prints "ready" once connected
// node bench.js pickup '<JSON config>'   add `n` jobs one at a time, `gap_ms` apart, to an idle queue;
//                                         prints {job id: the middle of its add call, ms}
//
// config: {redis, queue, prefix, n, concurrency, handler: "noop" | "io10" | "stamp", gap_ms}
// Handlers: noop returns at once; io10 awaits a 10 ms timer; stamp returns the wall clock (ms) at its start.
// pickup prints {job id: the middle of its add call (ms)} as one JSON line.
// Jobs keep BullMQ's defaults (kept when completed), so the drain is timed from their own stamps
// (processedOn of the first to start, finishedOn of the last to finish), as qsim's drain is.
'use strict';
const path = require('path');
const { Queue, Worker } = require('bullmq');
const { connection, serveUntilSignal } = require(path.join(__dirname, '..', '..', 'tests', 'node', 'common'));

// wall-clock milliseconds with a fraction (Date.now() has whole milliseconds only)
const nowMs = () => performance.timeOrigin + performance.now();

const HANDLERS = {
  noop: async () => null,
  io10: async () => { await new Promise((res) => setTimeout(res, 10)); return null; },
  stamp: async () => nowMs(),
};

async function fill(cfg) {
  const q = new Queue(cfg.queue, { connection: connection(cfg.redis), prefix: cfg.prefix });
  for (let i = 0; i < cfg.n; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(cfg.n, i + 1000); j++) batch.push({ name: 'noop', data: null });
    await q.addBulk(batch);
  }
  await q.close();
}

async function add(cfg) {
  const q = new Queue(cfg.queue, { connection: connection(cfg.redis), prefix: cfg.prefix });
  for (let i = 0; i < cfg.n; i++) await q.add('noop', null);
  await q.close();
}

async function pickup(cfg) {
  const q = new Queue(cfg.queue, { connection: connection(cfg.redis), prefix: cfg.prefix });
  const added = {};  // job id -> the middle of its add call (ms): when it reached Redis, near enough
  for (let i = 0; i < cfg.n; i++) {
    const t0 = nowMs();
    const job = await q.add('t', null);
    added[job.id] = (t0 + nowMs()) / 2;
    await new Promise((res) => setTimeout(res, cfg.gap_ms));
  }
  await q.close();
  process.stdout.write(JSON.stringify(added) + '\n');
}

async function work(cfg) {
  const worker = new Worker(cfg.queue, HANDLERS[cfg.handler], {
    connection: connection(cfg.redis), prefix: cfg.prefix, concurrency: cfg.concurrency });
  await serveUntilSignal(worker);
}

const [cmd, raw] = process.argv.slice(2);
const run = { fill, add, work, pickup }[cmd];
if (!run) {
  process.stderr.write('usage: node bench.js fill|add|work|pickup \'<JSON config>\'\n');
  process.exit(2);
}
run(JSON.parse(raw)).catch((e) => { process.stderr.write(String((e && e.stack) || e) + '\n'); process.exit(1); });
