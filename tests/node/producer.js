// A BullMQ producer: adds jobs on a schedule, then prints one JSON line and exits.
//
// node producer.js '<JSON config>'
//   redis     redis://host:port/db          prefix   key prefix (default "bull")
//   queue     queue name
//   plan      [[at_seconds, name, data, opts], ...]  a fixed schedule (jobs with the same `at`
//             are added together with addBulk), or
//   types     [{name, rate, arrival: "poisson"|"burst", size, attempts, backoff: {type, delay}, priority}]
//             with duration (s) and seed: a random schedule drawn here
//   opts      options every job gets (merged under the plan's / type's own)
// Prints {"added": n, "t0": ms, "t1": ms, "late_ms": worst lateness} on stdout.
'use strict';
const { Queue } = require('bullmq');
const { connection, rng, config } = require('./common');

function randomPlan(cfg) {
  const r = rng(cfg.seed || 1);
  const plan = [];
  for (const t of cfg.types) {
    const opts = {};
    if (t.attempts) opts.attempts = t.attempts;
    if (t.backoff) opts.backoff = t.backoff;
    if (t.priority) opts.priority = t.priority;
    if (t.arrival === 'burst') {
      const period = t.size / t.rate;
      for (let at = 0; at < cfg.duration; at += period) for (let i = 0; i < t.size; i++) plan.push([at, t.name, {}, opts]);
    } else {
      for (let at = r.exponential(1 / t.rate); at < cfg.duration; at += r.exponential(1 / t.rate)) plan.push([at, t.name, {}, opts]);
    }
  }
  plan.sort((a, b) => a[0] - b[0]);
  return plan;
}

async function main() {
  const cfg = config();
  const queue = new Queue(cfg.queue, { connection: connection(cfg.redis), prefix: cfg.prefix || 'bull' });
  await queue.waitUntilReady();
  const plan = cfg.plan || randomPlan(cfg);
  const base = cfg.opts || {};
  const t0 = Date.now();
  let i = 0, late = 0;
  while (i < plan.length) {
    const due = t0 + plan[i][0] * 1000;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    late = Math.max(late, Date.now() - due);
    const now = (Date.now() - t0) / 1000;
    const batch = [];
    while (i < plan.length && plan[i][0] <= now) {
      const [, name, data, opts] = plan[i];
      batch.push({ name, data: data || {}, opts: Object.assign({}, base, opts || {}) });
      i++;
    }
    if (batch.length === 1) await queue.add(batch[0].name, batch[0].data, batch[0].opts);
    else await queue.addBulk(batch);
  }
  const t1 = Date.now();
  await queue.close();
  process.stdout.write(JSON.stringify({ added: plan.length, t0, t1, late_ms: late }) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
