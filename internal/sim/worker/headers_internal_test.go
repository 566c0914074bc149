package worker

import (
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestPriorHistoryReadsTablesAndNodeJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	tables := []any{amqp.Table{"at": at, "error_class": "db_timeout", "error": "dial tcp: i/o timeout"}}
	tests := []struct {
		name string
		in   any
		want []any
	}{
		{"array of tables", tables, tables},
		{"JSON.stringify'd array", `[{"timestamp":1796041200000,"errorClass":"ETIMEDOUT","message":"connect ETIMEDOUT"},{"at":"2026-11-30T03:00:00.5Z","attempt":2.5}]`,
			[]any{amqp.Table{"timestamp": int64(1796041200000), "errorClass": "ETIMEDOUT", "message": "connect ETIMEDOUT"},
				amqp.Table{"at": "2026-11-30T03:00:00.5Z", "attempt": 2.5}}},
		{"JSON as a byte array", []byte(`[{"message":"x"}]`), []any{amqp.Table{"message": "x"}}},
		{"a string that is not a JSON array of objects", `[1, 2]`, []any{}},
		{"foreign entries dropped", []any{"x", tables[0]}, tables},
		{"missing", nil, []any{}},
	}
	for _, tt := range tests {
		got := priorHistory(amqp.Table{HeaderAttemptHistory: tt.in})
		if got == nil {
			got = []any{}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: priorHistory = %#v, want %#v", tt.name, got, tt.want)
		}
		// What the worker passes on must be publishable.
		if err := (amqp.Table{HeaderAttemptHistory: got}).Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
