'use strict';
// pgboss_worker.js is a real pg-boss producer and worker on one queue, for
// the pg-boss driver's tests (internal/adapter/pgboss) and the end-to-end
// incident (e2e/pgboss_test.go), driven from Go by
// internal/fixture/pgbosstest. Starting pg-boss installs its schema in the database, as
// an application's first start does; the queue is created with
// createQueue and the jobs are sent with send, so that every row the
// driver reads is one pg-boss wrote.
//
// It reads commands from stdin, one JSON object a line, and answers on
// stdout, one JSON object a line:
//
//   {"cmd":"send","jobs":[{"data","options"}]}
//       sends each job with send(); answers {"event":"sent","ids":[…]}
//   {"cmd":"failNow","jobs":[{"data","options"}]}
//       sends the jobs, then fails them as a worker that fetches its own
//       jobs does: fetch() takes them (they must be the queue's only ready
//       jobs) and fail() records each one's error, the last attempt when
//       the queue's retryLimit is 0; answers {"event":"failed","ids":[…]}
//   {"cmd":"fetch","n"}
//       fetch() takes n jobs and leaves them active, as a worker that is
//       still running them; answers {"event":"fetched","ids":[…]}
//   {"cmd":"failNext","id"}
//       fetch() and fail() again on a job put back (by retry()): it must be
//       the queue's only ready job; answers {"event":"failed","ids":[id]}
//   {"cmd":"work"} / {"cmd":"offWork"}
//       starts (work()) or stops (offWork()) a polling worker that fails
//       every job it takes until told to succeed; answers
//       {"event":"working"|"stopped"}
//   {"cmd":"succeed","poison":["r-3",…]}
//       from now on the worker's handler returns instead of throwing, but
//       for the jobs whose data.reservation_id poison names (optional):
//       those keep failing; answers {"event":"succeeding"}
//   {"cmd":"retry","id"} / {"cmd":"delete","id"}
//       pg-boss's own retry(name, id) or deleteJob(name, id); answers
//       {"event":"retried"|"deleted","id","affected"}
//   {"cmd":"createQueue","name","options"}
//       creates another queue with createQueue(); answers
//       {"event":"created","id":name}
//   {"cmd":"stored","payload"}
//       what pg-boss's send() writes of a job whose data is the JSON text
//       payload: JSON.stringify of what JSON.parse reads, which PostgreSQL
//       then keeps as jsonb; answers {"event":"stored","data"} with that
//       text, or {"event":"stored","error"} when payload is not JSON
//   {"cmd":"quit"}
//       stops pg-boss and exits 0.
//
// The worker reports every attempt as it ends, with what its handler saw
// of the job:
//
//   {"event":"failing"|"completed","id","name","data","retryCount","retryLimit"}
//
// The failure's error is "db_timeout: reservation <data.reservation_id>
// lock wait exceeded", a transient error as the message contract names it.
//
// Usage: node pgboss_worker.js CONFIG.json   (CONFIG: url, the database's
// postgres:// URL; schema (default pgboss); queue; queueOptions, given to
// createQueue, e.g. {"retryLimit":0})
//
// pg-boss 12 is an ES module and declares Node.js 22.12 or later; this
// script loads it with import(), which every Node.js this repository runs
// on has, and the driver's tests show that what it uses runs on Node.js 20
// (package.json's description says why that is enough).

const fs = require('node:fs');
const readline = require('node:readline');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

let succeed = false;
let poison = new Set();

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function reservation(job) {
  return job.data && job.data.reservation_id;
}

function failure(job) {
  return new Error(`db_timeout: reservation ${reservation(job)} lock wait exceeded`);
}

function seen(job) {
  return { id: job.id, name: job.name, data: job.data, retryCount: job.retryCount, retryLimit: job.retryLimit };
}

async function main() {
  const { PgBoss } = await import('pg-boss');
  // No supervision and no schedules: nothing but the commands below
  // writes the queue's rows, so that a test can show what changed them.
  const boss = new PgBoss({
    connectionString: config.url,
    schema: config.schema || 'pgboss',
    supervise: false,
    schedule: false,
  });
  boss.on('error', (err) => say({ event: 'error', error: String(err && err.stack) }));
  await boss.start();
  await boss.createQueue(config.queue, config.queueOptions || {});
  say({ event: 'ready' });

  let worker = null;

  // fetchAndFail takes want jobs with fetch() and fails each, refusing
  // to fail a job it was not asked to.
  async function fetchAndFail(ids) {
    const fetched = await boss.fetch(config.queue, { batchSize: ids.length, includeMetadata: true });
    const got = fetched.map((j) => j.id).sort();
    const want = [...ids].sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new Error(`fetch() took ${JSON.stringify(got)}, want ${JSON.stringify(want)}: the queue holds other ready jobs`);
    }
    // One fail() each, in the order sent: each is a transaction of its
    // own, so completed_on follows that order.
    const byID = new Map(fetched.map((j) => [j.id, j]));
    for (const id of ids) {
      await boss.fail(config.queue, id, failure(byID.get(id)));
    }
  }

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const c = JSON.parse(line);
    try {
      switch (c.cmd) {
        case 'send': {
          const ids = [];
          for (const j of c.jobs) {
            ids.push(await boss.send(config.queue, j.data, j.options || {}));
          }
          say({ event: 'sent', ids });
          break;
        }
        case 'failNow': {
          const ids = [];
          for (const j of c.jobs) {
            ids.push(await boss.send(config.queue, j.data, j.options || {}));
          }
          await fetchAndFail(ids);
          say({ event: 'failed', ids });
          break;
        }
        case 'fetch': {
          const fetched = await boss.fetch(config.queue, { batchSize: c.n });
          say({ event: 'fetched', ids: fetched.map((j) => j.id) });
          break;
        }
        case 'failNext':
          await fetchAndFail([c.id]);
          say({ event: 'failed', ids: [c.id] });
          break;
        case 'work':
          worker = await boss.work(config.queue, { pollingIntervalSeconds: 0.5, batchSize: 1, localConcurrency: 4 }, async ([job]) => {
            const saw = seen(job);
            if (!succeed || poison.has(reservation(job))) {
              say({ event: 'failing', ...saw });
              throw failure(job);
            }
            say({ event: 'completed', ...saw });
            return { ok: true };
          });
          say({ event: 'working' });
          break;
        case 'offWork':
          if (worker) await boss.offWork(config.queue, { wait: true });
          worker = null;
          say({ event: 'stopped' });
          break;
        case 'succeed':
          succeed = true;
          poison = new Set(c.poison || []);
          say({ event: 'succeeding' });
          break;
        case 'retry': {
          const res = await boss.retry(config.queue, c.id);
          say({ event: 'retried', id: c.id, affected: res.affected });
          break;
        }
        case 'delete': {
          const res = await boss.deleteJob(config.queue, c.id);
          say({ event: 'deleted', id: c.id, affected: res.affected });
          break;
        }
        case 'createQueue':
          await boss.createQueue(c.name, c.options || {});
          say({ event: 'created', id: c.name });
          break;
        case 'stored': {
          let data;
          try {
            data = JSON.stringify(JSON.parse(c.payload));
          } catch (err) {
            say({ event: 'stored', error: String(err) });
            break;
          }
          say({ event: 'stored', data });
          break;
        }
        case 'quit':
          await boss.stop({ graceful: true, wait: true });
          say({ event: 'closed' });
          process.exit(0);
          break;
        default:
          say({ event: 'error', error: `unknown command ${c.cmd}` });
      }
    } catch (err) {
      say({ event: 'error', cmd: c.cmd, id: c.id, error: String(err && err.stack) });
    }
  }
  // stdin closed without quit: the test went away.
  await boss.stop({ graceful: false, wait: true });
}

main().catch((err) => {
  say({ event: 'error', error: String(err && err.stack) });
  process.exit(1);
});
