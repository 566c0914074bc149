package commands

import (
	"strconv"
)

// redeadTable is `dlq summary`'s count of the letters back after a replay,
// per request, the latest request first.
func redeadTable(streams *IOStreams, r summaryReport) *table {
	t := newTable(streams, "BACK AFTER REQUEST", "LETTERS", "WAITING", "LAST")
	for _, c := range r.Redead {
		t.addRow(strconv.FormatInt(c.RequestID, 10), strconv.FormatInt(c.Letters, 10), strconv.FormatInt(c.Waiting, 10),
			formatTime(streams, c.LastDeadLetteredAt, r.At))
	}
	return t
}
