// A BullMQ worker with a known service distribution; runs until SIGTERM/SIGINT.
//
// node worker.js '<JSON config>'
//   (without it, or for what it leaves out: REDIS_URL, QSIM_QUEUE, QSIM_PREFIX, QSIM_CONCURRENCY and
//   QSIM_WORKER_ID from the environment, as qsim compare --target bullmq --worker-command sets them)
//   redis, prefix, queue     as for producer.js
//   concurrency              jobs at once (default 1)
//   name                     worker name (BullMQ 5 stores it in each job as `pb`); optional
//   service                  {"<job name>": {kind, mean, cv, low, high}, "*": {...}} (seconds);
//                            a job whose data has "s" (a list, one per attempt) sleeps that instead
//   fail_prob, poison_prob   {"<job name>": p, "*": p}: an attempt fails / a job fails every attempt
//                            (a job whose data has "x" (0/1 per attempt) fails as it says)
//   seed                     random streams (default 1): each attempt draws from its own stream,
//                            seeded by (seed, job id, attempt), so a job's service time and failure
//                            do not depend on the order in which jobs run
// A job's return value is {"attempt": n, "s": the seconds it slept}.
// Prints "ready" on stdout once connected; on SIGTERM closes gracefully and exits 0.
'use strict';
const { Worker } = require('bullmq');
const { connection, rng, draw, config, seedOf, serveUntilSignal } = require('./common');

function pick(table, name) {
  if (!table) return undefined;
  return table[name] !== undefined ? table[name] : table['*'];
}

async function main() {
  const cfg = config();
  const seed = cfg.seed || 1;
  const processor = async (job) => {
    // BullMQ 5 counts finished attempts in attemptsMade (and started ones in attemptsStarted);
    // BullMQ 4 counts started ones, this one included
    const attempt = job.attemptsStarted !== undefined ? (job.attemptsMade || 0) + 1 : Math.max(1, job.attemptsMade || 0);
    const data = job.data || {};
    const r = rng(seedOf(seed, job.id, attempt));
    let seconds;
    if (Array.isArray(data.s) && data.s.length) seconds = data.s[Math.min(attempt, data.s.length) - 1];
    else seconds = draw(r, pick(cfg.service, job.name) || { kind: 'constant', mean: 0 });
    await new Promise((res) => setTimeout(res, seconds * 1000));
    let fail;
    if (Array.isArray(data.x) && data.x.length) fail = !!data.x[Math.min(attempt, data.x.length) - 1];
    else {
      const poison = rng(seedOf(seed, job.id, 'poison')).uniform() < (pick(cfg.poison_prob, job.name) || 0);
      fail = poison || r.uniform() < (pick(cfg.fail_prob, job.name) || 0);
    }
    if (fail) throw new Error(`planned failure of attempt ${attempt}`);
    return { attempt, s: seconds };
  };
  const opts = { connection: connection(cfg.redis), prefix: cfg.prefix || 'bull', concurrency: cfg.concurrency || 1 };
  if (cfg.name) opts.name = cfg.name;
  const worker = new Worker(cfg.queue, processor, opts);
  await serveUntilSignal(worker);
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
