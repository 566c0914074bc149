package sqsqueue

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// TestReplayAttributesFitTen: SQS takes ten message attributes. A letter's
// own come back as they were (its bookkeeping was cut out before); the
// replay's request and count must fit beside them or the item cannot go,
// and the rest of the replay's marks go only where there is room, each as
// the attribute type its value has.
func TestReplayAttributesFitTen(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 19, 0, 0, 0, time.UTC)
	marks := []replay.Mark{{Name: replay.HeaderReplayRequest, Value: int64(7)}, {Name: replay.HeaderReplayCount, Value: int64(3)},
		{Name: replay.HeaderReplayItem, Value: int64(42)}, {Name: replay.HeaderReplayedBy, Value: "alice"},
		{Name: replay.HeaderApprovedBy, Value: "bob"}, {Name: replay.HeaderReplayedAt, Value: at}}
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
			h := map[string]any{}
			for i := range tc.own {
				h["a"+strconv.Itoa(i)] = deadletter.SQSAttribute{DataType: "Number.int", StringValue: strconv.Itoa(i)}
			}
			got, err := replayAttributes(deadletter.EncodeHeaders(h), marks)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "SQS takes 10 message attributes") {
					t.Fatalf("%d own attributes: %d, %v; want refused", tc.own, len(got), err)
				}
				return
			}
			if err != nil || len(got) != tc.want {
				t.Fatalf("%d own attributes: %d, %v; want %d", tc.own, len(got), err, tc.want)
			}
			if !sameAttribute(got[replay.HeaderReplayRequest], deadletter.SQSAttribute{DataType: "Number", StringValue: "7"}) ||
				!sameAttribute(got[replay.HeaderReplayCount], deadletter.SQSAttribute{DataType: "Number", StringValue: "3"}) {
				t.Errorf("replay attributes %+v %+v", got[replay.HeaderReplayRequest], got[replay.HeaderReplayCount])
			}
			if a, ok := got[replay.HeaderReplayedAt]; tc.own == 0 && (!ok || !sameAttribute(a, deadletter.SQSAttribute{DataType: "String", StringValue: "2026-12-05T19:00:00Z"})) {
				t.Errorf("x-replayed-at = %+v, want the time as RFC 3339 text", a)
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
