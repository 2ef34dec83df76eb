package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Options.
const (
	DefaultPrefix            = "axgate:"
	DefaultTimeout           = 200 * time.Millisecond
	DefaultClockSkew         = time.Minute
	DefaultApprovalRetention = 24 * time.Hour
)

// Options configure the stores. The zero value uses the defaults.
type Options struct {
	// Prefix starts every key; default "axgate:". Give each enforcer that must
	// not share state with another its own prefix. For Redis Cluster include
	// a hash tag, such as "{axgate}:".
	Prefix string
	// Timeout bounds each operation, including its retries; default 200ms.
	// Past it the operation fails and the gate refuses the call.
	Timeout time.Duration
	// ClockSkew is how long a used token id is kept after the token expires,
	// because replicas whose clocks run behind still accept the token for
	// that long; default one minute. It should be at least the leeway the
	// token verifier allows.
	ClockSkew time.Duration
	// ApprovalRetention is how long an approval request is kept after it
	// expires, so that approvers and auditors can still see how it ended;
	// default 24 hours.
	ApprovalRetention time.Duration
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ClockSkew <= 0 {
		o.ClockSkew = DefaultClockSkew
	}
	if o.ApprovalRetention <= 0 {
		o.ApprovalRetention = DefaultApprovalRetention
	}
	return o
}

// Stores are the four stores on one Redis, ready to hand to an enforcer.
type Stores struct {
	Replay      *ReplayStore
	Limiter     *Limiter
	Idempotency *IdempotencyStore
	Approvals   *ApprovalStore

	client redis.UniversalClient
	owned  bool
}

// New returns the four stores on client. The client stays the caller's: Close
// on the result does not close it. See the package documentation on
// timeouts for how the client should be configured.
func New(client redis.UniversalClient, opts Options) *Stores {
	return &Stores{
		Replay:      NewReplayStore(client, opts),
		Limiter:     NewLimiter(client, opts),
		Idempotency: NewIdempotencyStore(client, opts),
		Approvals:   NewApprovalStore(client, opts),
		client:      client,
	}
}

// Client returns the Redis client the stores use.
func (s *Stores) Client() redis.UniversalClient { return s.client }

// Close closes the client when Open made it; a client passed to New is left
// open.
func (s *Stores) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// ParseURL parses a Redis URL (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix://) into client options suited to the stores:
// context deadlines reach the socket, so Options.Timeout is honoured, and
// dialing gives up after a second.
func ParseURL(url string) (*redis.Options, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	o.ContextTimeoutEnabled = true
	if o.DialTimeout == 0 || o.DialTimeout > time.Second {
		o.DialTimeout = time.Second
	}
	return o, nil
}

// Open connects to the Redis at url (see ParseURL), checks that it answers,
// and returns the four stores. Close the result to close the connection.
func Open(ctx context.Context, url string, opts Options) (*Stores, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(o)
	opts = opts.withDefaults()
	pctx, cancel := context.WithTimeout(ctx, max(opts.Timeout, o.DialTimeout))
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redisstore: redis at %s does not answer: %w", redactURL(o), err)
	}
	s := New(client, opts)
	s.owned = true
	return s, nil
}

// redactURL names a server without its password, for error messages.
func redactURL(o *redis.Options) string {
	return fmt.Sprintf("%s %s db %d", o.Network, o.Addr, o.DB)
}

// errNoExpiry refuses a record that would otherwise be kept forever.
var errNoExpiry = errors.New("redisstore: a positive ttl is required")

// base is what every store shares: the client, the options and the key
// prefix.
type base struct {
	rdb  redis.UniversalClient
	opts Options
}

func newBase(client redis.UniversalClient, opts Options) base {
	return base{rdb: client, opts: opts.withDefaults()}
}

// ctx bounds one operation by the timeout.
func (b base) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.opts.Timeout)
}

func (b base) key(kind, id string) string { return b.opts.Prefix + kind + id }

// millis is d in whole milliseconds, at least one, for PX arguments.
func millis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}
