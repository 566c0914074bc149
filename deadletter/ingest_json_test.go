package deadletter_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

func TestIngestStatsJSONElapsedIsSeconds(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(deadletter.IngestStats{Received: 3, Stored: 2, Elapsed: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["elapsed_seconds"] != 1.5 || raw["received"] != 3.0 || raw["elapsed_ns"] != nil || raw["Elapsed"] != nil {
		t.Errorf("ingest stats JSON = %s, want elapsed_seconds 1.5 and no nanoseconds", b)
	}
}
