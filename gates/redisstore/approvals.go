package redisstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/axgate/axgate/internal/gate"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/middleware"
)

// ApprovalStore is a gates.ApprovalStore on Redis.
//
// A request is a JSON document kept until it expires (or its KeepUntil, when
// later) plus Options.ApprovalRetention. Each tenant's inbox is a sorted set
// whose members (creation time, id) sort lexicographically in creation
// order, so a page is one ZRANGE … BYLEX LIMIT, never the whole index; each
// requester's pending requests are a sorted set by expiry, which the create
// script counts for the quota. Updates are compare-and-set: read, apply the
// change, write only if nobody wrote in between, else start again.
//
// It behaves as the memory store (gates/memstore) does: changes of state
// follow the approval state machine (a decided request stays decided), a pending
// request past its expiry reads as expired, and creating a request whose id
// belongs to a Replaceable request replaces it.
type approvalStore struct {
	base
	// salt names the positions a cursor holds (List): a name is the same
	// for the same position, so that listing again holds no more of them,
	// and not one a reader could derive from a guessed request.
	salt string
}

var _ gates.ApprovalStore = (*approvalStore)(nil)

// NewApprovalStore returns an ApprovalStore on client.
func NewApprovalStore(client redis.UniversalClient, opts Options) gates.ApprovalStore {
	return &approvalStore{base: newBase(client, opts), salt: rand.Text()}
}

// maxUpdateAttempts bounds the compare-and-set loop of Update when writers
// keep colliding; the timeout bounds it too.
const maxUpdateAttempts = 64

// createScript stores the request ARGV[1] under KEYS[1] for ARGV[2]
// milliseconds unless another request is there (one reading exactly ARGV[5],
// a replaceable request the caller saw, is replaced). With a quota ARGV[6] >
// 0 it first drops the requester's pending ids (sorted set KEYS[4], scored
// by expiry) expired at ARGV[7] and refuses when as many as the quota are
// left. It drops the inbox member ARGV[9] of the replaced request (when
// replacing) and adds the inbox member ARGV[3] to the sorted sets KEYS[2]
// (tenant) and KEYS[3] (all), the id ARGV[4] with score ARGV[8] (expiry) to
// KEYS[4], and keeps those sets at least as long as the request. Then it
// sweeps each inbox set a little: the next ARGV[11] members after its sweep
// mark (KEYS[5], KEYS[6]; from the start again after the last member) leave
// it when their request (key ARGV[10] .. id) is gone. So an inbox set holds
// the live requests and at most the ones gone since its last full sweep,
// though nobody lists it (nothing lists every tenant's inbox, and the
// members of a tenant whose approvers never read their inbox would stay
// otherwise). It returns {1, ”} when created, {0, stored request} when
// another is there, {2, expiry of the requester's oldest pending request}
// over the quota.
//
// The sweep reads request keys it is not given in KEYS: with Redis Cluster
// the prefix's hash tag keeps them in the slot of the keys it is given.
var createScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[5] then return {0, cur} end
local quota = tonumber(ARGV[6])
if quota > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[7])
  if redis.call('ZCARD', KEYS[4]) >= quota then
    local oldest = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
    return {2, oldest[2]}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local ttl = tonumber(ARGV[2])
local step = tonumber(ARGV[11])
for i = 2, 3 do
  if ARGV[9] ~= '' then redis.call('ZREM', KEYS[i], ARGV[9]) end
  redis.call('ZADD', KEYS[i], 0, ARGV[3])
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  local mark = redis.call('GET', KEYS[i + 3])
  local from = '-'
  if mark then from = '(' .. mark end
  local seen = redis.call('ZRANGEBYLEX', KEYS[i], from, '+', 'LIMIT', 0, step)
  for _, m in ipairs(seen) do
    if redis.call('EXISTS', ARGV[10] .. string.sub(m, 18)) == 0 then redis.call('ZREM', KEYS[i], m) end
  end
  if #seen < step then
    redis.call('DEL', KEYS[i + 3])
  else
    redis.call('SET', KEYS[i + 3], seen[#seen], 'PX', redis.call('PTTL', KEYS[i]))
  end
end
redis.call('ZADD', KEYS[4], ARGV[8], ARGV[4])
if redis.call('PTTL', KEYS[4]) < ttl then redis.call('PEXPIRE', KEYS[4], ttl) end
return {1, ''}
`)

// sweepStep is how many members of each inbox set a create checks (see
// createScript): a create costs O(sweepStep) more work inside Redis, and an
// inbox set holds at most its live requests plus the ones gone within its
// last len/sweepStep creates.
const sweepStep = 16

// casScript replaces the request under KEYS[1] by ARGV[2], kept ARGV[3]
// milliseconds, only if it still reads ARGV[1]; when ARGV[4] is "1" (the
// request no longer counts in its requester's quota) it drops its id
// ARGV[5] from the requester's pending set KEYS[2], else it scores the id
// there with ARGV[6] (until when it counts: gate.QuotaUntil), keeping the
// set at least as long as the request. It returns 1 when replaced, 0 when
// someone else wrote first and -1 when the request is gone.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[5])
else
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5])
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
end
return 1
`)

func (s *approvalStore) reqKey(id string) string { return s.key("apr:req:", id) }

// The inbox sets have new names: their members are inbox members, not the
// bare ids of the sets before them.
func (s *approvalStore) tenantIndex(tenant string) string { return s.key("apr:inbox:t:", tenant) }

func (s *approvalStore) allIndex() string { return s.key("apr:inbox:", "all") }

// The sweep marks of the inbox sets (createScript).
func (s *approvalStore) tenantSweep(tenant string) string { return s.key("apr:sweep:t:", tenant) }

func (s *approvalStore) allSweep() string { return s.key("apr:sweep:", "all") }

func (s *approvalStore) pendingSet(r *gates.ApprovalRequest) string {
	return s.key("apr:pend:", gate.StateKey("r", r.Tenant, r.Requester))
}

// inboxMember is a request's member in the inbox sets: its creation time in
// milliseconds (fixed width) and id, so that the lexicographic order of
// members is the order of creation.
func inboxMember(r *gates.ApprovalRequest) string {
	return fmt.Sprintf("%016d|%s", max(r.CreatedAt.UnixMilli(), 0), r.ID)
}

// ttl keeps a request until it expires (or KeepUntil) plus the retention.
func (s *approvalStore) ttl(r *gates.ApprovalRequest) int64 {
	end := gate.Retained(r)
	if end.IsZero() {
		return millis(s.opts.ApprovalRetention)
	}
	return millis(time.Until(end) + s.opts.ApprovalRetention)
}

// Create stores req unless a request with its ID exists that is not replaceable.
//
// It returns the stored request and whether it was created now. A new
// request must be pending (an empty state means pending). With quota > 0
// the requester's pending requests are counted in the same script that
// creates. One round trip, two when a replaceable request is replaced.
func (s *approvalStore) Create(ctx context.Context, req gates.ApprovalRequest, quota int) (gates.ApprovalRequest, bool, error) {
	if req.ID == "" {
		return gates.ApprovalRequest{}, false, errors.New("redisstore: approval request without an id")
	}
	if req.State == "" {
		req.State = gates.ApprovalPending
	}
	if req.State != gates.ApprovalPending {
		return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: %w: a new request must be pending, not %s", gates.ErrInvalidTransition, req.State)
	}
	req.Coalesced = 0
	data, err := encodeRequest(req)
	if err != nil {
		return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: encode approval request: %w", err)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	keys := []string{s.reqKey(req.ID), s.tenantIndex(req.Tenant), s.allIndex(), s.pendingSet(&req),
		s.tenantSweep(req.Tenant), s.allSweep()}
	replaced, replacedMember := "", ""
	for range maxUpdateAttempts {
		now := time.Now()
		v, err := createScript.Run(ctx, s.rdb, keys, data, s.ttl(&req), inboxMember(&req), req.ID, replaced,
			max(quota, 0), now.UnixMilli(), req.ExpiresAt.UnixMilli(), replacedMember, s.reqKey(""), sweepStep).Slice()
		if err != nil {
			return gates.ApprovalRequest{}, false, storeErr("create approval request", err)
		}
		if len(v) != 2 {
			return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: create approval request: unexpected reply of %d values", len(v))
		}
		switch status, _ := v[0].(int64); status {
		case 1:
			// Hand back a copy decoded from what was stored.
			out, err := decodeRequest(data, time.Time{})
			return out, err == nil, err
		case 2:
			oldest, _ := v[1].(string)
			ms, err := strconv.ParseInt(oldest, 10, 64)
			if err != nil {
				return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: create approval request: bad quota reply %q", oldest)
			}
			return gates.ApprovalRequest{}, false, &gates.QuotaError{RetryAfter: time.UnixMilli(ms).Sub(now)}
		}
		cur, _ := v[1].(string)
		old, err := decodeRequest([]byte(cur), now)
		if err != nil {
			return gates.ApprovalRequest{}, false, err
		}
		if !old.Replaceable(now) {
			return old, false, nil
		}
		// The same call asked again after its request lapsed, was
		// cancelled or ran: replace it, unless someone changes it
		// meanwhile, and keep its void.
		replaced, replacedMember = cur, inboxMember(&old)
		req.Inherit(&old)
		if data, err = encodeRequest(req); err != nil {
			return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: encode approval request: %w", err)
		}
	}
	return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: approval request %q: gave up after %d conflicting writes", req.ID, maxUpdateAttempts)
}

// Get returns the request, or gates.ErrNotFound. One round trip.
func (s *approvalStore) Get(ctx context.Context, id string) (gates.ApprovalRequest, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	data, err := s.rdb.Get(ctx, s.reqKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return gates.ApprovalRequest{}, gates.ErrNotFound
	}
	if err != nil {
		return gates.ApprovalRequest{}, storeErr("get approval request", err)
	}
	return decodeRequest(data, time.Now())
}

// Update applies fn to the request and stores the result, atomically.
//
// If another replica updates the request meanwhile, fn runs again on the
// newer request, so fn must only depend on the request it is given. An error
// from fn aborts the update and is returned as is. A change of state that
// the approval state machine refuses, or any change to a request already
// decided, fails with an error wrapping gates.ErrInvalidTransition. Two round
// trips when nobody interferes.
func (s *approvalStore) Update(ctx context.Context, id string, fn func(*gates.ApprovalRequest) error) (gates.ApprovalRequest, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	key := s.reqKey(id)
	for range maxUpdateAttempts {
		old, err := s.rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return gates.ApprovalRequest{}, gates.ErrNotFound
		}
		if err != nil {
			return gates.ApprovalRequest{}, storeErr("read approval request", err)
		}
		req, err := decodeRequest(old, time.Now())
		if err != nil {
			return gates.ApprovalRequest{}, err
		}
		tenant, requester, state := req.Tenant, req.Requester, req.State
		if err := fn(&req); err != nil {
			return gates.ApprovalRequest{}, err
		}
		if req.ID != id || req.Tenant != tenant || req.Requester != requester {
			// The indexes are by id, tenant and requester; moving a
			// request would orphan it.
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: an update may not change the id, tenant or requester of approval request %q", id)
		}
		if req.State != state {
			if err := gate.ValidateTransition(state, req.State); err != nil {
				return gates.ApprovalRequest{}, err
			}
		} else if gate.Terminal(state) {
			return gates.ApprovalRequest{}, fmt.Errorf("%w: the request is already %s", gates.ErrInvalidTransition, state)
		}
		req.Coalesced = 0
		data, err := encodeRequest(req)
		if err != nil {
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: encode approval request: %w", err)
		}
		// The pending set counts the requester's requests in the quota
		// (gate.QuotaUntil): pending ones, and confirmation requests
		// their requester decided while the store keeps them.
		left, until := "1", int64(0)
		if gate.CountsInQuota(&req, time.Now()) {
			left, until = "0", gate.QuotaUntil(&req).UnixMilli()
		}
		n, err := casScript.Run(ctx, s.rdb, []string{key, s.pendingSet(&req)}, old, data, s.ttl(&req), left, id, until).Int()
		if err != nil {
			return gates.ApprovalRequest{}, storeErr("write approval request", err)
		}
		switch n {
		case 1:
			return req, nil
		case -1:
			return gates.ApprovalRequest{}, gates.ErrNotFound
		}
		// Someone else wrote first: read again.
	}
	return gates.ApprovalRequest{}, fmt.Errorf("redisstore: approval request %q: gave up after %d conflicting updates", id, maxUpdateAttempts)
}

// listRounds bounds the round trip pairs (ZRANGE, MGET) of one List call.
const listRounds = 4

// List returns a page of the requests that match the filter, oldest first, after cursor.
//
// It reads the index of the filter's tenant (of requests without a tenant
// when it is empty; of every tenant's only with f.AnyTenant) a slice at a
// time (ZRANGE … BYLEX LIMIT, then MGET of that slice): at most listRounds
// pairs of round trips, so a page may be short. Members whose request is
// gone, was replaced, or is pending past its expiry leave the index on the
// way (one more round trip when there are any). A page that ends on a
// request the filter does not show hands out a cursor naming a position
// held in Redis for 15 minutes, not that request's id (one more round trip
// each way).
func (s *approvalStore) List(ctx context.Context, f gates.ApprovalFilter, cursor string, limit int) ([]gates.ApprovalRequest, string, error) {
	limit = gate.PageLimit(limit)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	index := s.tenantIndex(f.Tenant)
	if f.Tenant == "" && f.AnyTenant {
		index = s.allIndex()
	}
	if token, ok := strings.CutPrefix(cursor, heldCursor); ok {
		// A position the filter does not show, held in Redis (see below).
		v, err := s.rdb.Get(ctx, s.key("apr:cursor:", token)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, "", storeErr("list approval requests", err)
		}
		held, member, ok := strings.Cut(v, "\n")
		if err != nil || !ok || held != index {
			return nil, "", fmt.Errorf("redisstore: %w: %q", gates.ErrBadCursor, cursor)
		}
		cursor = member
	}
	if cursor != "" && !validMember(cursor) {
		return nil, "", fmt.Errorf("redisstore: %w: %q", gates.ErrBadCursor, cursor)
	}
	var (
		out  []gates.ApprovalRequest
		gone []any
		last = cursor
		next string
	)
	now := time.Now()
	for round := 0; round < listRounds && len(out) < limit; round++ {
		start := "-"
		if last != "" {
			start = "(" + last
		}
		want := limit - len(out)
		members, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: index, Start: start, Stop: "+", ByLex: true, Count: int64(want + 1)}).Result()
		if err != nil {
			return nil, "", storeErr("list approval requests", err)
		}
		if len(members) == 0 {
			next = ""
			break
		}
		more := len(members) > want
		if more {
			members = members[:want]
		}
		keys := make([]string, len(members))
		for i, m := range members {
			_, id, _ := strings.Cut(m, "|")
			keys[i] = s.reqKey(id)
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, "", storeErr("list approval requests", err)
		}
		for i, v := range vals {
			data, ok := v.(string)
			if !ok {
				gone = append(gone, members[i])
				continue
			}
			req, err := decodeRequest([]byte(data), now)
			if err != nil {
				return nil, "", err
			}
			if inboxMember(&req) != members[i] || (req.State == gates.ApprovalExpired && lapsedAt(&req, now)) {
				// Replaced by a newer request of the same call, or
				// pending past its expiry: no inbox shows it again.
				gone = append(gone, members[i])
				continue
			}
			if gate.Matches(f, &req) {
				out = append(out, req)
			}
		}
		last = members[len(members)-1]
		next = last
		if !more {
			next = ""
			break
		}
	}
	if len(gone) > 0 {
		// Best effort: a failure only leaves the members for the next
		// listing.
		s.rdb.ZRem(ctx, index, gone...)
	}
	if next != "" && (len(out) == 0 || inboxMember(&out[len(out)-1]) != next) {
		// The page ends on a request the filter does not show (another
		// person's confirmation request, a request for other roles): its
		// member (creation time and id) must not reach the reader. The
		// position is held in Redis for a while under a name derived
		// from it with this store's random salt (listing the same page
		// again holds nothing more), and the cursor is that name.
		token := middleware.DigestCanonical([]byte(gate.StateKey("cursor", s.salt, index, next)))
		if err := s.rdb.Set(ctx, s.key("apr:cursor:", token), index+"\n"+next, cursorLifetime).Err(); err != nil {
			return nil, "", storeErr("list approval requests", err)
		}
		next = heldCursor + token
	}
	return out, next, nil
}

// heldCursor marks a cursor that names a position held in Redis rather
// than an inbox member; cursorLifetime is how long such a position is held.
const (
	heldCursor     = "~"
	cursorLifetime = 15 * time.Minute
)

// validMember reports whether cursor has the form of an inbox member.
func validMember(cursor string) bool {
	ms, id, ok := strings.Cut(cursor, "|")
	if !ok || len(ms) != 16 || id == "" {
		return false
	}
	_, err := strconv.ParseUint(ms, 10, 64)
	return err == nil
}

// decodeRequest decodes a stored request as it reads at now: a pending
// request past its expiry is expired.
func decodeRequest(data []byte, now time.Time) (gates.ApprovalRequest, error) {
	var r gates.ApprovalRequest
	if err := json.Unmarshal(data, &r); err != nil {
		return gates.ApprovalRequest{}, fmt.Errorf("redisstore: decode approval request: %w", err)
	}
	if r.State == gates.ApprovalPending && lapsedAt(&r, now) {
		r.State = gates.ApprovalExpired
	}
	return r, nil
}

// lapsedAt reports whether a request is past its expiry, so that its id may
// serve a new request.
func lapsedAt(r *gates.ApprovalRequest, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// encodeRequest is req as stored: JSON without encoding/json's HTML
// escaping, so that Arguments, a json.RawMessage, keep the bytes the call
// carried ("<" stays "<", not "\u003c"): the pages show a person the
// arguments exactly as sent, from whichever store.
func encodeRequest(req gates.ApprovalRequest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
