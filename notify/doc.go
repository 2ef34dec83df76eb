// Package notify tells people of new approval requests: a signed webhook, retried, never in the call's way.
//
// A Notifier is a gates.Notifier (axgate.ApprovalOptions.Notifier). When
// the approval gate opens a request, the Notifier picks the routes that
// match the request's tenant and intent (the most specific ones: tenant and
// intent, then intent, then tenant, then the catch-all) and queues one
// delivery per endpoint; workers POST them in the background. The call is
// never delayed: each endpoint has a bounded queue and workers of its own
// (a receiver that is down delays only its own notifications), each tenant
// a bounded share of what is queued (one tenant's flood drops only its
// own), and when either is full the notification is dropped, counted (Stats, and the axag.notifications counter with
// outcome "dropped") and logged, and the gate reports
// "approvers_notified": false in its refusal. A caller that floods approval
// requests therefore cannot grow memory here; the gate's per-requester
// quota and per-tenant notification cap bound it before that.
//
// Each delivery is a JSON body (FormatJSON, Payload) or a Slack-compatible
// incoming-webhook message (FormatSlack: {"text": …}). With a secret the
// body is signed with HMAC-SHA256 in the header
//
//	X-Axgate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// (the scheme of Stripe's webhooks). A receiver verifies it with Verify, or
// by hand: split the header at commas, take t and every v1, compute the
// HMAC of the decimal t, a period and the raw body bytes, compare it with
// each v1 in constant time (hmac.Equal), and refuse the request when none
// matches or when t is further than its tolerance (five minutes is usual)
// from its own clock, so that a captured request cannot be replayed later.
// Each attempt is signed anew with the time it is sent. Receivers should
// also treat request_id as the idempotency key: a delivery whose answer was
// lost is sent again. A receiver must refuse to start without its key:
// with an empty key anyone can sign (Verify refuses it, ErrNoSecret).
//
// Failed deliveries (a network error, 429 or any 5xx) are retried with
// exponential back-off, at most Options.Attempts times; any other status
// ends the delivery as failed.
package notify
