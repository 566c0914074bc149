package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/approval"
)

// ApprovalCheck is a runner's own rule for signed approvals: with a
// keyring, every approval it runs must carry the approver's signed
// statement of exactly this request, by a key of the keyring whose owner
// approved it and did not request it, not yet expired. It is the runner's
// setting, held outside the database, so no row a superuser writes turns it
// off.
type ApprovalCheck struct {
	// Keyring is the approvers' verifier keys; nil with Required refuses
	// every run, since nothing could be checked.
	Keyring *approval.Keyring
	// Required refuses unsigned approvals; a keyring implies it.
	Required bool
}

// enforced reports whether the check applies at all.
func (c *ApprovalCheck) enforced() bool { return c != nil && (c.Keyring != nil || c.Required) }

// approvalStatement is what an approver of req signs, as approver, valid
// until expires.
func approvalStatement(req Request, database, approver string, expires time.Time) approval.Statement {
	targets := make([]string, 0, len(req.Targets))
	for _, t := range req.Targets {
		targets = append(targets, fmt.Sprintf("%q %q %d", t.Exchange, t.RoutingKey, t.Letters))
	}
	var override string
	if req.ToExchange != "" || req.ToRoutingKey != "" {
		override = fmt.Sprintf("%q %q", req.ToExchange, req.ToRoutingKey)
	}
	var schedule []string
	if req.NotBefore != nil {
		schedule = append(schedule, "not-before "+req.NotBefore.UTC().Format(time.RFC3339Nano))
	}
	if req.IncludeNotDue && req.Kind == KindReplay {
		schedule = append(schedule, "include-not-due")
	}
	return approval.Statement{
		Database: database, Request: req.ID, Kind: string(req.Kind), Cohort: req.CohortHash, Items: req.Items,
		Targets: targets, Override: override, Rate: req.Rate, Canary: req.Canary,
		Stop: fmt.Sprintf("failure-ratio=%g queue-depth=%d redead-ratio=%g canary-window=%s",
			req.Stop.FailureRatio, req.Stop.QueueDepth, req.Stop.RedeadRatio, req.Stop.CanaryWindow),
		FreshKey: req.FreshKey, IncludePermanent: req.IncludePermanent, SameHandlerOK: req.SameHandlerOK,
		ViaExchange: req.ViaExchange, Schedule: strings.Join(schedule, " "), Unwatched: req.UnwatchedWhy != "",
		Requester: req.RequestedDBRole, Approver: approver, Expires: expires.UTC().Truncate(time.Second),
	}
}

// signApproval signs the statement of request id as it stands, inside the
// review's transaction, with the approver's key.
func signApproval(ctx context.Context, t tables, id int64, opts ReviewOptions) ([]byte, error) {
	req, err := t.RequestGet(ctx, id)
	if err != nil {
		return nil, err
	}
	pol, err := t.PolicyGet(ctx)
	if err != nil {
		return nil, err
	}
	login, database, err := t.SessionIdentity(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	signed, err := approval.Sign(approvalStatement(req, database, login, now().Add(pol.ApprovalTTL)), opts.ApprovalKey)
	if err != nil {
		return nil, refuse("signed-approval", "%v", err)
	}
	return signed, nil
}

// check refuses a run of req, in database at now, whose approval this
// check does not accept, naming why (rule signed-approval).
func (c *ApprovalCheck) check(req Request, database string, now time.Time) error {
	if !c.enforced() {
		return nil
	}
	if c.Keyring == nil {
		return refuse("signed-approval", "this runner requires signed approvals and has no keyring to check them with: "+
			"pass --keyring (or EXPIRYCTL_KEYRING), the approvers' verifier keys")
	}
	if req.ApprovalNote == "" {
		return refuse("signed-approval", "replay request %d was approved without a signature, and this runner runs only approvals "+
			"signed by a key of %s: ask the approver to approve again with `expiryctl replay approve %d --key FILE`",
			req.ID, c.Keyring.Path, req.ID)
	}
	signed, err := c.Keyring.Open([]byte(req.ApprovalNote))
	if err != nil {
		return refuse("signed-approval", "the approval of replay request %d does not verify: %v", req.ID, err)
	}
	switch {
	case signed.Approver == req.RequestedDBRole || signed.Approver == signed.Requester:
		return refuse("signed-approval", "the approval of replay request %d is signed by %s, who requested it: another approver must sign",
			req.ID, signed.Approver)
	case signed.Approver != req.ReviewedDBRole:
		return refuse("signed-approval", "replay request %d says login %q approved it, and the signature is %q's: the approval was not made by the signer",
			req.ID, req.ReviewedDBRole, signed.Approver)
	case !now.Before(signed.Expires):
		return refuse("signed-approval", "the signed approval of replay request %d expired at %s", req.ID, signed.Expires.Format(time.RFC3339))
	}
	want := approvalStatement(req, database, signed.Approver, signed.Expires)
	if diff := signed.Differences(want); len(diff) > 0 {
		return refuse("signed-approval", "replay request %d is not what %s signed: %s", req.ID, signed.Approver, strings.Join(diff, "; "))
	}
	return nil
}
