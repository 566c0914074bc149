package replay

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// BenchmarkReplayHeaders is what the runner pays per item to rebuild a
// dead letter's headers: the bookkeeping cut out of the stored JSON, the
// rest decoded with its wire types, the replay's own headers added. The
// stored headers are a reference worker's letter as capture keeps them:
// its error headers, a two-entry attempt history and one x-death entry.
func BenchmarkReplayHeaders(b *testing.B) {
	stored, err := os.ReadFile("testdata/worker_letter_headers.json")
	if err != nil {
		b.Fatal(err)
	}
	stored = bytes.TrimSpace(stored)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	req := Request{ID: 7, ReviewedBy: "bob"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := replayHeaders(stored, req, "alice", 42, 0, at, nil); err != nil {
			b.Fatal(err)
		}
	}
}
