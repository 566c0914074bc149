package replay

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// maxSQSAttributes is how many message attributes SQS takes on one message.
const maxSQSAttributes = 10

// sqsReplayAttributes is replayHeaders for a letter from SQS: its message
// attributes as received, each with its type, minus the failure
// bookkeeping, plus those naming the replay, as many as SQS's ten allow.
// The request and the replay count go first: they are how a job that dies
// again is linked to this replay. Then the item, the actor, the approver
// and the time, while there is room. A letter whose own attributes leave
// no room for the first two cannot be replayed to SQS as it is.
func sqsReplayAttributes(stored json.RawMessage, req Request, actor string, item int64, replayCount int, at time.Time) (map[string]deadletter.SQSAttribute, error) {
	orig, err := deadletter.DecodeSQSAttributes(dropTopLevel(stored, stripped))
	if err != nil {
		return nil, fmt.Errorf("stored attributes cannot be decoded: %w", err)
	}
	attrs := maps.Clone(orig)
	if attrs == nil {
		attrs = map[string]deadletter.SQSAttribute{}
	}
	number := func(n int64) deadletter.SQSAttribute {
		return deadletter.SQSAttribute{DataType: "Number", StringValue: strconv.FormatInt(n, 10)}
	}
	text := func(s string) deadletter.SQSAttribute {
		return deadletter.SQSAttribute{DataType: "String", StringValue: s}
	}
	adds := []struct {
		name     string
		value    deadletter.SQSAttribute
		required bool
	}{
		{HeaderReplayRequest, number(req.ID), true},
		{HeaderReplayCount, number(int64(replayCount) + 1), true},
		{HeaderReplayItem, number(item), false},
		{HeaderReplayedBy, text(actor), false},
		{HeaderApprovedBy, text(req.ReviewedBy), false},
		{HeaderReplayedAt, text(at.UTC().Truncate(time.Second).Format(time.RFC3339)), false},
	}
	for _, a := range adds {
		if a.value.StringValue == "" {
			continue // SQS refuses an empty value
		}
		_, replaces := attrs[a.name]
		if !replaces && len(attrs) >= maxSQSAttributes {
			if a.required {
				return nil, fmt.Errorf("SQS takes %d message attributes and the letter has %d of its own: a replay adds %s and %s, which would not fit; "+
					"discard it, or have the producer send fewer attributes", maxSQSAttributes, len(orig), HeaderReplayRequest, HeaderReplayCount)
			}
			continue
		}
		attrs[a.name] = a.value
	}
	return attrs, nil
}

// sqsDeduplicationID is the deduplication id of an item's message on an
// SQS FIFO queue: fresh to the request, so that SQS does not take the
// replay for a copy of the original sent within five minutes, and the
// same for every publish of the item in the request, so that a publish
// repeated after a lost answer is not delivered twice within them.
func sqsDeduplicationID(request, item int64) string {
	return "expiryctl-replay-" + strconv.FormatInt(request, 10) + "-" + strconv.FormatInt(item, 10)
}
