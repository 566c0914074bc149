package sourcetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// JobStoreHarness is one job-store driver (River, BullMQ) on one test's
// own queue. A job store keeps a failed job in place: capture reads it
// and never changes the store, so the queue cases of Run (acknowledging
// removes, Close returns, competing consumers share nothing) do not
// apply; what the ingest relies on instead is that every failed job is
// delivered whole, once per incarnation per source, and that reading
// leaves the store as it was. Two captures of the same job are one
// letter by the archive's fingerprint (job id and incarnation).
type JobStoreHarness struct {
	// Fail makes one job per payload that fails for good (discarded,
	// in the failed set), in order, and returns their ids.
	Fail func(t *testing.T, payloads [][]byte) []string
	// FailAgain has the job with id retried outside expiryctl and fail
	// for good again: a new incarnation of the same job.
	FailAgain func(t *testing.T, id string)
	// Open opens a source on the queue that holds at most prefetch
	// deliveries not yet acknowledged, following the store for jobs
	// that fail later; the suite closes it.
	Open func(t *testing.T, prefetch int) Source
	// Digest is a digest of everything the store keeps for the queue:
	// capture must not change it.
	Digest func(t *testing.T) string
	// Stored is the payload as the store keeps it, which capture must
	// deliver byte for byte, and whether the store can keep it at all:
	// River's args are jsonb, which normalises JSON and holds nothing
	// else. Nil: every payload is kept as given.
	Stored func(payload []byte) (kept []byte, ok bool)
}

// RunJobStore runs every job-store case against setup's harness, each on
// a fresh queue.
func RunJobStore(t *testing.T, setup func(t *testing.T) JobStoreHarness) {
	t.Run("DeliversEveryFailedJobWhole", func(t *testing.T) {
		h := setup(t)
		payloads := numbered(12)
		payloads[3] = []byte("{\"reservation_id\":\"r-\u00e9\u6f22\",\"note\":\"<&>\\\"'\"}")
		payloads[5] = []byte("not json \x01")
		payloads[7] = []byte(`{ "reservation_id" : "r-7", "b": 1,"a": [1, 2.50] }`)
		var kept [][]byte
		if h.Stored != nil {
			var storable [][]byte
			for _, p := range payloads {
				if k, ok := h.Stored(p); ok {
					storable, kept = append(storable, p), append(kept, k)
				}
			}
			payloads = storable
		} else {
			kept = payloads
		}
		ids := h.Fail(t, payloads)
		src := openJobs(t, h, 100)
		got := receiveJobs(t, src, len(ids))
		byID := map[string]deadletter.Message{}
		for _, d := range got {
			m := d.Message
			if !m.Stored || m.System == "" {
				t.Errorf("job %s: system %q, stored %v: a job store's letter names its system and is a stored job", m.MessageID, m.System, m.Stored)
			}
			if m.Native[deadletter.NativeJobID] != m.MessageID || m.Native[deadletter.NativeIncarnation] == "" {
				t.Errorf("job %s: native id %q, incarnation %q", m.MessageID, m.Native[deadletter.NativeJobID], m.Native[deadletter.NativeIncarnation])
			}
			if m.Queue != src.QueueName() {
				t.Errorf("job %s: queue %q, source says %q", m.MessageID, m.Queue, src.QueueName())
			}
			if _, dup := byID[m.MessageID]; dup {
				t.Errorf("job %s delivered twice", m.MessageID)
			}
			byID[m.MessageID] = m
		}
		for i, id := range ids {
			m, ok := byID[id]
			if !ok {
				t.Errorf("job %s (payload %d) was not delivered", id, i)
				continue
			}
			if string(m.Body) != string(kept[i]) {
				t.Errorf("job %s: payload %q, want %q as the store keeps it", id, m.Body, kept[i])
			}
			if m.Timestamp.IsZero() {
				t.Errorf("job %s: no time of failure", id)
			}
			l := deadletter.Parse(m, nil, time.Now())
			if l.Attempts < 1 || l.LastError == "" {
				t.Errorf("job %s: %d attempts, last error %q: the store's history was not read", id, l.Attempts, l.LastError)
			}
		}
	})

	t.Run("CaptureNeverChangesTheStore", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, numbered(6))
		before := h.Digest(t)
		src := openJobs(t, h, 100)
		got := receiveJobs(t, src, 6)
		if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		if err := src.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if after := h.Digest(t); after != before {
			t.Errorf("the store changed under capture:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("ReadingAgainDeliversTheSameLetters", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, numbered(5))
		first := fingerprints(receiveJobs(t, openJobs(t, h, 100), 5))
		second := fingerprints(receiveJobs(t, openJobs(t, h, 100), 5))
		if !maps.Equal(first, second) {
			t.Errorf("a second read gave other letters: the archive would store the jobs twice\nfirst  %v\nsecond %v", first, second)
		}
	})

	t.Run("AJobFailingAgainIsANewIncarnation", func(t *testing.T) {
		h := setup(t)
		ids := h.Fail(t, numbered(2))
		src := openJobs(t, h, 100)
		before := receiveJobs(t, src, 2)
		h.FailAgain(t, ids[0])
		again := receiveJobs(t, src, 1)[0].Message
		if again.MessageID != ids[0] {
			t.Fatalf("after job %s failed again, got job %s", ids[0], again.MessageID)
		}
		for _, d := range before {
			if d.Message.MessageID != ids[0] {
				continue
			}
			if d.Message.Native[deadletter.NativeIncarnation] == again.Native[deadletter.NativeIncarnation] {
				t.Errorf("job %s failed again with the same incarnation %q", ids[0], again.Native[deadletter.NativeIncarnation])
			}
			was, now := deadletter.Parse(d.Message, nil, time.Now()), deadletter.Parse(again, nil, time.Now())
			if was.Fingerprint == now.Fingerprint {
				t.Error("the second failure has the first's fingerprint: the archive would drop it as a copy")
			}
		}
	})

	t.Run("FollowingDeliversJobsThatFailLater", func(t *testing.T) {
		h := setup(t)
		src := openJobs(t, h, 100)
		if n, err := src.Ready(); err != nil || n != 0 {
			t.Errorf("Ready on an empty store = %d, %v; want 0", n, err)
		}
		ids := h.Fail(t, numbered(4))
		got := receiveJobs(t, src, 4)
		var gotIDs []string
		for _, d := range got {
			gotIDs = append(gotIDs, d.Message.MessageID)
		}
		slices.Sort(ids)
		slices.Sort(gotIDs)
		if !slices.Equal(ids, gotIDs) {
			t.Errorf("delivered %v, want %v", gotIDs, ids)
		}
		if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		if n, err := src.Ready(); err != nil || n != 0 {
			t.Errorf("Ready once all is delivered = %d, %v; want 0", n, err)
		}
	})

	t.Run("PrefetchBoundsWhatIsHeld", func(t *testing.T) {
		h := setup(t)
		h.Fail(t, numbered(15))
		src := openJobs(t, h, 5)
		got := receiveJobs(t, src, 5)
		select {
		case d := <-src.Deliveries():
			t.Errorf("delivery %d beyond a prefetch of 5 before any acknowledgement", d.Tag)
		case <-time.After(2 * time.Second):
		}
		if n, err := src.Ready(); err != nil || n != 10 {
			t.Errorf("Ready with 10 not yet delivered = %d, %v", n, err)
		}
		if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		receiveJobs(t, src, 5)
	})
}

// receiveJobs takes n deliveries from src, failing t when they do not come.
func receiveJobs(t *testing.T, src Source, n int) []deadletter.Delivery {
	t.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(wait)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				t.Fatalf("deliveries ended after %d of %d: %v", len(got), n, errOf(src))
			}
			got = append(got, d)
		case <-deadline:
			t.Fatalf("received %d of %d jobs in %s", len(got), n, wait)
		}
	}
	return got
}

// fingerprints maps each delivered job's id to its letter's fingerprint.
func fingerprints(ds []deadletter.Delivery) map[string][32]byte {
	out := make(map[string][32]byte, len(ds))
	for _, d := range ds {
		out[d.Message.MessageID] = deadletter.Parse(d.Message, nil, time.Now()).Fingerprint
	}
	return out
}

func openJobs(t *testing.T, h JobStoreHarness, prefetch int) Source {
	t.Helper()
	src := h.Open(t, prefetch)
	t.Cleanup(func() { _ = src.Close() })
	return src
}
