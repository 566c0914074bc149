package replay

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestSQSReplayAttributesFitTen: SQS takes ten message attributes. A
// letter's own come back as they were, minus the failure bookkeeping; the
// replay's request and count must fit beside them or the item cannot go,
// and the rest of the replay's go only where there is room.
func TestSQSReplayAttributesFitTen(t *testing.T) {
	req := Request{ID: 7, ReviewedBy: "bob"}
	at := time.Date(2026, 12, 5, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		own     int
		want    int
		refused bool
	}{
		{own: 0, want: 6},
		{own: 4, want: 10},
		{own: 8, want: 10},
		{own: 9, refused: true},
		{own: 10, refused: true},
	} {
		t.Run(strconv.Itoa(tc.own), func(t *testing.T) {
			h := map[string]any{
				// Bookkeeping, which does not count: it is not sent again.
				"x-error-class": deadletter.SQSAttribute{DataType: "String", StringValue: "db_timeout"},
				"x-last-error":  deadletter.SQSAttribute{DataType: "String", StringValue: "timeout"},
			}
			for i := range tc.own {
				h["a"+strconv.Itoa(i)] = deadletter.SQSAttribute{DataType: "Number.int", StringValue: strconv.Itoa(i)}
			}
			got, err := sqsReplayAttributes(deadletter.EncodeHeaders(h), req, "alice", 42, 2, at)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "SQS takes 10 message attributes") {
					t.Fatalf("%d own attributes: %d, %v; want refused", tc.own, len(got), err)
				}
				return
			}
			if err != nil || len(got) != tc.want {
				t.Fatalf("%d own attributes: %d, %v; want %d", tc.own, len(got), err, tc.want)
			}
			if !sameAttribute(got[HeaderReplayRequest], deadletter.SQSAttribute{DataType: "Number", StringValue: "7"}) ||
				!sameAttribute(got[HeaderReplayCount], deadletter.SQSAttribute{DataType: "Number", StringValue: "3"}) {
				t.Errorf("replay attributes %+v %+v", got[HeaderReplayRequest], got[HeaderReplayCount])
			}
			if _, ok := got["x-error-class"]; ok {
				t.Error("the failure's bookkeeping went with the replay")
			}
			if tc.own > 0 && !sameAttribute(got["a0"], deadletter.SQSAttribute{DataType: "Number.int", StringValue: "0"}) {
				t.Errorf("own attribute a0 = %+v", got["a0"])
			}
		})
	}
}

func sameAttribute(a, b deadletter.SQSAttribute) bool {
	return a.DataType == b.DataType && a.StringValue == b.StringValue && bytes.Equal(a.BinaryValue, b.BinaryValue)
}
