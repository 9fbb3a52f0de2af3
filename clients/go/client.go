package lockstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
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

// Defaults, chosen against the server's (keepalive 3s + 3s, heartbeat silence 3 intervals): a
// holder cut off from the server reports its locks lost before the server can free them.
const (
	// DefaultResumeGrace is how long the server keeps the client's locks after its stream breaks.
	DefaultResumeGrace = 5 * time.Second
	// DefaultHeartbeatInterval is how often each side speaks on an idle session stream. Shorter
	// than the TypeScript SDK's 5s: grpc-go pings no more often than every 10s, so the Go client
	// notices a dead path by the silence of the server's heartbeats instead.
	DefaultHeartbeatInterval = 1 * time.Second
)

// gRPC keepalive: a ping after 10s without activity (grpc-go's minimum), the connection dropped
// when it is not answered within the server's own keepalive timeout. Heartbeats notice a dead
// path sooner; the pings free a dead connection for the next session.
var keepalivePings = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}

type clientOptions struct {
	owner             string
	resumeGrace       time.Duration
	heartbeatInterval time.Duration
	creds             credentials.TransportCredentials
	dialOptions       []grpc.DialOption
}

// heartbeat is the interval asked of the server: the one set, but at most a third of the
// grace, so that a live stream is heard from several times within it (see session.watch).
func (o *clientOptions) heartbeat() time.Duration {
	if o.resumeGrace > 0 && o.heartbeatInterval > o.resumeGrace/heartbeatsPerGrace {
		return o.resumeGrace / heartbeatsPerGrace
	}
	return o.heartbeatInterval
}

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

// WithDefaultOwner names the caller in every request that does not name itself (WithOwner),
// for operators' eyes (at most 256 bytes of UTF-8, no control characters).
func WithDefaultOwner(owner string) ClientOption {
	return func(o *clientOptions) { o.owner = owner }
}

// WithResumeGrace sets how long the server keeps this client's locks after its stream breaks,
// for the client to take them over on a new stream (default 5s; 0: a broken stream loses them
// at once; otherwise at least 300ms). The client counts the grace from the last message it
// heard from the server, not from when it noticed the break, and reports the locks lost a tenth
// of the grace before it is over: the server, which counts from its own later notice, cannot
// have freed them yet.
func WithResumeGrace(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.resumeGrace = d }
}

// WithHeartbeatInterval sets the heartbeat interval in both directions (default 1s; at most a
// third of the resume grace; 0: none, 100ms to 10m otherwise). After two intervals without a
// word from the server, held locks are in doubt and the session is resumed on a new stream.
// Without heartbeats the client cannot tell a quiet server from a dead path: a break is then
// noticed by gRPC keepalive only (10s and more), and loses the locks at once unless the server
// was heard from within the grace.
func WithHeartbeatInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.heartbeatInterval = d }
}

// WithTransportCredentials makes Dial connect with these credentials (TLS); without it Dial
// connects in plaintext.
func WithTransportCredentials(creds credentials.TransportCredentials) ClientOption {
	return func(o *clientOptions) { o.creds = creds }
}

// WithDialOptions are passed to grpc.NewClient by Dial (per-RPC credentials, interceptors;
// grpc.WithKeepaliveParams replaces the client's keepalive settings).
func WithDialOptions(opts ...grpc.DialOption) ClientOption {
	return func(o *clientOptions) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client takes locks on a lockstream server, through one endpoint at a time of those it was
// made with. Safe for concurrent use.
type Client struct {
	endpoints  *endpoints
	rpc        pb.LockServiceClient // on the current endpoint
	conns      []*grpc.ClientConn   // closed by Close when Dial made them
	options    clientOptions
	optionsErr error // New's options were invalid: every call returns it

	mu      sync.Mutex
	session *session
	closed  bool
	done    chan struct{} // closed when the current session ends (see Done)
	doneErr error
}

// Dial makes a Client for the server at target: "host:port", or a gRPC target URI
// ("dns:///locks.internal:50051", "unix:///run/lockstream.sock"). A malformed target or option
// is an error matching ErrInvalidArgument. Dial does not connect: an unreachable server is
// found out by the first Lock, which then fails with ErrUnavailable (or waits until its context
// ends while the connection is being attempted).
//
// A DNS name that resolves to several addresses is one target, and needs nothing more: gRPC's
// resolver connects to one of them, and to the next when a connection to one fails or breaks
// (not while one is merely silent). To fail over between endpoints the client chooses, list
// them with DialEndpoints.
func Dial(target string, opts ...ClientOption) (*Client, error) {
	options := newClientOptions(opts)
	if err := options.validate(); err != nil {
		return nil, err
	}
	if problem := checkTarget(target); problem != "" {
		return nil, invalidArgument("", "%s", problem)
	}
	return dial([]string{target}, options)
}

// DialEndpoints makes a Client for a lockstream service reachable at several endpoints (each as
// Dial takes it), for instance the instances of one deployment on the same ZooKeeper, or one
// instance behind several proxies. Requests go to one endpoint at a time, the first to begin
// with. When the session stream breaks or falls silent, or an endpoint refuses or does not
// answer a resume, the session is resumed on the next endpoint in turn, round the list, until
// one takes it or the resume grace, counted from the last message heard, runs out: held locks
// are in doubt meanwhile (WithOnInDoubt), confirmed with the same fencing tokens once the
// session is resumed, and lost only when the grace runs out or an instance answers that it does
// not know the session. New Lock calls wait for the session meanwhile.
//
// Each attempt on an endpoint, to open the session or to resume it, is given at most 1s to
// answer (a resume, at most a third of what is left of the grace), so that a frozen endpoint
// leaves time for the others. A list with a single endpoint is the same as Dial. An empty list,
// a malformed endpoint or one listed twice is an error matching ErrInvalidArgument.
func DialEndpoints(endpoints []string, opts ...ClientOption) (*Client, error) {
	options := newClientOptions(opts)
	if err := options.validate(); err != nil {
		return nil, err
	}
	if len(endpoints) == 0 {
		return nil, invalidArgument("", "no endpoints: DialEndpoints needs at least one address")
	}
	first := make(map[string]int, len(endpoints))
	for i, target := range endpoints {
		if problem := checkTarget(target); problem != "" {
			return nil, invalidArgument("", "endpoints[%d]: %s", i, problem)
		}
		// Host names are case-insensitive: the same server twice would be tried twice per round.
		key := target
		if host, port, err := net.SplitHostPort(target); err == nil {
			key = net.JoinHostPort(strings.ToLower(host), port)
		}
		if j, seen := first[key]; seen {
			return nil, invalidArgument("", "endpoints[%d]: address %s is listed twice (endpoints[%d])", i, strconv.Quote(target), j)
		}
		first[key] = i
	}
	return dial(slices.Clone(endpoints), options)
}

// dial makes a Client with one gRPC connection per endpoint (validated).
func dial(targets []string, options clientOptions) (*Client, error) {
	creds := options.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	dialOptions := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithKeepaliveParams(keepalivePings)}, options.dialOptions...)
	conns := make([]*grpc.ClientConn, 0, len(targets))
	shared := make([]grpc.ClientConnInterface, 0, len(targets))
	for _, target := range targets {
		conn, err := grpc.NewClient(target, dialOptions...)
		if err != nil {
			for _, made := range conns {
				_ = made.Close()
			}
			return nil, invalidArgument("", "address %s: %v", strconv.Quote(target), err)
		}
		conns = append(conns, conn)
		shared = append(shared, conn)
	}
	c := newClient(newEndpoints(targets, shared), options)
	c.conns = conns
	return c, nil
}

// New makes a Client on a connection the caller owns (and closes). Invalid options make every
// call of the client fail with an error matching ErrInvalidArgument.
func New(conn grpc.ClientConnInterface, opts ...ClientOption) *Client {
	c := newClient(newEndpoints([]string{""}, []grpc.ClientConnInterface{conn}), newClientOptions(opts))
	if err := c.options.validate(); err != nil {
		c.optionsErr = err
	}
	return c
}

func newClient(endpoints *endpoints, options clientOptions) *Client {
	return &Client{endpoints: endpoints, rpc: pb.NewLockServiceClient(endpoints), options: options, done: make(chan struct{})}
}

func newClientOptions(opts []ClientOption) clientOptions {
	options := clientOptions{resumeGrace: DefaultResumeGrace, heartbeatInterval: DefaultHeartbeatInterval}
	for _, opt := range opts {
		opt(&options)
	}
	return options
}

// RPC is the generated stub on the client's connection (the current endpoint's, with
// DialEndpoints), for DescribeLock, ListLocks and the rest. Its errors are gRPC status errors,
// as the stubs return them.
func (c *Client) RPC() pb.LockServiceClient { return c.rpc }

// Done is closed when the session that carries the client's locks ends: every lock it held is
// lost (the server is gone, or could not be heard from within the resume grace), or the client
// was closed. Err says which. Like etcd's Session.Done, one signal for all the client's locks;
// unlike an etcd session, a Client is not over then: a later Lock opens a new session, and Done
// a new channel.
func (c *Client) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// Err says why Done was closed (errors.Is(err, ErrLost), or ErrClosed), nil while it is not.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doneErr
}

// Close releases every lock of the client, ends its session and closes the connections Dial
// (or DialEndpoints) made. Waiting Lock calls return an error matching ErrClosed at once, and so
// does every call after Close. Close waits a little (at most 5s) for the server to confirm the
// releases.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.session
	c.endDone(closedError(""))
	c.mu.Unlock()
	if s != nil {
		s.close()
	}
	var failed error
	for _, conn := range c.conns {
		if err := conn.Close(); err != nil && failed == nil {
			failed = transportError("", "closing the connection", err)
		}
	}
	return failed
}

// endDone closes the current Done channel with err. Called with mu held.
func (c *Client) endDone(err error) {
	select {
	case <-c.done:
		if errors.Is(err, ErrClosed) {
			c.doneErr = err
		}
	default:
		c.doneErr = err
		close(c.done)
	}
}

// sessionEnded: s ended, with why.
func (c *Client) sessionEnded(s *session, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == s {
		c.endDone(why)
	}
}

// currentSession is the session, started now if there is none (or the last one ended); it
// connects in the background, and requests wait for it with their own context.
func (c *Client) currentSession() (*session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	if c.session == nil || c.session.over() {
		select {
		case <-c.done:
			c.done, c.doneErr = make(chan struct{}), nil
		default:
		}
		c.session = startSession(c.endpoints, c.options, c.sessionEnded)
	}
	return c.session, true
}

type lockOptions struct {
	targets     []Target // a multi-lock's locks (LockAll)
	mode        Mode
	waitTimeout *time.Duration
	try         bool // TryLock: "not free" is ErrLocked
	owner       string
	value       []byte
	limit       int32
	weight      *int32
	onQueued    func(ahead int)
	onInDoubt   func()
	onConfirmed func()
	onRevoke    func(reason string, deadline time.Time)
}

// LockOption configures one Lock call.
type LockOption func(*lockOptions)

// WithMode sets how the lock is shared (default Mutex).
func WithMode(mode Mode) LockOption { return func(o *lockOptions) { o.mode = mode } }

// WithWaitTimeout gives up after waiting this long in the queue, with ErrTimeout (the server
// counts it; the context passed to Lock still applies). Negative: ErrInvalidArgument.
func WithWaitTimeout(d time.Duration) LockOption {
	return func(o *lockOptions) { o.waitTimeout = &d }
}

// WithOwner names the caller, for operators' eyes (at most 256 bytes of UTF-8, no control
// characters).
func WithOwner(owner string) LockOption { return func(o *lockOptions) { o.owner = owner } }

// WithValue publishes a value (at most 1 KiB) with the lock while it is held: where to reach the
// holder, say. SetValue replaces it.
func WithValue(value []byte) LockOption { return func(o *lockOptions) { o.value = value } }

// WithLimit makes the request a Semaphore one, of this capacity (1 to 1,000,000).
func WithLimit(limit int) LockOption {
	return func(o *lockOptions) { o.limit = int32(min(max(limit, -1), MaxLimit+1)); o.mode = Semaphore }
}

// WithWeight sets how much of a semaphore the request takes (default 1; at most the limit).
func WithWeight(weight int) LockOption {
	return func(o *lockOptions) { w := int32(min(max(weight, -1), MaxLimit+1)); o.weight = &w }
}

// WithOnQueued is called while the request waits, with how many are ahead of it, each time the
// number changes.
func WithOnQueued(f func(ahead int)) LockOption { return func(o *lockOptions) { o.onQueued = f } }

// WithOnInDoubt is called when the held lock becomes in doubt (see Lock.InDoubt), WithOnConfirmed
// when it is confirmed again. Called one at a time, in order; they must not block.
func WithOnInDoubt(f func()) LockOption { return func(o *lockOptions) { o.onInDoubt = f } }

// WithOnConfirmed: see WithOnInDoubt.
func WithOnConfirmed(f func()) LockOption { return func(o *lockOptions) { o.onConfirmed = f } }

// WithOnRevokeRequested is called for each request to release the held lock (RevokeLock): at
// most twice, a cooperative one (zero deadline) and then one with the deadline after which the
// lock is taken away; or once, with or without a deadline. It must not block.
func WithOnRevokeRequested(f func(reason string, deadline time.Time)) LockOption {
	return func(o *lockOptions) { o.onRevoke = f }
}

// Lock waits until the lock named name is granted, and returns it. When ctx ends first, the
// request leaves the queue and Lock returns an error matching ErrCanceled or ErrTimeout (and
// ctx's error). Every error is an *Error: ErrTimeout after WithWaitTimeout, ErrInvalidArgument
// for a request the server would refuse (checked before sending: the client's other locks are
// not touched), ErrUnavailable when the server cannot be reached, ErrClosed after Close.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	options := lockOptions{mode: Mutex, owner: c.options.owner}
	for _, opt := range opts {
		opt(&options)
	}
	if options.targets != nil {
		names := make([]string, len(options.targets))
		for i, target := range options.targets {
			names[i] = target.Name
		}
		name = strings.Join(names, "+")
	}
	if c.optionsErr != nil {
		return nil, c.optionsErr
	}
	if err := options.validate(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, contextError(name, err)
	}
	for {
		s, open := c.currentSession()
		if !open {
			return nil, closedError(name)
		}
		lock, err := s.acquire(ctx, name, options)
		// The session ended between taking it and queuing on it: take the next one.
		if errors.Is(err, errSessionOver) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return lock, nil
	}
}

// Target is one lock of a multi-lock: its name and mode (zero: Mutex) and, for a Semaphore, its
// limit and this request's weight (zero: 1).
type Target struct {
	Name   string
	Mode   Mode
	Limit  int
	Weight int
}

func (t Target) mode() Mode {
	if t.Mode == 0 {
		return Mutex
	}
	return t.Mode
}

// LockAll takes every lock in targets at once, or none: the server queues them in one step
// (one place in a single order across all locks, so two multi-locks never deadlock), and grants
// them together. 2 to 16 distinct locks. One wait (WithWaitTimeout, ctx), one Unlock and one
// loss for the whole set; Tokens() has each lock's fencing token. WithMode and WithLimit do not
// apply.
func (c *Client) LockAll(ctx context.Context, targets []Target, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, "", append(opts, func(o *lockOptions) {
		o.targets = append([]Target{}, targets...)
		o.mode = Mutex
		o.limit = 0
		o.weight = nil
	})...)
}

// TryLock takes the lock only if it can be granted at once, never jumping the queue. When it is
// not free, TryLock returns a nil Lock and an error matching ErrLocked, having queued nothing:
//
//	lock, err := client.TryLock(ctx, "cache/rebuild")
//	if errors.Is(err, lockstream.ErrLocked) {
//		return nil // someone else is rebuilding the cache
//	}
//
// as etcd's concurrency.Mutex.TryLock answers concurrency.ErrLocked.
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithWaitTimeout(0), func(o *lockOptions) { o.try = true })...)
}
