package metrics

import "github.com/prometheus/client_golang/prometheus"

// namespace prefixes every metric of expiryctl's own.
const namespace = "expiryctl"

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

// The archive's metrics.
var (
	waitingDesc = newDesc("dead_letters_waiting",
		"Dead letters waiting for a decision (dead, or held by an open replay or discard request), by reason category.",
		"category")
	ingestedDesc = newDesc("dead_letters_ingested_total",
		"Dead letters the archive captured, by reason category, including those replayed or discarded since; its rate is the dead-letter arrival rate.",
		"category")
	byStatusDesc = newDesc("dead_letters",
		"Dead letters in the archive by reason category and status: dead (waiting), in_request (held by an open request), replayed or discarded.",
		"category", "status")
	oldestDesc = newDesc("dead_letter_oldest_waiting_age_seconds",
		"Time since the oldest waiting dead letter of the reason category was dead-lettered.",
		"category")
	classesDesc = newDesc("dead_letters_waiting_by_error_class",
		"Dead letters waiting for a decision, by error class: the most frequent classes by name, the rest summed as \"other\", letters with none as \"none\".",
		"error_class")
	overdueDesc = newDesc("overdue_holds",
		"Waiting dead letters whose hold deadline (due_at) has passed and that a retry can fix: reservations that should have expired and have not. The permanent categories' are in expiryctl_overdue_letters{permanent=\"true\"}.")
	overdueByCategoryDesc = newDesc("overdue_letters",
		"Waiting dead letters past their hold deadline by reason category; permanent is true for the categories no retry fixes (conflict, validation, malformed, not-found), which page nobody.",
		"category", "permanent")
	latenessDesc = newDesc("overdue_hold_lateness_seconds",
		"How far past their deadline the overdue holds are: stat is p50 (the median), p99 or max.",
		"stat")
)

// The reservation database's own word, from the policy's gap query.
var (
	holdsUpDesc = newDesc("reservation_gap_query_up",
		"1 when the last snapshot read the policy's gap query from the reservation database, 0 when it failed; absent when the policy sets none.")
	holdsPastDesc = newDesc("reservation_holds_past_deadline",
		"Holds still held past their deadline in the reservation database itself, whether or not a dead letter speaks for them.")
	holdsLateDesc = newDesc("reservation_oldest_hold_past_deadline_seconds",
		"How far past its deadline the oldest hold still held in the reservation database is; 0 when none is.")
)

// The live queues' metrics, from RabbitMQ's management API.
var (
	managementUpDesc = newDesc("rabbitmq_management_up",
		"1 when the last snapshot read RabbitMQ's management API, 0 when it could not; the queue metrics are absent then.")
	readyDesc = newDesc("rabbitmq_queue_messages_ready",
		"Messages waiting in the queue for a consumer (in a retry queue: scheduled, waiting out their backoff).",
		"queue", "role")
	unackedDesc = newDesc("rabbitmq_queue_messages_unacked",
		"Messages delivered to a consumer and not yet acknowledged (in flight).",
		"queue", "role")
	consumersDesc = newDesc("rabbitmq_queue_consumers",
		"Consumers of the queue; absent for a system that shows nobody consuming its queues.",
		"queue", "role")
	headAgeDesc = newDesc("rabbitmq_queue_head_message_age_seconds",
		"How long the message at the head of the queue had waited when the snapshot was taken; absent when the broker does not know (the message has no timestamp) or the queue is empty.",
		"queue", "role")
	headAgeEstimatedDesc = newDesc("rabbitmq_queue_head_message_age_estimated_seconds",
		"Where the broker reports no head timestamp (a quorum queue): the queue's ready messages over its ack rate, the wait of a queue drained at that rate, standing in for the head message's age; absent with nothing ready or nothing acked.",
		"queue", "role")
	rateDesc = newDesc("rabbitmq_queue_message_rate_per_second",
		"Messages per second over the broker's sampling window, by operation: publish, deliver or ack.",
		"queue", "role", "operation")
)

// The replays' metrics.
var (
	requestsDesc = newDesc("replay_requests",
		"Open replay and discard requests by status: pending, approved, running, halted (a halted run needs a fresh approval).",
		"status")
	itemsDesc = newDesc("replay_items",
		"Items of the open requests by their request's status and their own state (pending, publishing, confirmed, failed, skipped).",
		"request_status", "state")
	requestItemsDesc = newDesc("replay_request_items",
		"Items of each open request (the newest 50 open requests) by the request's status and the item's state: which request is stuck, and where.",
		"request", "status", "state")
	requestOutcomesDesc = newDesc("replay_request_outcomes",
		"Confirmed items of each open request (the newest 50) by what became of them: came_back (died again and captured), settled (terminal by the outcome query), unknown (neither).",
		"request", "status", "fate")
	publishedDesc = newDesc("replay_items_published_total",
		"Replayed items the broker confirmed, of every request ever run.")
	haltsDesc = newDesc("replay_halts_total",
		"Replay runs a stop condition halted, of every request ever run, by condition (failure-ratio, queue-depth, redead-ratio, eligibility, …).",
		"condition")
)

// The audit trail's metrics.
var (
	auditRowsDesc = newDesc("audit_rows",
		"Rows in the audit trail: its last seq.")
	auditCheckpointedDesc = newDesc("audit_checkpointed_rows",
		"Rows the newest signed checkpoint covers; the rows after them are protected by the hash chain alone.")
	auditCheckpointTimeDesc = newDesc("audit_last_checkpoint_timestamp_seconds",
		"When the newest signed checkpoint was stored, in seconds since the epoch; 0 when none was.")
)

// The exporter's own metrics, which say how fresh the others are.
var (
	snapshotAgeDesc = newDesc("metrics_snapshot_age_seconds",
		"Time since the snapshot every other expiryctl metric comes from was taken.")
	snapshotDurationDesc = newDesc("metrics_snapshot_duration_seconds",
		"How long taking the last successful snapshot took.")
	snapshotsDesc = newDesc("metrics_snapshots_total",
		"Snapshots taken successfully since the exporter started.")
	snapshotErrorsDesc = newDesc("metrics_snapshot_errors_total",
		"Snapshots that failed since the exporter started; the previous snapshot is served meanwhile.")
	availableDesc = newDesc("metrics_signal_available",
		"1 when the last snapshot could read the signal, 0 when its metrics are left out: error_classes, overdue_holds, holds_at_source, live_queues, replay, audit.",
		"signal")
)

// exporterDescs are the metrics an Exporter may export.
var exporterDescs = []*prometheus.Desc{
	waitingDesc, ingestedDesc, byStatusDesc, oldestDesc, classesDesc, overdueDesc, overdueByCategoryDesc, latenessDesc,
	holdsUpDesc, holdsPastDesc, holdsLateDesc,
	managementUpDesc, readyDesc, unackedDesc, consumersDesc, headAgeDesc, headAgeEstimatedDesc, rateDesc,
	requestsDesc, itemsDesc, requestItemsDesc, requestOutcomesDesc, publishedDesc, haltsDesc,
	auditRowsDesc, auditCheckpointedDesc, auditCheckpointTimeDesc,
	snapshotAgeDesc, snapshotDurationDesc, snapshotsDesc, snapshotErrorsDesc, availableDesc,
}
