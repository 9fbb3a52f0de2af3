package lockstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Mode is how a lock is shared.
type Mode int

const (
	// Mutex is exclusive: nobody else holds the lock in any mode.
	Mutex Mode = iota + 1
	// Read is shared with other readers, never with a writer.
	Read
	// Write is exclusive, like Mutex; the usual name beside Read.
	Write
	// Semaphore is counted: holders whose weights add up to at most the limit (WithLimit).
	Semaphore
)

func (m Mode) String() string {
	switch m {
	case Mutex:
		return "mutex"
	case Read:
		return "read"
	case Write:
		return "write"
	case Semaphore:
		return "semaphore"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) proto() pb.LockMode {
	switch m {
	case Mutex:
		return pb.LockMode_LOCK_MODE_MUTEX
	case Read:
		return pb.LockMode_LOCK_MODE_READ
	case Write:
		return pb.LockMode_LOCK_MODE_WRITE
	case Semaphore:
		return pb.LockMode_LOCK_MODE_SEMAPHORE
	}
	return pb.LockMode_LOCK_MODE_UNSPECIFIED
}

// Defaults, as the TypeScript SDK's.
const (
	DefaultResumeGrace       = 5 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
)

type clientOptions struct {
	owner             string
	resumeGrace       time.Duration
	heartbeatInterval time.Duration
	creds             credentials.TransportCredentials
	dialOptions       []grpc.DialOption
}

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

// WithDefaultOwner names the caller in every request that does not name itself (WithOwner),
// for operators' eyes.
func WithDefaultOwner(owner string) ClientOption {
	return func(o *clientOptions) { o.owner = owner }
}

// WithResumeGrace sets how long the server keeps this client's locks after its stream breaks,
// for the client to take them over on a new stream (default 5s; 0: a broken stream loses them
// at once).
func WithResumeGrace(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.resumeGrace = d }
}

// WithHeartbeatInterval sets the heartbeat interval in both directions (default 5s; 0: none).
// Three intervals without a word from the server count as a broken stream.
func WithHeartbeatInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.heartbeatInterval = d }
}

// WithTransportCredentials makes Dial connect with these credentials (TLS); without it Dial
// connects in plaintext.
func WithTransportCredentials(creds credentials.TransportCredentials) ClientOption {
	return func(o *clientOptions) { o.creds = creds }
}

// WithDialOptions are passed to grpc.NewClient by Dial (per-RPC credentials, interceptors).
func WithDialOptions(opts ...grpc.DialOption) ClientOption {
	return func(o *clientOptions) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client takes locks on one lockstream server. Safe for concurrent use.
type Client struct {
	rpc     pb.LockServiceClient
	conn    *grpc.ClientConn // closed by Close when Dial made it
	options clientOptions

	mu      sync.Mutex
	session *session
	closed  bool
}

// Dial connects to a lockstream server at target ("host:port").
func Dial(target string, opts ...ClientOption) (*Client, error) {
	options := newClientOptions(opts)
	creds := options.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, options.dialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, err
	}
	return &Client{rpc: pb.NewLockServiceClient(conn), conn: conn, options: options}, nil
}

// New makes a Client on a connection the caller owns (and closes).
func New(conn grpc.ClientConnInterface, opts ...ClientOption) *Client {
	return &Client{rpc: pb.NewLockServiceClient(conn), options: newClientOptions(opts)}
}

func newClientOptions(opts []ClientOption) clientOptions {
	options := clientOptions{resumeGrace: DefaultResumeGrace, heartbeatInterval: DefaultHeartbeatInterval}
	for _, opt := range opts {
		opt(&options)
	}
	return options
}

// RPC is the generated stub on the client's connection, for DescribeLock, ListLocks and the rest.
func (c *Client) RPC() pb.LockServiceClient { return c.rpc }

// Close releases every lock of the client, ends its session and closes the connection Dial made.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.session
	c.mu.Unlock()
	if s != nil {
		s.close()
	}
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

// currentSession is the open session, opened now if there is none (or the last one ended).
func (c *Client) currentSession() (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.session == nil || c.session.over() {
		s, err := openSession(c.rpc, c.options)
		if err != nil {
			return nil, err
		}
		c.session = s
	}
	return c.session, nil
}

type lockOptions struct {
	targets     []Target // a multi-lock's locks (LockAll)
	mode        Mode
	waitTimeout *time.Duration
	owner       string
	value       []byte
	limit       int32
	weight      *int32
	onQueued    func(ahead int)
}

// LockOption configures one Lock call.
type LockOption func(*lockOptions)

// WithMode sets how the lock is shared (default Mutex).
func WithMode(mode Mode) LockOption { return func(o *lockOptions) { o.mode = mode } }

// WithWaitTimeout gives up after waiting this long in the queue, with ErrTimeout (the server
// counts it; the context passed to Lock still applies).
func WithWaitTimeout(d time.Duration) LockOption {
	return func(o *lockOptions) { o.waitTimeout = &d }
}

// WithOwner names the caller, for operators' eyes.
func WithOwner(owner string) LockOption { return func(o *lockOptions) { o.owner = owner } }

// WithValue publishes a value (at most 1 KiB) with the lock while it is held: where to reach the
// holder, say. SetValue replaces it.
func WithValue(value []byte) LockOption { return func(o *lockOptions) { o.value = value } }

// WithLimit makes the request a Semaphore one, of this capacity.
func WithLimit(limit int) LockOption {
	return func(o *lockOptions) { o.limit = int32(limit); o.mode = Semaphore }
}

// WithWeight sets how much of a semaphore the request takes (default 1).
func WithWeight(weight int) LockOption {
	return func(o *lockOptions) { w := int32(weight); o.weight = &w }
}

// WithOnQueued is called while the request waits, with how many are ahead of it, each time the
// number changes.
func WithOnQueued(f func(ahead int)) LockOption { return func(o *lockOptions) { o.onQueued = f } }

// Lock waits until the lock named name is granted, and returns it. When ctx ends first, the
// request leaves the queue and Lock returns ctx's error. Errors from the server are *Error
// (errors.Is(err, ErrTimeout) after WithWaitTimeout).
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	options := lockOptions{mode: Mutex, owner: c.options.owner}
	for _, opt := range opts {
		opt(&options)
	}
	for {
		s, err := c.currentSession()
		if err != nil {
			return nil, err
		}
		lock, err := s.acquire(ctx, name, options)
		// The session ended between taking it and queuing on it: take the next one.
		if errors.Is(err, errSessionOver) {
			continue
		}
		return lock, err
	}
}

// Target is one lock of a multi-lock: its name and mode (and, for a Semaphore, its limit and
// this request's weight; zero weight means 1).
type Target struct {
	Name   string
	Mode   Mode
	Limit  int
	Weight int
}

// LockAll takes every lock in targets at once, or none: the server queues them in one step
// (one place in a single order across all locks, so two multi-locks never deadlock), and grants
// them together. One wait (WithWaitTimeout, ctx), one Unlock and one loss for the whole set;
// Tokens() has each lock's fencing token. WithMode and WithLimit do not apply.
func (c *Client) LockAll(ctx context.Context, targets []Target, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, "", append(opts, func(o *lockOptions) { o.targets = targets })...)
}

// TryLock takes the lock only if it can be granted at once; otherwise it returns an error
// matching ErrTimeout, having queued nothing.
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithWaitTimeout(0))...)
}
