package axgate

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// tokenConfig configures the confirmation and approval gates.
type tokenConfig struct{}

func defaultTokenConfig() tokenConfig { return tokenConfig{} }

// tokenStages returns the confirmation and approval gates.
func (e *Enforcer) tokenStages() ([]middleware.Stage, error) { return nil, nil }

var errNotImplemented = errors.New("axgate: not implemented yet")

// IssueConfirmation signs a confirmation token for this exact call, for a
// host whose UI has just asked the person.
func (e *Enforcer) IssueConfirmation(ctx context.Context, p middleware.Principal, tool string, args json.RawMessage) (token string, expiresAt time.Time, err error) {
	return "", time.Time{}, errNotImplemented
}

// Decide records an approver's decision on a pending approval request and,
// on approval, returns a signed approval token for the requester's call.
func (e *Enforcer) Decide(ctx context.Context, approver middleware.Principal, requestID string, approve bool, reason string) (token string, expiresAt time.Time, err error) {
	return "", time.Time{}, errNotImplemented
}

// PendingApprovals lists the pending requests the approver may decide.
func (e *Enforcer) PendingApprovals(ctx context.Context, approver middleware.Principal) ([]gates.ApprovalRequest, error) {
	return nil, errNotImplemented
}
