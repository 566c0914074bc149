'use strict';
// demo_bullmq.js is make demo's BullMQ incident (scripts/demo.sh): a team's
// Node.js service whose BullMQ Worker expires reservations. It lives here,
// beside node_modules, so that node finds the pinned bullmq and pg with no
// NODE_PATH, installed by the same scripts/node.sh and lockfile as the
// interop tests.
//
//   node demo_bullmq.js stage QUEUE RUN_ID
//       seeds four held reservations r-RUN_ID-bullmq-*, past their
//       deadline, adds an expiry job for each (attempts: 2), and runs a
//       Worker whose database times out until BullMQ has failed them all;
//       it refuses a queue that still holds jobs a Worker would take.
//   node demo_bullmq.js work QUEUE
//       the fixed Worker, until SIGINT or SIGTERM: it expires each job's
//       reservation exactly once, as expiryctl's Go reference worker does
//       (internal/sim/worker/expire.go, ExpireOnce), and prints a line per
//       job.
//
// Redis is REDIS_HOST:REDIS_PORT database REDIS_DB (127.0.0.1:6379, 0) and
// the prefix BULLMQ_PREFIX (BullMQ's own, bull; a test gives its own); the
// reservations are in the PostgreSQL that EXPIRYCTL_DATABASE_URL names.

const { Queue, Worker, UnrecoverableError, DelayedError } = require('bullmq');
const { Pool } = require('pg');

const [mode, queueName, runID] = process.argv.slice(2);
const connection = {
  host: process.env.REDIS_HOST || '127.0.0.1',
  port: Number(process.env.REDIS_PORT || 6379),
  db: Number(process.env.REDIS_DB || 0),
};
const prefix = process.env.BULLMQ_PREFIX || 'bull';
const jobs = 4;

function die(msg) {
  process.stderr.write(`demo_bullmq.js: ${msg}\n`);
  process.exit(1);
}

if (!queueName || !['stage', 'work'].includes(mode) || (mode === 'stage' && !runID)) {
  die('usage: node demo_bullmq.js stage QUEUE RUN_ID | work QUEUE');
}
if (!process.env.EXPIRYCTL_DATABASE_URL) die('EXPIRYCTL_DATABASE_URL names no reservations database');
const db = new Pool({ connectionString: process.env.EXPIRYCTL_DATABASE_URL, max: 4 });

async function stage() {
  const queue = new Queue(queueName, { connection, prefix });
  const live = await queue.getJobCountByTypes('wait', 'paused', 'prioritized', 'active', 'delayed');
  if (live > 0) {
    die(`BullMQ queue ${queueName} holds ${live} jobs a Worker would take, and the demo needs it idle: ` +
      `run node demo_bullmq.js work ${queueName} until they are done`);
  }
  const due = new Date(Date.now() - 60_000);
  const ids = Array.from({ length: jobs }, (_, i) => `r-${runID}-bullmq-${i}`);
  // As the other incidents seed theirs (internal/sim/demo, seedReservations).
  await db.query(`INSERT INTO reservations.reservations (id, status, version, hold_until, units)
    SELECT unnest($1::text[]), 'held', 4, $2, 1`, [ids, due]);

  let failed = 0;
  const done = new Promise((resolve) => {
    const worker = new Worker(queueName, async (job) => {
      throw new Error(`db_timeout: reservation ${job.data.reservation_id} lock wait exceeded`);
    }, { connection, prefix, concurrency: jobs });
    worker.on('failed', (job) => {
      if (job && job.attemptsMade >= job.opts.attempts && ++failed === jobs) resolve(worker);
    });
  });
  for (const id of ids) {
    await queue.add('reservation_expiry', {
      reservation_id: id, expected_version: 4, hold_until: due.toISOString().replace(/\.\d+Z$/, 'Z'),
      idempotency_key: `expire:${id}:v4`,
    }, { attempts: 2 });
  }
  const worker = await done;
  await worker.close();
  await queue.close();
  process.stderr.write(`staged on BullMQ: queue ${queueName} (prefix ${prefix}, Redis ${connection.host}:${connection.port} db ${connection.db}) ` +
    `failed ${jobs} jobs r-${runID}-bullmq-* after 2 attempts each (db_timeout)\n`);
}

// expireOnce is ExpireOnce's transaction, statement for statement.
async function expireOnce(job) {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    const key = await c.query(`INSERT INTO reservations.processed_jobs (idempotency_key, reservation_id, outcome)
      VALUES ($1, $2, 'expired') ON CONFLICT (idempotency_key) DO NOTHING`, [job.idempotency_key, job.reservation_id]);
    if (key.rowCount === 0) {
      await c.query('COMMIT');
      return { outcome: 'duplicate' };
    }
    const r = await c.query(`SELECT status, version, units, extract(epoch FROM greatest(hold_until - now(), interval '0')) AS wait
      FROM reservations.reservations WHERE id = $1 FOR UPDATE`, [job.reservation_id]);
    let result;
    if (r.rowCount === 0) {
      result = { permanent: `not_found: reservation ${job.reservation_id} does not exist` };
    } else if (r.rows[0].status !== 'held') {
      await c.query(`UPDATE reservations.processed_jobs SET outcome = 'skipped' WHERE idempotency_key = $1`, [job.idempotency_key]);
      result = { outcome: 'skipped' };
    } else if (Number(r.rows[0].version) !== Number(job.expected_version)) {
      result = { permanent: `version_conflict: reservation ${job.reservation_id} is held at version ${r.rows[0].version}, the job expected ${job.expected_version}` };
    } else if (Number(r.rows[0].wait) > 0) {
      result = { wait: Number(r.rows[0].wait) * 1000 };
    } else {
      await c.query(`UPDATE reservations.reservations SET status = 'expired', version = version + 1, expired_at = now() WHERE id = $1`, [job.reservation_id]);
      await c.query(`INSERT INTO reservations.capacity_releases (reservation_id, idempotency_key, units) VALUES ($1, $2, $3)`,
        [job.reservation_id, job.idempotency_key, r.rows[0].units]);
      result = { outcome: 'expired' };
    }
    await c.query(result.outcome ? 'COMMIT' : 'ROLLBACK');
    return result;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

async function work() {
  const worker = new Worker(queueName, async (job, token) => {
    const r = await expireOnce(job.data);
    if (r.permanent) throw new UnrecoverableError(r.permanent);
    if (r.wait) {
      // Not due: back at its deadline, spending no attempt.
      await job.moveToDelayed(Date.now() + Math.ceil(r.wait), token);
      throw new DelayedError();
    }
    console.log(`${r.outcome} ${job.data.reservation_id} (BullMQ job ${job.id})`);
  }, { connection, prefix, concurrency: 4 });
  worker.on('failed', (job, err) => job && console.log(`failed ${job.data.reservation_id} (BullMQ job ${job.id}): ${err.message}`));
  worker.on('error', (err) => process.stderr.write(`demo_bullmq.js: ${err}\n`));
  await worker.waitUntilReady();
  console.error(`worker working BullMQ queue ${queueName} (prefix ${prefix}); Ctrl-C stops it`);
  await new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await worker.close();
}

(mode === 'stage' ? stage() : work())
  .then(() => db.end())
  .catch((err) => die(String(err && err.stack ? err.stack : err)));
