package sqsqueue

import "testing"

// TestQueueCountsAndRedriveTargetAsSQSWritesThem: the three counts of
// GetQueueAttributes and the redrive policy's target, read as SQS
// documents them. goaws keeps no delayed count and counts in-flight and
// delayed messages as visible too, so what SQS alone says is written out
// here; the tests against goaws assert what both say.
func TestQueueCountsAndRedriveTargetAsSQSWritesThem(t *testing.T) {
	t.Parallel()
	v, h, d := queueCounts(map[string]string{
		"ApproximateNumberOfMessages": "12", "ApproximateNumberOfMessagesNotVisible": "3", "ApproximateNumberOfMessagesDelayed": "4",
	})
	if v != 12 || h != 3 || d != 4 {
		t.Errorf("counts %d, %d, %d; want 12 visible, 3 in flight, 4 delayed", v, h, d)
	}
	if v, h, d := queueCounts(map[string]string{"ApproximateNumberOfMessages": "7", "ApproximateNumberOfMessagesNotVisible": "-1"}); v != 7 || h != 0 || d != 0 {
		t.Errorf("a count missing or out of range: %d, %d, %d; want 7, 0, 0", v, h, d)
	}
	for _, tt := range []struct {
		policy, want string
		ok           bool
	}{
		// SQS writes maxReceiveCount as a number, goaws as a string.
		{`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:123456789012:expiry-dlq","maxReceiveCount":5}`, "arn:aws:sqs:eu-west-1:123456789012:expiry-dlq", true},
		{`{"maxReceiveCount":"3", "deadLetterTargetArn":"arn:aws:sqs:us-east-1:100010001000:d"}`, "arn:aws:sqs:us-east-1:100010001000:d", true},
		{``, "", false},
		{`{"maxReceiveCount":5}`, "", false},
		{`not json`, "", false},
	} {
		got, ok := deadLetterTarget(tt.policy)
		if got != tt.want || ok != tt.ok {
			t.Errorf("deadLetterTarget(%s) = %q, %v; want %q, %v", tt.policy, got, ok, tt.want, tt.ok)
		}
	}
}
