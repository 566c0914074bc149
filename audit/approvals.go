package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ApprovalSignature is the problem of a replay.approve row whose signed
// statement does not verify, or is not of the request and the login the
// row names.
const ApprovalSignature Problem = "approval-signature"

// ApprovalOpener checks an approver's signed statement against a keyring
// the reviewer holds and says which request it approves, by which login.
type ApprovalOpener func(signed []byte) (request int64, approver string, err error)

// ApprovalsResult counts the approvals of an export: those whose signed
// statement verified, and those made without one.
type ApprovalsResult struct {
	Signed, Unsigned int64
}

// VerifyApprovals reads an ndjson or evidence export from r and checks the
// signed statement of every successful replay.approve row with open: it
// must verify, approve the row's request, and be signed by the row's
// database login. A failure is a *ChainError (approval-signature); the
// chain itself is VerifyFile's and VerifyEvidence's to check.
func VerifyApprovals(ctx context.Context, r io.Reader, name string, open ApprovalOpener) (ApprovalsResult, error) {
	var res ApprovalsResult
	br := bufio.NewReaderSize(r, 1<<20)
	var buf []byte
	for line := 1; ; line++ {
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return res, err
			}
		}
		b, err := readLine(br, &buf)
		if len(b) == 0 && errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return res, fmt.Errorf("audit verify %s: %w", name, err)
		}
		b = bytes.TrimLeft(b, "\xef\xbb\xbf \t")
		if len(b) == 0 || bytes.HasPrefix(b, []byte(`{"expiryctl_audit_evidence":`)) {
			continue
		}
		var row struct {
			Seq     int64  `json:"seq"`
			DBRole  string `json:"db_role"`
			Action  string `json:"action"`
			Target  string `json:"target"`
			Details string `json:"details"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(b, &row); err != nil {
			return res, &ChainError{Problem: Malformed, Source: name, Detail: fmt.Sprintf("line %d: not a row of an ndjson or evidence export (%v)", line, err)}
		}
		if row.Action != "replay.approve" || row.Outcome != string(OK) {
			continue
		}
		var details struct {
			Signed *string `json:"signed_statement"`
		}
		if err := json.Unmarshal([]byte(row.Details), &details); err != nil || details.Signed == nil {
			res.Unsigned++
			continue
		}
		fail := func(format string, args ...any) error {
			return &ChainError{Seq: row.Seq, Problem: ApprovalSignature, Source: name, Detail: fmt.Sprintf(format, args...)}
		}
		request, approver, err := open([]byte(*details.Signed))
		switch {
		case err != nil:
			return res, fail("the approval of %s does not verify: %v", row.Target, err)
		case row.Target != "replay_request:"+strconv.FormatInt(request, 10):
			return res, fail("the row approves %s, its signed statement replay request %d", row.Target, request)
		case approver != row.DBRole:
			return res, fail("the row's login is %q, the statement is signed by %q", row.DBRole, approver)
		}
		res.Signed++
	}
}
