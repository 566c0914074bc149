package deadletter

import (
	"testing"
	"unicode/utf8"
)

// FuzzJobMembersAsEncodingJSON holds the one-pass member reader to what
// encoding/json's map gave before it: for every body, the same members,
// and a body it cannot read is one encoding/json reads the same way.
func FuzzJobMembersAsEncodingJSON(f *testing.F) {
	for _, body := range []string{
		testJob,
		`{"reservationId":"r-1","expectedVersion":"3","holdUntil":"2026-11-30T12:20:00+01:00","idempotencyKey":"k","attempt":1}`,
		`{"reservation_id":"a","reservation_id":"b","reservationId":"c"}`,
		`{"reservation\u005fid":"escaped name","attempt":2}`,
		`{"Reservation_ID":"r-1","IDEMPOTENCY_KEY":"k"}`,
		`{"attempt": {"nested": [1, 2, {"attempt": 9}]}, "hold_until" : null }`,
		` {"reservation_id":"r"} `,
		`{"reservation_id":"r"} {}`,
		`{"reservation_id":"r",}`,
		`[{"reservation_id":"r"}]`,
		`null`, `"x"`, `{`, `{}`, `{"a":1e400}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			t.Skip("readJob refuses bodies that are not UTF-8 before reading members")
		}
		fast, err := readJobMembers(body)
		slow, problem := membersByEncodingJSON(body)
		if err != nil {
			// readJob then takes encoding/json's reading, whatever it is.
			return
		}
		if problem != "" {
			t.Fatalf("readJobMembers read %q as one object, encoding/json says %s", body, problem)
		}
		for member := range jobMemberCount {
			if got, want := string(fast.get(member)), string(slow.get(member)); got != want {
				t.Fatalf("member %d of %q: one pass read %q, encoding/json %q", member, body, got, want)
			}
		}
	})
}

// TestJobMembersReadsAValidBodyInOnePass pins that the ordinary bodies take
// the one-pass reader, not encoding/json's fallback.
func TestJobMembersReadsAValidBodyInOnePass(t *testing.T) {
	for _, body := range []string{
		testJob,
		`{"reservation_id":"a","reservation_id":"b"}`,
		`{"reservation\u005fid":"escaped name"}`,
	} {
		if _, err := readJobMembers([]byte(body)); err != nil {
			t.Errorf("readJobMembers(%s): %v", body, err)
		}
	}
	for _, body := range []string{`[1]`, `null`, `{"a":1} x`, `{"a":}`} {
		if _, err := readJobMembers([]byte(body)); err == nil {
			t.Errorf("readJobMembers(%s) read one object", body)
		}
	}
}
