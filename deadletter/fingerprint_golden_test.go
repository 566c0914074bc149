package deadletter

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/fingerprints.golden from today's encoder")

// goldenMessages are letters of every header shape the archive has met:
// the reference worker's, the fuzz seeds', every AMQP wire type, and narrow
// integers. A letter with a narrow header hashes its wire types (v2); every
// other keeps the v1 fingerprint it was archived with.
func goldenMessages() map[string]Message {
	msgs := map[string]Message{
		"bench worker letter": benchMessage(7),
		"every wire type": {Queue: "q.dlq", Body: []byte(testJob), Headers: roundTripHeaders(),
			MessageID: "m-1", Timestamp: time.Unix(1_796_040_000, 0)},
		"narrow ints in x-death": {Queue: "q.dlq", Body: []byte(testJob), MessageID: "m-2", Headers: amqp.Table{
			"x-death": []any{amqp.Table{"count": int32(2), "reason": "rejected", "queue": "q", "time": time.Unix(1_796_040_000, 0),
				"nested": amqp.Table{"f": float32(0.1), "b": uint8(7), "s": []any{int16(-3), uint16(3), uint32(1 << 31), int8(-1)}}}},
			"x-float32": float32(math.Inf(-1)),
		}},
		"no headers": {Queue: "q.dlq", Body: []byte("not json"), MessageID: "m-3"},
	}
	seeds := []struct {
		body                          []byte
		class, lastError, key, reason string
		count, shape                  int64
		messageID                     string
	}{
		{[]byte(testJob), "db_timeout", "context deadline exceeded", "x-custom", "rejected", 3, 0, "r-8421:v3"},
		{[]byte(`{"reservationId":"r-1"}`), "", "", "x-death", "expired", 1, 3, ""},
		{[]byte(`{}`), "a\x00b", "caf\xe9", "$bytes", "maxlen", -1, 1, "m\x00"},
		{[]byte{}, "", "", "", "", 0, 0, ""},
		{[]byte(`{}`), "3", `[{"errorClass":"ECONNREFUSED"}]`, "x-retries", "rejected", 1796041200000, 12, ""},
		{[]byte{0x1f, 0x8b}, "validation", "\xff\xfe", "$key:AA==", "delivery_limit", 1 << 62, 2, "\xff"},
		{[]byte(testJob), "x", "y", "k", "rejected", 5, 6, "m"},
	}
	for i, s := range seeds {
		msgs[fmt.Sprintf("fuzz seed %d", i)] = fuzzMessage(s.body, s.class, s.lastError, s.key, s.reason, s.count, s.shape, s.messageID)
	}
	return msgs
}

// TestFingerprintsAreStable pins the fingerprint and the stored header
// encoding of each golden letter. A change to either would store a copy
// redelivered after an upgrade a second time, beside the one captured
// before it.
func TestFingerprintsAreStable(t *testing.T) {
	t.Parallel()
	var got bytes.Buffer
	msgs := goldenMessages()
	for _, name := range slices.Sorted(maps.Keys(msgs)) {
		l := parse(msgs[name], nil, testIngested)
		fmt.Fprintf(&got, "%s\n  fingerprint %s\n  headers %s\n", name, hex.EncodeToString(l.Fingerprint[:]), l.Headers)
	}
	path := filepath.Join("testdata", "fingerprints.golden")
	if *updateGolden {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("fingerprints or header encoding changed; letters captured before and after would be stored twice.\ngot:\n%s\nwant:\n%s", got.Bytes(), want)
	}
}
