package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestLettersBackAfterAReplay seeds an archive in which replay request 7
// put three jobs back that died again, request 9 one, and other letters
// came from no replay: `dlq list --request` finds exactly a request's, and
// the summary counts them per request, latest request first.
func TestLettersBackAfterAReplay(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	from := func(req int64, l deadletter.Letter) deadletter.Letter {
		l.ReplayRequestID, l.ReplayCount = &req, 1
		return l
	}
	q := "reservation-expiry.dlq"
	seed(t, db.Pool,
		seedLetter(1, deadletter.TransientExhausted, q), seedLetter(2, deadletter.Validation, q),
		from(7, seedLetter(3, deadletter.TransientExhausted, q)), from(7, seedLetter(4, deadletter.Validation, q)),
		from(9, seedLetter(5, deadletter.TransientExhausted, q)), from(7, seedLetter(6, deadletter.TransientExhausted, q)),
		seedLetter(7, deadletter.TransientExhausted, q))
	archive := deadletter.NewArchive(db.Pool, "oncall")

	page, err := archive.List(ctx, deadletter.Filter{ReplayRequest: 7}, nil, 50)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Rows {
		if r.ReplayRequestID == nil || *r.ReplayRequestID != 7 {
			t.Errorf("letter %d (%s) is not back after request 7: %v", r.ID, r.ReservationID, r.ReplayRequestID)
		}
		got = append(got, r.ReservationID)
	}
	if len(got) != 3 || got[0] != "r-6" || got[1] != "r-4" || got[2] != "r-3" {
		t.Fatalf("--request 7 lists %v, want r-6, r-4, r-3 (newest first)", got)
	}
	page, err = archive.List(ctx, deadletter.Filter{ReplayRequest: 7, Categories: []deadletter.Category{deadletter.Validation}}, nil, 50)
	if err != nil || len(page.Rows) != 1 || page.Rows[0].ReservationID != "r-4" {
		t.Fatalf("--request 7 --reason validation = %+v, %v", page.Rows, err)
	}
	page, err = archive.List(ctx, deadletter.Filter{ReplayRequest: 8}, nil, 50)
	if err != nil || len(page.Rows) != 0 {
		t.Fatalf("--request 8 = %+v, %v: no letter came back after it", page.Rows, err)
	}

	s, err := archive.Signals(ctx, deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []deadletter.RequestRedead{
		{RequestID: 9, Letters: 1, Waiting: 1, LastDeadLetteredAt: baseTime.Add(5 * time.Minute)},
		{RequestID: 7, Letters: 3, Waiting: 3, LastDeadLetteredAt: baseTime.Add(6 * time.Minute)},
	}
	if len(s.Redead) != len(want) || s.Redead[0] != want[0] || s.Redead[1] != want[1] {
		t.Fatalf("redead by request = %+v, want %+v", s.Redead, want)
	}
	// Bounded, only the letters of the window count.
	s, err = archive.Signals(ctx, deadletter.SignalsOptions{Since: baseTime.Add(4 * time.Minute)})
	if err != nil || len(s.Redead) != 2 || s.Redead[1].RequestID != 7 || s.Redead[1].Letters != 2 {
		t.Fatalf("redead since minute 4 = %+v, %v: want request 7's letters of minutes 4 and 6", s.Redead, err)
	}
	s, err = archive.Signals(ctx, deadletter.SignalsOptions{Until: baseTime.Add(3 * time.Minute)})
	if err != nil || len(s.Redead) != 0 || s.Redead == nil {
		t.Fatalf("redead before minute 3 = %#v, %v: want an empty list", s.Redead, err)
	}
}
