package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
)

// ApprovalStore is a gates.ApprovalStore on Redis. A request is a JSON
// document kept until it expires plus Options.ApprovalRetention; sorted sets
// by creation time index the requests of each tenant (and all of them) for
// an approver's inbox. Updates are compare-and-set: read, apply the change,
// write only if nobody wrote in between, else start again.
//
// It behaves as gates.MemoryApprovalStore does: changes of state follow
// gates.ValidateTransition (a decided request stays decided), a pending
// request past its expiry reads as expired, and creating a request whose id
// belongs to a lapsed request replaces it.
type ApprovalStore struct{ base }

var _ gates.ApprovalStore = (*ApprovalStore)(nil)

// NewApprovalStore returns an ApprovalStore on client.
func NewApprovalStore(client redis.UniversalClient, opts Options) *ApprovalStore {
	return &ApprovalStore{newBase(client, opts)}
}

// maxUpdateAttempts bounds the compare-and-set loop of Update when writers
// keep colliding; the timeout bounds it too.
const maxUpdateAttempts = 64

// createScript stores the request ARGV[1] under KEYS[1] for ARGV[2]
// milliseconds unless another request is there (one reading exactly ARGV[5],
// a lapsed request the caller saw, is replaced), and indexes its id ARGV[4]
// with score ARGV[3] in the sorted sets KEYS[2] and KEYS[3], which are kept
// at least as long as the request. It returns {created, stored request}.
var createScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[5] then return {0, cur} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local ttl = tonumber(ARGV[2])
for i = 2, 3 do
  redis.call('ZADD', KEYS[i], ARGV[3], ARGV[4])
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, ''}
`)

// casScript replaces the request under KEYS[1] by ARGV[2], kept ARGV[3]
// milliseconds, only if it still reads ARGV[1]. It returns 1 when replaced,
// 0 when someone else wrote first and -1 when the request is gone.
var casScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

func (s *ApprovalStore) reqKey(id string) string { return s.key("apr:req:", id) }

func (s *ApprovalStore) tenantIndex(tenant string) string { return s.key("apr:idx:t:", tenant) }

func (s *ApprovalStore) allIndex() string { return s.key("apr:idx:", "all") }

// ttl keeps a request until it expires plus the retention.
func (s *ApprovalStore) ttl(r *gates.ApprovalRequest) int64 {
	if r.ExpiresAt.IsZero() {
		return millis(s.opts.ApprovalRetention)
	}
	return millis(time.Until(r.ExpiresAt) + s.opts.ApprovalRetention)
}

// Create stores req unless a live request with its ID exists, and returns
// the stored request and whether it was created now. A new request must be
// pending (an empty state means pending). One round trip, two when a lapsed
// request is replaced.
func (s *ApprovalStore) Create(ctx context.Context, req gates.ApprovalRequest) (gates.ApprovalRequest, bool, error) {
	if req.ID == "" {
		return gates.ApprovalRequest{}, false, errors.New("redisstore: approval request without an id")
	}
	if req.State == "" {
		req.State = gates.ApprovalPending
	}
	if req.State != gates.ApprovalPending {
		return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: %w: a new request must be pending, not %s", gates.ErrInvalidTransition, req.State)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: encode approval request: %w", err)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	keys := []string{s.reqKey(req.ID), s.tenantIndex(req.Tenant), s.allIndex()}
	lapsed := ""
	for range maxUpdateAttempts {
		v, err := createScript.Run(ctx, s.rdb, keys, data, s.ttl(&req), req.CreatedAt.UnixMilli(), req.ID, lapsed).Slice()
		if err != nil {
			return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: create approval request: %w", err)
		}
		if len(v) != 2 {
			return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: create approval request: unexpected reply of %d values", len(v))
		}
		if created, _ := v[0].(int64); created == 1 {
			// Hand back a copy decoded from what was stored.
			out, err := decodeRequest(data, time.Time{})
			return out, err == nil, err
		}
		cur, _ := v[1].(string)
		now := time.Now()
		old, err := decodeRequest([]byte(cur), now)
		if err != nil {
			return gates.ApprovalRequest{}, false, err
		}
		if !lapsedAt(&old, now) {
			return old, false, nil
		}
		// The same call asked again after its request lapsed: replace the
		// lapsed request, unless someone changes it meanwhile.
		lapsed = cur
	}
	return gates.ApprovalRequest{}, false, fmt.Errorf("redisstore: approval request %q: gave up after %d conflicting writes", req.ID, maxUpdateAttempts)
}

// Get returns the request, or gates.ErrNotFound. One round trip.
func (s *ApprovalStore) Get(ctx context.Context, id string) (gates.ApprovalRequest, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	data, err := s.rdb.Get(ctx, s.reqKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return gates.ApprovalRequest{}, gates.ErrNotFound
	}
	if err != nil {
		return gates.ApprovalRequest{}, fmt.Errorf("redisstore: get approval request: %w", err)
	}
	return decodeRequest(data, time.Now())
}

// Update applies fn to the request and stores the result, atomically: if
// another replica updates the request meanwhile, fn runs again on the newer
// request, so fn must only depend on the request it is given. An error from
// fn aborts the update and is returned as is. A change of state that
// gates.ValidateTransition refuses, or any change to a request already
// decided, fails with an error wrapping gates.ErrInvalidTransition. Two round
// trips when nobody interferes.
func (s *ApprovalStore) Update(ctx context.Context, id string, fn func(*gates.ApprovalRequest) error) (gates.ApprovalRequest, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	key := s.reqKey(id)
	for range maxUpdateAttempts {
		old, err := s.rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return gates.ApprovalRequest{}, gates.ErrNotFound
		}
		if err != nil {
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: read approval request: %w", err)
		}
		req, err := decodeRequest(old, time.Now())
		if err != nil {
			return gates.ApprovalRequest{}, err
		}
		tenant, state := req.Tenant, req.State
		if err := fn(&req); err != nil {
			return gates.ApprovalRequest{}, err
		}
		if req.ID != id || req.Tenant != tenant {
			// The indexes are by id and tenant; moving a request would
			// orphan it.
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: an update may not change the id or tenant of approval request %q", id)
		}
		if req.State != state {
			if err := gates.ValidateTransition(state, req.State); err != nil {
				return gates.ApprovalRequest{}, err
			}
		} else if state.Terminal() {
			return gates.ApprovalRequest{}, fmt.Errorf("%w: the request is already %s", gates.ErrInvalidTransition, state)
		}
		data, err := json.Marshal(req)
		if err != nil {
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: encode approval request: %w", err)
		}
		n, err := casScript.Run(ctx, s.rdb, []string{key}, old, data, s.ttl(&req)).Int()
		if err != nil {
			return gates.ApprovalRequest{}, fmt.Errorf("redisstore: write approval request: %w", err)
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

// List returns the requests that match the filter, oldest first. It reads
// the index of the filter's tenant (of requests without a tenant when it is
// empty; of every tenant's only with f.AnyTenant) and then the requests: two
// round trips. Ids whose request has expired are dropped from the index on
// the way.
func (s *ApprovalStore) List(ctx context.Context, f gates.ApprovalFilter) ([]gates.ApprovalRequest, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	index := s.tenantIndex(f.Tenant)
	if f.Tenant == "" && f.AnyTenant {
		index = s.allIndex()
	}
	ids, err := s.rdb.ZRange(ctx, index, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list approval requests: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.reqKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list approval requests: %w", err)
	}
	var out []gates.ApprovalRequest
	var gone []any
	now := time.Now()
	for i, v := range vals {
		data, ok := v.(string)
		if !ok {
			gone = append(gone, ids[i])
			continue
		}
		req, err := decodeRequest([]byte(data), now)
		if err != nil {
			return nil, err
		}
		if f.Matches(&req) {
			out = append(out, req)
		}
	}
	if len(gone) > 0 {
		// Best effort: a failure only leaves the ids for the next listing.
		s.rdb.ZRem(ctx, index, gone...)
	}
	// The index orders by millisecond; order exactly, as the memory store
	// does.
	slices.SortStableFunc(out, func(a, b gates.ApprovalRequest) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
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
