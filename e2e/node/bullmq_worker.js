'use strict';
// bullmq_worker.js is a real BullMQ Worker (and Queue) on one queue, for
// the BullMQ driver's tests and the end-to-end test of a BullMQ incident,
// driven from Go by internal/fixture/bullmqtest. It fails every job it
// takes until told to succeed, so that jobs added with attempts: 2 end in
// the failed set exactly as BullMQ leaves them there.
//
// It reads commands from stdin, one JSON object a line, and answers on
// stdout, one JSON object a line:
//
//   {"cmd":"add","jobs":[{"name","data","opts"}]}
//       adds the jobs with Queue.add; answers {"event":"added","ids":[…]}
//   {"cmd":"succeed","poison":["r-3",…]}
//       from now on the processor returns instead of throwing, but for the
//       jobs whose data.reservation_id poison names (optional): those are
//       poisoned and keep failing; answers {"event":"succeeding"}
//   {"cmd":"retry","id"} / {"cmd":"remove","id"}
//       BullMQ's own Job.retry('failed') or Job.remove() on a job;
//       answers {"event":"retried"|"removed","id"} or {"event":"error",…}
//   {"cmd":"pause"} / {"cmd":"resume"}
//       BullMQ's own Queue.pause() or Queue.resume(); answers
//       {"event":"paused"|"resumed"}
//   {"cmd":"quit"}
//       closes the Worker and the Queue and exits 0.
//
// Every attempt is reported as it ends, with what the processor saw of the
// job as it started (so that the Go side can tell an ordinary retry):
//
//   {"event":"failing"|"completed","id","name","data","attemptsMade",
//    "attemptsStarted","failedReason","processedOn","finishedOn",
//    "stacktrace":N,"opts":{…}}
//
// The failure's error is "db_timeout: reservation <data.reservation_id>
// lock wait exceeded", a transient error as the message contract names it.
//
// Usage: node bullmq_worker.js CONFIG.json   (CONFIG: host, port, db,
// prefix, queue, and worker: false for a Queue alone, which only adds,
// retries and removes: a job it retries stays waiting)
//
// BULLMQ_PACKAGE names the package it loads: bullmq (the default, BullMQ
// 5) or bullmq6 (BullMQ 6, package.json's alias), so that the driver's
// tests run each key layout it supports with that release's own Worker.

const fs = require('node:fs');
const readline = require('node:readline');

const packages = ['bullmq', 'bullmq6'];
const bullmqPackage = process.env.BULLMQ_PACKAGE || 'bullmq';
if (!packages.includes(bullmqPackage)) {
  process.stdout.write(JSON.stringify({ event: 'error', error: `BULLMQ_PACKAGE=${bullmqPackage}: want one of ${packages.join(', ')}` }) + '\n');
  process.exit(1);
}
const { Queue, Worker, Job } = require(bullmqPackage);

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const connection = { host: config.host, port: config.port, db: config.db || 0 };
const opts = { connection, prefix: config.prefix };

let succeed = false;
let poison = new Set();

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function seen(job) {
  return {
    id: job.id,
    name: job.name,
    data: job.data,
    attemptsMade: job.attemptsMade,
    attemptsStarted: job.attemptsStarted,
    failedReason: job.failedReason === undefined ? null : job.failedReason,
    processedOn: job.processedOn === undefined ? null : job.processedOn,
    finishedOn: job.finishedOn === undefined ? null : job.finishedOn,
    stacktrace: (job.stacktrace || []).length,
    opts: job.opts,
  };
}

async function main() {
  const queue = new Queue(config.queue, opts);
  await queue.waitUntilReady();
  const worker = config.worker === false ? null : new Worker(
    config.queue,
    async (job) => {
      const saw = seen(job);
      if (!succeed || poison.has(job.data && job.data.reservation_id)) {
        const err = new Error(`db_timeout: reservation ${job.data && job.data.reservation_id} lock wait exceeded`);
        say({ event: 'failing', ...saw });
        throw err;
      }
      say({ event: 'completed', ...saw });
      return { ok: true };
    },
    { ...opts, concurrency: 4 },
  );
  if (worker) {
    worker.on('error', (err) => say({ event: 'error', error: String(err) }));
    await worker.waitUntilReady();
  }
  say({ event: 'ready' });

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const c = JSON.parse(line);
    try {
      switch (c.cmd) {
        case 'add': {
          const ids = [];
          for (const j of c.jobs) {
            const job = await queue.add(j.name, j.data, j.opts || {});
            ids.push(job.id);
          }
          say({ event: 'added', ids });
          break;
        }
        case 'succeed':
          succeed = true;
          poison = new Set(c.poison || []);
          say({ event: 'succeeding' });
          break;
        case 'retry': {
          const job = await Job.fromId(queue, c.id);
          await job.retry('failed');
          say({ event: 'retried', id: c.id });
          break;
        }
        case 'remove': {
          const job = await Job.fromId(queue, c.id);
          await job.remove();
          say({ event: 'removed', id: c.id });
          break;
        }
        case 'pause':
          await queue.pause();
          say({ event: 'paused' });
          break;
        case 'resume':
          await queue.resume();
          say({ event: 'resumed' });
          break;
        case 'quit':
          if (worker) await worker.close();
          await queue.close();
          say({ event: 'closed' });
          process.exit(0);
          break;
        default:
          say({ event: 'error', error: `unknown command ${c.cmd}` });
      }
    } catch (err) {
      say({ event: 'error', cmd: c.cmd, id: c.id, error: String(err) });
    }
  }
  // stdin closed without quit: the test went away.
  if (worker) await worker.close();
  await queue.close();
}

main().catch((err) => {
  say({ event: 'error', error: String(err && err.stack) });
  process.exit(1);
});
