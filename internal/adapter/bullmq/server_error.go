package bullmq

import "strings"

// ServerError says whether err is Redis not answering (Unreachable), or
// refusing the login (WRONGPASS, NOAUTH, an ACL's NOPERM on AUTH): the
// server is unavailable to the command, where a queue's own refusals (an
// unsupported BullMQ version, a missing queue) are not.
func ServerError(err error) bool {
	if err == nil {
		return false
	}
	if Unreachable(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "invalid username-password")
}
