#!/usr/bin/env bash
# scripts/demo.sh BIN runs `make demo`: the governed flow, each step as the
# person who would take it. EXPIRYCTL_DATABASE_URL reaches the demo database
# as its owner; the people's URLs differ only in the user.
set -euo pipefail
bin=$1
owner_url=$EXPIRYCTL_DATABASE_URL
# The demo's exchange and queues are named under a prefix of their own, so
# that a demo on a shared broker never touches the production queues
# (make demo DEMO_PREFIX=…; empty for the production names).
prefix=${DEMO_PREFIX-expiryctl-demo}
work_queue=${prefix:+$prefix.}reservation-expiry
as() { local who=$1; shift; EXPIRYCTL_DATABASE_URL=${owner_url/expiryctl_owner@/$who@} "$bin" "$@"; }
# The SQS incident is staged on the SQS-compatible server scripts/services.sh
# starts (goaws); any credentials do for it.
export AWS_ENDPOINT_URL_SQS=${AWS_ENDPOINT_URL_SQS:-http://127.0.0.1:4100} AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-demo} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-demo} AWS_EC2_METADATA_DISABLED=true
# The connections everybody's commands reach the queue systems through,
# by name: a letter records the name of its connection, never a server,
# and a replay resolves that name here (docs/configuration.md). Each
# person's own login to the archive is their EXPIRYCTL_DATABASE_URL.
# River's database is reached as the owner, who owns river_job there
# (docs/river.md names the least a replay login needs); the jobs table as
# the login granted only what its mapping names.
owner_login=${owner_url#*://}
owner_login=${owner_login%%[:@]*}
jobs_login=expiryctl_demo_jobs_rw
demo_db=${owner_url##*/}
demo_db=${demo_db%%\?*}
EXPIRYCTL_CONFIG=$(mktemp)
export EXPIRYCTL_CONFIG
cat > "$EXPIRYCTL_CONFIG" <<EOF
current-context: demo
contexts:
  demo:
    connections:
      river:
        system: river
        url: postgres://$owner_login@127.0.0.1:5432/${demo_db}_river?sslmode=disable
      jobs:
        system: jobtable
        url: postgres://$jobs_login@127.0.0.1:5432/${demo_db}_jobs?sslmode=disable
      redis:
        system: bullmq
        url: redis://127.0.0.1:6379/0
      sqs:
        system: sqs
        region: $AWS_REGION
        endpoint: $AWS_ENDPOINT_URL_SQS
EOF

# drain_work_queue runs the reference worker until the work queue is empty
# (at most 60 s), so that the replayed jobs are done and the next demo finds
# the queue idle.
drain_work_queue() {
	"$bin" worker --prefix "$prefix" >/dev/null 2>&1 &
	local worker=$! left
	for _ in $(seq 60); do
		left=$(rabbitmqctl -q list_queues name messages 2>/dev/null | awk -v q="$work_queue" '$1 == q { print $2 }')
		[[ ${left:-0} == 0 ]] && break
		sleep 1
	done
	kill -INT "$worker" 2>/dev/null || true
	wait "$worker" 2>/dev/null || true
	echo "work queue $work_queue holds ${left:-0} messages"
}

# A queue left busy by an earlier demo's replay is drained first.
drain_work_queue >/dev/null
# The demo's deployment is named (scripts/services.sh bootstrapped it): the
# cluster also serves other expiryctl databases, and its groups are its own.
"$bin" migrate --deployment demo
"$bin" access grant alice operator ingester
"$bin" access grant bob approver
"$bin" access grant carol approver
"$bin" access grant audrey auditor
# Two admins: a jobs table's mapping decides which rows expiryctl may change,
# so one proposes it and another approves it.
"$bin" access grant dana admin
"$bin" access grant erin admin
# The owner stages the incident (it creates the reservation tables) and
# captures the dead letters.
staged=$(mktemp)
# A step that fails ends the demo; a worker it started must not outlive it.
cleanup() {
	rm -f "$staged" "${worker_log:-}" "$EXPIRYCTL_CONFIG"
	if [[ -n ${worker:-} ]]; then
		kill -INT "$worker" 2>/dev/null || true
	fi
}
trap cleanup EXIT
# The jobs table's capture and replay login is a plain one (scripts/services.sh
# makes it: the owner has no CREATEROLE), which the demo grants exactly
# jobtable.GrantSQL's statements on the table it owns.
"$bin" demo --prefix "$prefix" --sqs --river --job-table --job-table-login "$jobs_login" 2> >(tee "$staged" >&2)
# This run's letters only: the demo database keeps earlier runs', whose
# queues may have had another prefix.
run_id=$(sed -n 's/^this run (\([^)]*\)) staged.*/\1/p' "$staged")
[[ -n $run_id ]] || { echo "demo: could not read this run's id from expiryctl demo" >&2; exit 1; }
# The River incident is in database expiryctl_demo_river beside the demo's
# (scripts/services.sh creates it for the owner); the demo names its queue.
river_queue=$(sed -n 's/^  expiryctl worker --river-queue \(river:[^ ]*\).*/\1/p' "$staged")
[[ -n $river_queue ]] || { echo "demo: could not read the River queue from expiryctl demo" >&2; exit 1; }
# The jobs table is in database expiryctl_demo_jobs; the demo prints its
# mapping, its name and its poller's reference.
job_tables=$(sed -n "s/^  expiryctl policy set job_tables='\(.*\)' --why.*/\1/p" "$staged")
jobs_table=$(sed -n 's/^  expiryctl dlq ingest --queue \(jobtable:[^ ]*\).*/\1/p' "$staged")
jobs_poller=$(sed -n 's/^  expiryctl worker --job-table \(jobtable:[^ ]*\).*/\1/p' "$staged")
[[ -n $job_tables && -n $jobs_table && -n $jobs_poller ]] || { echo "demo: could not read the jobs table from expiryctl demo" >&2; exit 1; }
echo
echo "== alice requests a replay of five transient failures"
# The database failed over and is back: the worker that failed these jobs was
# never at fault, so alice says the same handler may take them again; bob
# sees her reason.
out=$(as alice replay request --reason transient-exhausted --search "$run_id" --max 5 --rate 20 --why "demo: INC-1 database failover" \
	--same-handler-ok "INC-1: the database failed over; the worker was never at fault" -o json)
id=$(printf '%s' "$out" | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -1)
as alice replay show "$id" --sample 5
echo
echo "== alice may not approve it, even calling herself bob: she is no approver, and it is her own request"
if as alice --actor bob replay approve "$id" --why "mine" 2>&1; then
	echo "demo: alice approved her own request" >&2
	exit 1
fi
echo
echo "== bob approves exactly the cohort he was shown"
as bob replay approve "$id" --why "checked the cohort"
echo
echo "== alice runs it; the reference worker takes the replayed jobs (same idempotency keys), and the"
echo "   policy's outcome query watches each reservation reach its terminal state"
"$bin" worker --prefix "$prefix" >/dev/null 2>&1 &
worker=$!
as alice replay run "$id"
kill -INT "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
as alice replay show "$id" | grep -E '^  (items|outcomes) '
echo
echo "== the work queue is left idle"
drain_work_queue
echo
echo "== the SQS incident beside it: the same archive, the same four-eyes"
as alice dlq list --search "$run_id-sqs"
# The worker's letters say which queue they came from (x-original-queue);
# SQS shows no consumers, so alice says why the handler may take them.
out=$(as alice replay request --reason transient-exhausted --search "$run_id-sqs-worker" --max 10 --rate 20 --why "demo: INC-2 SQS worker database outage" \
	--same-handler-ok "INC-2: the database is back; SQS shows no consumers to check" -o json)
sqs_id=$(printf '%s' "$out" | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -1)
as alice replay show "$sqs_id" --sample 5
as bob replay approve "$sqs_id" --why "checked the SQS cohort"
"$bin" worker --sqs-queue "sqs://${prefix:+$prefix-}reservation-expiry" >/dev/null 2>&1 &
worker=$!
as alice replay run "$sqs_id"
kill -INT "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=
as alice replay show "$sqs_id" | grep -E '^  (items|outcomes) '
echo
echo "== the River incident beside it: jobs River discarded, retried in place"
as alice dlq list --search "$run_id-river"
# River keeps no headers and shows no workers: the letters' queue is where
# each job is retried (no --routing-key), and alice says why the handler
# may take them again.
out=$(as alice replay request --reason transient-exhausted --search "$run_id-river" --max 10 --rate 20 --why "demo: INC-3 River worker deadlocks" \
	--same-handler-ok "INC-3: the deadlock is fixed; River shows no workers to check" -o json)
river_id=$(printf '%s' "$out" | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -1)
as alice replay show "$river_id" --sample 5
as bob replay approve "$river_id" --why "checked the River cohort"
# alice's run retries each job in River's database through the connection
# its letters name (river, as the owner); the worker works them as the
# same login.
export EXPIRYCTL_RIVER_USER=$owner_login
"$bin" worker --river-queue "$river_queue" >/dev/null 2>&1 &
worker=$!
as alice replay run "$river_id"
kill -INT "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=
as alice replay show "$river_id" | grep -E '^  (items|outcomes) '
echo
echo "== a team's own jobs table: its mapping goes through four-eyes, then the same replay"
# Until two admins approve the mapping, neither capture nor replay may
# touch the table (rule job-table-mapping).
out=$(as dana policy set "job_tables=$job_tables" --why "demo: INC-4 capture the reservation_expiry_jobs table")
change=$(printf '%s' "$out" | sed -n 's/^policy change \([0-9]*\) proposed$/\1/p')
[[ -n $change ]] || { echo "demo: dana's mapping was not proposed: $out" >&2; exit 1; }
echo "$out"
as erin policy approve "$change" --why "checked the columns against the table"
# Capture and replay reach the table as the login granted only what the
# mapping names; capture changes nothing there.
as alice dlq ingest --queue "$jobs_table"
as alice dlq list --search "$run_id-jobtable"
# A table shows no workers and no versions: alice says why the poller may
# take the rows again.
out=$(as alice replay request --reason transient-exhausted --search "$run_id-jobtable" --max 10 --rate 20 --why "demo: INC-4 jobs database statement timeouts" \
	--same-handler-ok "INC-4: the timeouts are fixed; a jobs table shows no workers to check" -o json)
jobs_id=$(printf '%s' "$out" | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -1)
as alice replay show "$jobs_id" --sample 5
as bob replay approve "$jobs_id" --why "checked the jobs table cohort"
# The team's poller works the rows as the table's owner, who may update
# the columns expiryctl's login may not; alice's run puts the rows back
# as expiryctl's login.
"$bin" worker --job-table "$jobs_poller" >/dev/null 2>&1 &
worker=$!
as alice replay run "$jobs_id"
kill -INT "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=
as alice replay show "$jobs_id" | grep -E '^  (items|outcomes) '
echo
echo "== the BullMQ incident beside it: a Node.js service's failed jobs, retried in place"
# The team's Node.js service (e2e/node/demo_bullmq.js, on the packages
# scripts/node.sh installs) fails its expiry jobs while its database times
# out. It uses BullMQ's defaults, prefix bull on Redis database 0, as a
# real service would (and Redis Cluster has no other database); the queue's
# name keeps the demo apart, as the prefix does on a shared RabbitMQ.
node_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../e2e/node" && pwd)
bull_queue=${prefix:+$prefix-}reservation-expiry
bullmq=bullmq://127.0.0.1:6379/0/bull/$bull_queue
node "$node_dir/demo_bullmq.js" stage "$bull_queue" "$run_id"
as alice dlq ingest --queue "$bullmq"
as alice dlq list --search "$run_id-bullmq"
# The fixed service is deployed before the request, so that the request
# shows its Worker connected (BullMQ names each Worker's connection, but
# no version: alice says why the handler may take the jobs again).
worker_log=$(mktemp)
node "$node_dir/demo_bullmq.js" work "$bull_queue" >/dev/null 2>"$worker_log" &
worker=$!
for _ in $(seq 100); do
	grep -q '^worker working' "$worker_log" && break
	kill -0 "$worker" 2>/dev/null || { cat "$worker_log" >&2; exit 1; }
	sleep 0.1
done
out=$(as alice replay request --reason transient-exhausted --search "$run_id-bullmq" --max 10 --rate 20 --why "demo: INC-5 BullMQ service database timeouts" \
	--same-handler-ok "INC-5: the timeouts are fixed; BullMQ workers name no version" -o json)
bull_id=$(printf '%s' "$out" | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -1)
as alice replay show "$bull_id" --sample 5
as bob replay approve "$bull_id" --why "checked the BullMQ cohort"
as alice replay run "$bull_id"
kill -INT "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=
rm -f "$worker_log"
as alice replay show "$bull_id" | grep -E '^  (items|outcomes) '
echo
echo "== audrey verifies the trail, and that the governance tables match it"
as audrey audit verify --reconcile
