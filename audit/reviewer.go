package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reviewer reads and verifies the trail on behalf of Actor, leaving an audit
// row for each read and each verification, as every expiryctl command does.
// `audit list`, `audit verify` and the terminal UI's audit screen all use it.
type Reviewer struct {
	Pool  *pgxpool.Pool
	Actor string
}

// List is List, audited as "audit.list" with the filter and what it returned.
func (r *Reviewer) List(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error) {
	details := map[string]any{"filter": f, "limit": limit}
	if after != nil {
		details["after"] = after.Seq
	}
	page, err := List(ctx, r.Pool, f, after, limit)
	if err != nil {
		details["error"] = ErrorText(err)
		// A listing cancelled by its caller still leaves its row.
		_ = Record(context.WithoutCancel(ctx), r.Pool, Entry{Actor: r.Actor, Action: "audit.list", Details: details, Outcome: Failed})
		return Page{}, err
	}
	details["returned"] = len(page.Rows)
	return page, Record(ctx, r.Pool, Entry{Actor: r.Actor, Action: "audit.list", Details: details})
}

// RecordError is a verification whose result could not be written to the
// trail. Result holds what the verification found.
type RecordError struct {
	Err error
}

func (e *RecordError) Error() string { return "could not record this verification: " + e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }

// Verify is VerifyDB, audited as "audit.verify" with its result, also when
// the chain is broken or the check was cancelled half-way. When the
// verification itself failed, that error is returned and a failure to record
// it is dropped; otherwise a failure to record is a *RecordError.
func (r *Reviewer) Verify(ctx context.Context, from int64, anchor *Anchor) (Result, error) {
	res, verr := VerifyDB(ctx, r.Pool, from, anchor)
	details := map[string]any{"from": from, "rows": res.Rows}
	if anchor != nil {
		details["anchor"] = anchor.String()
	}
	return res, r.recordVerify(ctx, details, res, verr)
}

// VerifyCheckpoint is VerifyAgainstCheckpoint, audited as "audit.verify"
// with the checkpoint's size and signer and the result.
func (r *Reviewer) VerifyCheckpoint(ctx context.Context, cp Checkpoint) (Result, Consistency, error) {
	res, cons, verr := VerifyAgainstCheckpoint(ctx, r.Pool, cp)
	details := map[string]any{"from": 1, "rows": res.Rows, "checkpoint": map[string]any{
		"tree_size": cp.Size, "root_hash": cp.Root.String(), "signer": cp.Signer, "signer_key_hash": fmt.Sprintf("%08x", cp.SignerHash)}}
	return res, cons, r.recordVerify(ctx, details, res, verr)
}

// recordVerify writes the audit.verify row of a verification that found
// verr. When the verification itself failed, that error is returned and a
// failure to record it is dropped; otherwise a failure to record is a
// *RecordError.
func (r *Reviewer) recordVerify(ctx context.Context, details map[string]any, res Result, verr error) error {
	outcome := OK
	var chainErr *ChainError
	switch {
	case errors.As(verr, &chainErr):
		details["intact"] = false
		details["first_bad_seq"] = chainErr.Seq
		details["problem"] = chainErr.Problem
		details["error"] = chainErr.Detail
		outcome = Failed
	case verr != nil:
		details["error"] = ErrorText(verr)
		outcome = Failed
	default:
		details["intact"] = true
		if res.Head.Seq > 0 {
			details["head"] = res.Head.String()
		}
	}
	err := Record(context.WithoutCancel(ctx), r.Pool, Entry{Actor: r.Actor, Action: "audit.verify", Details: details, Outcome: outcome})
	if verr != nil {
		return verr
	}
	if err != nil {
		return &RecordError{Err: err}
	}
	return nil
}
