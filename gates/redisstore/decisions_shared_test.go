package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate"
	axerr "github.com/axgate/axgate/errors"
	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/gates/redisstore"
	"github.com/axgate/axgate/gates/redisstore/internal/redistest"
	"github.com/axgate/axgate/manifest"
	"github.com/axgate/axgate/middleware"
	"github.com/axgate/axgate/token"
)

// sharedKeyReplicas returns n enforcers with decision pages on one Redis,
// signing and verifying with one key (so that approval tokens minted on one
// are accepted on another).
func sharedKeyReplicas(t *testing.T, n int) []*axgate.Enforcer {
	t.Helper()
	m, err := manifest.Parse([]byte(decisionsManifest))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.GenerateDevKey("shared")
	if err != nil {
		t.Fatal(err)
	}
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, redistest.Dial(t, url))
	var out []*axgate.Enforcer
	for range n {
		s := redisstore.New(redistest.Dial(t, url), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
		e, err := axgate.New(m, axgate.WithDecisionPages(decisionsBase), axgate.WithSigningKey(signer),
			axgate.WithReplayStore(s.Replay), axgate.WithLimiter(s.Limiter), axgate.WithApprovalStore(s.Approvals))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		out = append(out, e)
	}
	return out
}

// TestApprovedRepeatsRacingTokenCallsRunOnce: a 2-of-2 approval decided on
// the pages hands each approver a token; the requester's agent then fires
// repeats without tokens and calls with both tokens at once, spread over
// two replicas sharing Redis: the tool runs once. The run on the held
// decision voids the tokens, and a run on the tokens moves the request to
// executed, whichever commits first.
func TestApprovedRepeatsRacingTokenCallsRunOnce(t *testing.T) {
	r := sharedKeyReplicas(t, 2)
	ctx := context.Background()
	for round := range 3 {
		tool := &counterTool{}
		args := `{"amount":` + string(rune('1'+round)) + `}`
		_, err := decCall(r[0], tool, "payout_send", args, decAlice)
		_, _, d := envelopeDetails(t, err)
		id, _ := d["decision_id"].(string)
		var toks []string
		for i, p := range []middleware.Principal{decBob, decCarol} {
			_, tok, _, err := r[i].Approvals().Decide(ctx, p, id, true, "")
			if err != nil || tok == "" {
				t.Fatalf("decide: %q %v", tok, err)
			}
			toks = append(toks, tok)
		}
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range 24 {
			done.Go(func() {
				start.Wait()
				c := middleware.NewCall("payout_send", []byte(args), decAlice)
				if i%2 == 1 {
					c.Credentials.Approvals = toks
				}
				_, err := r[i%len(r)].Wrap(tool).Invoke(ctx, c)
				if err != nil && !axerr.Is(err, axerr.CodeApprovalMissing) && !axerr.Is(err, axerr.CodeApprovalInvalid) {
					t.Errorf("call %d: %v", i, err)
				}
			})
		}
		start.Done()
		done.Wait()
		if n := tool.n.Load(); n != 1 {
			t.Fatalf("round %d: the tool ran %d times on one approval", round, n)
		}
	}
}

// TestRepeatRefusedWhileTheStoreIsDown: with Redis unreachable, a repeat
// of a confirmed call is refused (503) and spends nothing; once Redis is
// back the decision is still there and runs once.
func TestRepeatRefusedWhileTheStoreIsDown(t *testing.T) {
	m, err := manifest.Parse([]byte(decisionsManifest))
	if err != nil {
		t.Fatal(err)
	}
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, redistest.Dial(t, url))
	good := redisstore.New(redistest.Dial(t, url), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	e, err := axgate.New(m, axgate.WithDecisionPages(decisionsBase), axgate.WithReplayStore(good.Replay), axgate.WithApprovalStore(good.Approvals))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// A replica whose Redis connection is cut: a client on a closed port.
	downClient := redistest.Dial(t, url)
	down := redisstore.New(downClient, redisstore.Options{Prefix: prefix, Timeout: time.Second})
	if err := downClient.Close(); err != nil {
		t.Fatal(err)
	}
	eDown, err := axgate.New(m, axgate.WithDecisionPages(decisionsBase), axgate.WithReplayStore(down.Replay), axgate.WithApprovalStore(down.Approvals))
	if err != nil {
		t.Fatal(err)
	}
	defer eDown.Close()
	tool := &counterTool{}
	const args = `{"path":"/tmp/down"}`
	_, err = decCall(e, tool, "file_write", args, decAlice)
	_, _, d := envelopeDetails(t, err)
	id, _ := d["decision_id"].(string)
	if _, _, _, err := e.Approvals().Decide(context.Background(), decAlice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := decCall(eDown, tool, "file_write", args, decAlice); !axerr.Is(err, axerr.CodeStoreUnavailable) {
			t.Fatalf("repeat with the store down: %v", err)
		}
	}
	if req, err := e.Approvals().Request(context.Background(), decAlice, id); err != nil || req.State != gates.ApprovalApproved {
		t.Fatalf("after the failed repeats: %s %v", req.State, err)
	}
	if _, err := decCall(e, tool, "file_write", args, decAlice); err != nil {
		t.Fatalf("repeat once the store is back: %v", err)
	}
	if _, err := decCall(e, tool, "file_write", args, decAlice); !axerr.Is(err, axerr.CodeConfirmationMissing) || tool.n.Load() != 1 {
		t.Fatalf("second repeat: %v, tool ran %d", err, tool.n.Load())
	}
}

// TestRestartWithAMemoryReplayStoreRunsADecisionOnce: replicas that keep
// approval requests in Redis but spent ids in memory (each its own, as
// after a restart) still run a confirmed call once: the move to executed in
// Redis, not the memory replay store, is what a second run finds.
func TestRestartWithAMemoryReplayStoreRunsADecisionOnce(t *testing.T) {
	m, err := manifest.Parse([]byte(decisionsManifest))
	if err != nil {
		t.Fatal(err)
	}
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, redistest.Dial(t, url))
	replica := func() *axgate.Enforcer {
		s := redisstore.New(redistest.Dial(t, url), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
		e, err := axgate.New(m, axgate.WithDecisionPages(decisionsBase), axgate.WithApprovalStore(s.Approvals))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	before := replica()
	tool := &counterTool{}
	const args = `{"path":"/tmp/restart"}`
	_, err = decCall(before, tool, "file_write", args, decAlice)
	_, _, d := envelopeDetails(t, err)
	id, _ := d["decision_id"].(string)
	if _, _, _, err := before.Approvals().Decide(context.Background(), decAlice, id, true, ""); err != nil {
		t.Fatal(err)
	}
	// Concurrent repeats on two processes with replay stores of their own.
	others := []*axgate.Enforcer{before, replica(), replica()}
	var done sync.WaitGroup
	for i := range 12 {
		done.Go(func() { _, _ = decCall(others[i%len(others)], tool, "file_write", args, decAlice) })
	}
	done.Wait()
	after := replica() // a restart
	if _, err := decCall(after, tool, "file_write", args, decAlice); !axerr.Is(err, axerr.CodeConfirmationMissing) {
		t.Fatalf("repeat after a restart: %v", err)
	}
	if n := tool.n.Load(); n != 1 {
		t.Fatalf("the tool ran %d times on one confirmation", n)
	}
}

// TestInboxCursorNamesNoHiddenRequest: a person's inbox pages over Redis
// hand out cursors that name only requests the person may see: the
// confirmation requests of another person of the tenant, which are never
// shown to them, do not leak through next_cursor.
func TestInboxCursorNamesNoHiddenRequest(t *testing.T) {
	r := sharedKeyReplicas(t, 1)
	e := r[0]
	tool := &counterTool{}
	// bob (finance) may decide alice's approval requests; carol's
	// confirmation requests are hers alone.
	carol := middleware.Principal{ID: "carol", Tenant: "acme", Roles: []string{"clerk"}}
	var hidden []string
	approval := func(i int) {
		if _, err := decCall(e, tool, "payout_send", `{"amount":`+strconv.Itoa(i+1)+`}`, decAlice); !axerr.Is(err, axerr.CodeApprovalMissing) {
			t.Fatal(err)
		}
	}
	approval(0)
	for i := range 12 {
		_, err := decCall(e, tool, "file_write", `{"path":"/tmp/c`+strconv.Itoa(i)+`"}`, carol)
		_, _, d := envelopeDetails(t, err)
		hidden = append(hidden, d["decision_id"].(string))
	}
	approval(1)
	cursor, pages := "", 0
	for {
		page, next, err := e.Approvals().Pending(context.Background(), decBob, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			if p.Kind == "confirmation" {
				t.Fatalf("bob sees carol's confirmation %s", p.ID)
			}
		}
		for _, h := range hidden {
			if next != "" && strings.Contains(next, h) {
				t.Fatalf("bob's next cursor %q names carol's confirmation request", next)
			}
		}
		pages++
		if strings.HasPrefix(next, "~") {
			// A held position is no cursor for another tenant's inbox,
			// and a made-up one is refused.
			mallory := middleware.Principal{ID: "mallory", Tenant: "globex", Roles: []string{"finance"}}
			for _, p := range []middleware.Principal{mallory} {
				if _, _, err := e.Approvals().Pending(context.Background(), p, next, 2); !axerr.Is(err, axerr.CodeInvalidArguments) {
					t.Fatalf("bob's cursor in %s's inbox: %v", p.Tenant, err)
				}
			}
			if _, _, err := e.Approvals().Pending(context.Background(), decBob, "~made-up", 2); !axerr.Is(err, axerr.CodeInvalidArguments) {
				t.Fatalf("a made-up cursor: %v", err)
			}
		}
		if next == "" || pages > 20 {
			break
		}
		cursor = next
	}
	if pages < 2 {
		t.Fatalf("%d pages", pages)
	}
}
