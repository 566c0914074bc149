package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// stageCeilings measures, without a broker, what each stage of ingest can
// do alone on this machine: parsing the same letters (Go, one goroutine,
// as Ingest's collector does it), and storing pre-parsed letters with
// deadletter.Insert in transactions of 500 (PostgreSQL round trips and
// commit). With the bare consumer's rate they bound what a pipelined ingest
// could reach, and show which stage to speed up.
func stageCeilings(ctx context.Context, cfg *config, rep *report, queue string, baseRate, subjRate float64) error {
	n := cfg.IngestN
	msgs := make([]deadletter.Message, n)
	for i := range msgs {
		p := workerLetter(i)
		msgs[i] = deadletter.Message{Queue: queue, Body: p.Body, Headers: p.Headers, ContentType: p.ContentType,
			MessageID: p.MessageId, Timestamp: p.Timestamp}
	}
	classifier := deadletter.DefaultClassifier()
	letters := make([]deadletter.Letter, n)
	now := time.Now()
	start := time.Now()
	for i, m := range msgs {
		letters[i] = deadletter.Parse(m, classifier, now)
	}
	parseDur := time.Since(start)

	db, err := createDB(ctx, cfg.AdminURL, "stages")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	const batch = 500
	mon := startCPU()
	start = time.Now()
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := deadletter.Insert(ctx, tx, letters[lo:hi])
			return err
		})
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	insertDur := time.Since(start)
	rep.note("ingest stage Insert alone: %s in %s", mon.Stop(), fmtDuration(insertDur))
	parseRate := float64(n) / parseDur.Seconds()
	insertRate := float64(n) / insertDur.Seconds()
	rep.throughputInfo("1 ingest stage: deadletter.Parse alone (1 goroutine) vs bare", baseRate, parseRate, "msg/s")
	rep.throughputInfo("1 ingest stage: deadletter.Insert alone (tx of 500) vs bare", baseRate, insertRate, "msg/s")
	serial := 1 / (1/parseRate + 1/insertRate)
	rep.note("ingest: parse and store one after the other would cap ingest at %.0f msg/s before any broker work; Ingest "+
		"overlaps them (its collector parses while the writers store), so each stage alone bounds it; the subject reached %.0f",
		serial, subjRate)
	return nil
}
