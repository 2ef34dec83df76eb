package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axgate/axgate/gates"
	"github.com/axgate/axgate/token"
)

// Defaults of Options.
const (
	defaultPrefix            = "axgate:"
	defaultTimeout           = 200 * time.Millisecond
	defaultClockSkew         = time.Minute
	defaultApprovalRetention = 24 * time.Hour
	// defaultMinPoolSize is the least connections Open's pool holds.
	defaultMinPoolSize = 64
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
	// PoolSize is how many connections the client Open makes keeps at
	// most; default the larger of 64 and 10 per
	// GOMAXPROCS. A call holds one connection for one round trip (the
	// stores never hold one across calls), so size it for the calls the
	// process runs at once that reach a store: with too few, calls wait for
	// a connection, and a wait past PoolTimeout is refused as store_busy.
	// Ignored by New (configure your own client).
	PoolSize int
	// PoolTimeout is how long a call waits for a free connection of the
	// client Open makes; default a quarter of Timeout. Open's client retries
	// a failed command once (max_retries in the URL overrides it), so a wait
	// for a connection, retried, ends as a pool timeout (503, reason
	// store_busy) within Timeout rather than as the operation's deadline,
	// which reads as Redis being down: keep 2 × PoolTimeout + 30ms below
	// Timeout. Ignored by New.
	PoolTimeout time.Duration
	// MinIdleConns is how many idle connections Open's client keeps open,
	// so that a burst after a quiet spell (or on a fresh replica) does not
	// wait for dials; default a quarter of PoolSize. Ignored by New.
	MinIdleConns int
	// Logger receives Open's warnings (a Redis without persistence);
	// slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = defaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.ClockSkew <= 0 {
		o.ClockSkew = defaultClockSkew
	}
	if o.ApprovalRetention <= 0 {
		o.ApprovalRetention = defaultApprovalRetention
	}
	if o.PoolSize <= 0 {
		o.PoolSize = max(defaultMinPoolSize, 10*runtime.GOMAXPROCS(0))
	}
	if o.PoolTimeout <= 0 {
		o.PoolTimeout = o.Timeout / 4
	}
	if o.MinIdleConns <= 0 {
		o.MinIdleConns = o.PoolSize / 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stores are the four stores on one Redis, ready to hand to an enforcer.
type Stores struct {
	Replay      token.ReplayStore
	Limiter     gates.Limiter
	Idempotency gates.IdempotencyStore
	Approvals   gates.ApprovalStore

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

// Open connects to the Redis at url, checks that it answers, and returns the four stores.
//
// The url is as ParseURL reads it. Close the result to close the
// connection.
//
// Its client's pool is sized by Options.PoolSize, PoolTimeout and
// MinIdleConns (pool_size, pool_timeout and min_idle_conns in the URL take
// precedence). It then asks Redis whether it persists its data (CONFIG GET
// appendonly and save) and logs a warning on Options.Logger when it does
// not: a restarted Redis would have forgotten which tokens were spent. A
// server where CONFIG is disabled or renamed is not asked (logged at debug
// level).
func Open(ctx context.Context, url string, opts Options) (*Stores, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if o.PoolSize == 0 {
		o.PoolSize = opts.PoolSize
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = opts.PoolTimeout
	}
	if o.MinIdleConns == 0 {
		o.MinIdleConns = opts.MinIdleConns
	}
	if o.MaxRetries == 0 {
		// go-redis retries three times by default, with backoffs of up to
		// 170ms in all: a wait for a connection would end as the
		// operation's deadline, never as a pool timeout. One retry still
		// replaces a connection a Redis restart broke.
		o.MaxRetries = openMaxRetries
	}
	client := redis.NewClient(o)
	pctx, cancel := context.WithTimeout(ctx, max(opts.Timeout, o.DialTimeout))
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redisstore: redis at %s does not answer: %w", redactURL(o), err)
	}
	checkPersistence(pctx, client, opts.Logger, redactURL(o))
	s := New(client, opts)
	s.owned = true
	return s, nil
}

// openMaxRetries is how often Open's client retries a failed command.
const openMaxRetries = 1

// checkPersistence asks Redis how it persists its data and warns when it
// does not. It never fails Open: a server that does not answer CONFIG
// (disabled, renamed, not allowed to this user) is skipped.
func checkPersistence(ctx context.Context, c redis.UniversalClient, log *slog.Logger, server string) {
	aof, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		log.DebugContext(ctx, "redisstore: cannot ask redis whether it persists its data (CONFIG GET); not checked", "server", server, "error", err)
		return
	}
	save, err := c.ConfigGet(ctx, "save").Result()
	if err != nil {
		log.DebugContext(ctx, "redisstore: cannot ask redis whether it persists its data (CONFIG GET); not checked", "server", server, "error", err)
		return
	}
	a, aok := aof["appendonly"]
	sv, sok := save["save"]
	if !aok || !sok {
		log.DebugContext(ctx, "redisstore: redis did not say whether it persists its data; not checked", "server", server)
		return
	}
	if msg := persistenceRisk(a, sv); msg != "" {
		log.WarnContext(ctx, msg, "server", server, "appendonly", a, "save", sv)
	}
}

// persistenceRisk returns the warning for a Redis whose CONFIG GET answers
// appendonly and save as given, or "" when it keeps every write (AOF).
func persistenceRisk(appendonly, save string) string {
	switch {
	case strings.EqualFold(appendonly, "yes"):
		return ""
	case strings.TrimSpace(save) == "":
		return "redisstore: redis persists nothing (appendonly no, no save points): after a restart it forgets which tokens were spent, and spent confirmation and approval tokens still within their lifetime are accepted again; run it with appendonly yes and appendfsync everysec or always"
	default:
		return "redisstore: redis persists only snapshots (appendonly no, save " + save + "): after a restart it forgets the tokens spent since the last snapshot, and those spent confirmation and approval tokens still within their lifetime are accepted again; run it with appendonly yes and appendfsync everysec or always"
	}
}

// redactURL names a server without its password, for error messages.
func redactURL(o *redis.Options) string {
	return fmt.Sprintf("%s %s db %d", o.Network, o.Addr, o.DB)
}

// storeErr wraps the error of an operation; a wait for a pooled connection
// that timed out also matches gates.ErrStoreBusy, which the gates refuse
// with reason store_busy: Redis is healthy, the pool was too small.
func storeErr(what string, err error) error {
	if errors.Is(err, redis.ErrPoolTimeout) {
		return fmt.Errorf("redisstore: %s: %w: %w", what, gates.ErrStoreBusy, err)
	}
	return fmt.Errorf("redisstore: %s: %w", what, err)
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
