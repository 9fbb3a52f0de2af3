// The Client: dialing one or several endpoints, the session that carries its locks, Done and
// Close, and Lock, LockAll and TryLock.

package lockstream

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Client takes locks on a lockstream server, through one endpoint at a time of those it was
// made with. Safe for concurrent use.
type Client struct {
	endpoints  *endpoints
	rpc        pb.LockServiceClient // on the current endpoint
	conns      []*grpc.ClientConn   // closed by Close when Dial made them
	options    clientOptions
	optionsErr error // New's options were invalid: every call returns it

	mu         sync.Mutex
	session    *session
	candidates map[*candidate]struct{} // each Campaign's, until its candidacy is over
	closed     bool
	done       chan struct{} // closed when the current session ends (see Done)
	doneErr    error
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

// Close releases every lock of the client, resigns every leadership and withdraws every
// candidate of its elections, ends its session and closes the connections Dial (or
// DialEndpoints) made. Waiting Lock and Campaign calls return an error matching ErrClosed, and
// so does every call after Close. Close waits a little (at most 5s) for the server to confirm
// the releases.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.session
	candidates := c.candidatesNow()
	c.endDone(closedError(""))
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { closeCandidates(candidates); close(done) }()
	if s != nil {
		s.close()
	}
	<-done
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
