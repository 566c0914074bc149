package worker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
)

func TestDecodeJob(t *testing.T) {
	t.Parallel()
	holdUntil := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	want := worker.Job{ReservationID: "r-8421", ExpectedVersion: 3, HoldUntil: holdUntil, IdempotencyKey: "expire:r-8421:v3", Attempt: 2}

	tests := []struct {
		name      string
		body      string
		want      worker.Job
		wantClass string
		// wantText lists fragments the error must contain.
		wantText []string
	}{
		{name: "snake_case", want: want,
			body: `{"reservation_id": "r-8421", "expected_version": 3, "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "expire:r-8421:v3", "attempt": 2}`},
		{name: "camelCase from Node.js", want: want,
			body: `{"reservationId": "r-8421", "expectedVersion": 3, "holdUntil": "2026-11-30T12:20:00Z", "idempotencyKey": "expire:r-8421:v3", "attempt": 2}`},
		{name: "version as a string", want: worker.Job{ReservationID: "r-8421", ExpectedVersion: 3, HoldUntil: holdUntil, IdempotencyKey: "expire:r-8421:v3"},
			body: `{"reservationId": "r-8421", "expectedVersion": "3", "holdUntil": "2026-11-30T12:20:00Z", "idempotencyKey": "expire:r-8421:v3"}`},
		{name: "both spellings agreeing", want: worker.Job{ReservationID: "r-8421", ExpectedVersion: 3, HoldUntil: holdUntil, IdempotencyKey: "expire:r-8421:v3"},
			body: `{"reservation_id": "r-8421", "reservationId": "r-8421", "expected_version": 3, "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "expire:r-8421:v3"}`},
		{name: "missing fields", wantClass: worker.ClassValidation,
			body:     `{"reservation_id": "r-1", "hold_until": "2026-11-30T12:20:00Z"}`,
			wantText: []string{"missing expected_version", "missing idempotency_key"}},
		{name: "null counts as missing", wantClass: worker.ClassValidation,
			body:     `{"reservation_id": null, "expected_version": 1, "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "k"}`,
			wantText: []string{"missing reservation_id"}},
		{name: "wrong types", wantClass: worker.ClassValidation,
			body:     `{"reservation_id": 42, "expected_version": -1, "hold_until": "tomorrow", "idempotency_key": ""}`,
			wantText: []string{"reservation_id must be a string", "expected_version must be a non-negative integer", "hold_until must be an RFC 3339 time", "idempotency_key is empty"}},
		{name: "spellings disagreeing", wantClass: worker.ClassValidation,
			body:     `{"reservation_id": "r-1", "reservationId": "r-2", "expected_version": 1, "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "k"}`,
			wantText: []string{"reservation_id and reservationId disagree"}},
		{name: "not JSON", body: `expire r-8421 please`, wantClass: worker.ClassMalformed},
		{name: "binary", body: "\x00\x01\xff\xfe", wantClass: worker.ClassMalformed, wantText: []string{"binary"}},
		{name: "JSON array", body: `[{"reservation_id": "r-1"}]`, wantClass: worker.ClassMalformed},
		{name: "JSON null", body: `null`, wantClass: worker.ClassMalformed},
		{name: "trailing garbage", body: `{"reservation_id": "r-1"} {}`, wantClass: worker.ClassMalformed},
		{name: "empty", body: ``, wantClass: worker.ClassMalformed, wantText: []string{"empty body"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := worker.DecodeJob([]byte(tt.body))
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("DecodeJob: %v", err)
				}
				if got.ReservationID != tt.want.ReservationID || got.ExpectedVersion != tt.want.ExpectedVersion ||
					!got.HoldUntil.Equal(tt.want.HoldUntil) || got.IdempotencyKey != tt.want.IdempotencyKey || got.Attempt != tt.want.Attempt {
					t.Errorf("DecodeJob = %+v, want %+v", got, tt.want)
				}
				return
			}
			var jobErr *worker.JobError
			if !errors.As(err, &jobErr) || jobErr.Class != tt.wantClass || !jobErr.Permanent {
				t.Fatalf("DecodeJob error = %v, want permanent %s", err, tt.wantClass)
			}
			for _, frag := range tt.wantText {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q does not mention %q", err, frag)
				}
			}
		})
	}
}
