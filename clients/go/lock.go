// A held Lock: its tokens and mode, lost and in doubt, revoke requests, and what its holder can
// do with it (Unlock, SetValue, Downgrade).

package lockstream

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
)

// LockToken is the fencing token of one lock of a multi-lock.
type LockToken struct {
	Name  string
	Token uint64
}

// Lock is a held lock. Its methods are safe for concurrent use.
type Lock struct {
	s      *session
	req    *request
	token  uint64
	tokens []LockToken

	ctx    context.Context
	cancel context.CancelCauseFunc

	mode atomic.Int32

	once    sync.Once
	lost    chan struct{}
	lostErr error // set before lost is closed

	doubtMu     sync.Mutex // one doubt change (and its callback) at a time
	serverDoubt bool       // the server said in_doubt (its ZooKeeper connection is interrupted)
	pathDoubt   bool       // the path to the server is broken or silent
	inDoubt     atomic.Bool

	revokeMu   sync.Mutex
	revokeOnce sync.Once
	revoke     chan struct{}
	reason     string
	deadline   time.Time

	opMu sync.Mutex // one SetValue or Downgrade at a time
}

func newLock(s *session, req *request, acquired *pb.AcquireAcquired) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lock{
		s: s, req: req, token: acquired.GetFencingToken(), ctx: ctx, cancel: cancel,
		lost: make(chan struct{}), revoke: make(chan struct{}),
	}
	l.mode.Store(int32(modeOf(req.message.GetMode())))
	for _, token := range acquired.GetTokens() {
		l.tokens = append(l.tokens, LockToken{Name: token.GetName(), Token: token.GetFencingToken()})
	}
	return l
}

func modeOf(mode pb.LockMode) Mode {
	switch mode {
	case pb.LockMode_LOCK_MODE_READ:
		return Read
	case pb.LockMode_LOCK_MODE_WRITE:
		return Write
	case pb.LockMode_LOCK_MODE_SEMAPHORE:
		return Semaphore
	}
	return Mutex
}

// Name is the lock's name (a multi-lock's names joined with "+").
func (l *Lock) Name() string { return l.req.name }

// Tokens is a multi-lock's fencing token for each of its locks, in the order asked for; nil for
// a single lock (see Token).
func (l *Lock) Tokens() []LockToken { return slices.Clone(l.tokens) }

// Mode is how the lock is held now (Read after a Downgrade).
func (l *Lock) Mode() Mode { return Mode(l.mode.Load()) }

// Token is the fencing token: it grows with every holder of the lock. Pass it to what the lock
// protects, so that it can refuse a holder whose lock was lost.
func (l *Lock) Token() uint64 { return l.token }

// Lost is closed when the lock is lost: whatever it protects may be held by someone else now.
// That includes a path to the server that stayed silent or broken for nearly the resume grace
// (counted from the last message heard): the lock is reported lost before the server can free
// it. Not closed by Unlock.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err says why the lock was lost (errors.Is(err, ErrLost)), or nil while it is not.
func (l *Lock) Err() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

// Context is cancelled when the lock is lost, when its release is requested (RevokeLock;
// context.Cause is then ErrRevoked) or when it is unlocked: do the protected work under it.
func (l *Lock) Context() context.Context { return l.ctx }

// InDoubt reports whether the lock cannot be vouched for right now: the server's ZooKeeper
// connection is interrupted (nothing else is granted the lock meanwhile), or this client has not
// heard from the server for two heartbeat intervals or its stream broke (the session is being
// resumed; the lock is confirmed again, or lost, within the resume grace).
func (l *Lock) InDoubt() bool { return l.inDoubt.Load() }

type doubtSource int

const (
	serverDoubt doubtSource = iota
	pathDoubt
)

// setDoubt records one source of doubt, and tells WithOnInDoubt / WithOnConfirmed when the lock
// changes between in doubt and confirmed.
func (l *Lock) setDoubt(source doubtSource, doubt bool) {
	l.doubtMu.Lock()
	defer l.doubtMu.Unlock()
	was := l.serverDoubt || l.pathDoubt
	if source == serverDoubt {
		l.serverDoubt = doubt
	} else {
		l.pathDoubt = doubt
	}
	now := l.serverDoubt || l.pathDoubt
	l.inDoubt.Store(now)
	select {
	case <-l.req.ended:
		return
	default:
	}
	switch {
	case now && !was && l.req.options.onInDoubt != nil:
		l.req.options.onInDoubt()
	case was && !now && l.req.options.onConfirmed != nil:
		l.req.options.onConfirmed()
	}
}

// RevokeRequested is closed at the first request to release the lock; Reason and
// RevokeDeadline say more, and WithOnRevokeRequested hears every request.
func (l *Lock) RevokeRequested() <-chan struct{} { return l.revoke }

// Reason is the reason given with the latest revoke request, once RevokeRequested is closed.
func (l *Lock) Reason() string {
	l.revokeMu.Lock()
	defer l.revokeMu.Unlock()
	return l.reason
}

// RevokeDeadline is when the lock is taken away if it has not been released (its Lost fires
// then), and whether such a deadline was set: a first, cooperative revoke request has none, a
// later one may bring it. Once set, it never changes.
func (l *Lock) RevokeDeadline() (time.Time, bool) {
	l.revokeMu.Lock()
	defer l.revokeMu.Unlock()
	return l.deadline, !l.deadline.IsZero()
}

// revokeRequested: the server asks the holder to release the lock (at most twice: a
// cooperative request, then the deadline a later RevokeLock adds to it).
func (l *Lock) revokeRequested(reason string, deadline time.Time) {
	l.revokeMu.Lock()
	l.reason = reason
	if l.deadline.IsZero() {
		l.deadline = deadline
	}
	l.revokeMu.Unlock()
	l.revokeOnce.Do(func() {
		close(l.revoke)
		l.cancel(&Error{Lock: l.req.name, Code: codes.Aborted, Message: "revoke requested: " + reason, kind: ErrRevoked})
	})
	if f := l.req.options.onRevoke; f != nil {
		f(reason, deadline)
	}
}

// ended: the request is over (err nil for OK); letGo: the client released or cancelled it.
func (l *Lock) ended(err error, letGo bool) {
	l.once.Do(func() {
		var failure *Error
		if err == nil || !errors.As(err, &failure) || letGo && !errors.Is(err, ErrLost) {
			l.cancel(notHeldError(l.req.name, "it was unlocked"))
			return
		}
		l.lostErr = lossOf(l.req.name, failure)
		close(l.lost)
		l.cancel(l.lostErr)
	})
}

// Unlock releases the lock and waits for the server to confirm. It returns the loss if the lock
// was lost first (errors.Is(err, ErrLost)), ErrClosed if Close released it. A second Unlock
// answers as the first did (nil once released, the loss after a loss) and sends nothing, as in
// the TypeScript and Python clients: a deferred Unlock after an explicit one is harmless.
func (l *Lock) Unlock(ctx context.Context) error {
	l.s.mu.Lock()
	letGo, byClose := l.req.letGo != nil, l.req.byClose
	l.s.mu.Unlock()
	if byClose {
		if err := l.Err(); err != nil {
			return err
		}
		return closedError(l.req.name)
	}
	if !letGo {
		select {
		case <-l.req.ended:
		default:
			l.s.letGo(l.req, &pb.SessionRequest{Kind: &pb.SessionRequest_Release{Release: &pb.SessionRelease{RequestId: l.req.id}}})
		}
	}
	select {
	case <-l.req.ended:
		return l.Err()
	case <-ctx.Done():
		return contextError(l.req.name, ctx.Err())
	}
}

// SetValue replaces the value the holder publishes (at most 1 KiB, or an error matching
// ErrInvalidArgument with nothing sent; empty clears it).
func (l *Lock) SetValue(ctx context.Context, value []byte) error {
	if problem := checkValue(value); problem != "" {
		return invalidArgument(l.req.name, "%s", problem)
	}
	return l.ask(ctx, &pb.SessionRequest{Kind: &pb.SessionRequest_SetValue{
		SetValue: &pb.SessionSetValue{RequestId: l.req.id, Value: value},
	}})
}

// Downgrade turns a Write hold into a Read hold, with no writer let in between. Refused (the
// lock is then released and the error says why) for other modes.
func (l *Lock) Downgrade(ctx context.Context) error {
	return l.ask(ctx, &pb.SessionRequest{Kind: &pb.SessionRequest_Downgrade{
		Downgrade: &pb.SessionDowngrade{RequestId: l.req.id},
	}})
}

// ask sends a message the server answers with `value_set` or `downgraded`, and waits for it.
func (l *Lock) ask(ctx context.Context, message *pb.SessionRequest) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	ack := make(chan struct{})
	l.s.mu.Lock()
	select {
	case <-l.req.ended:
		l.s.mu.Unlock()
		if err := l.Err(); err != nil {
			return err
		}
		return notHeldError(l.req.name, "it was unlocked")
	default:
	}
	l.req.ack, l.req.asked = ack, message
	l.s.mu.Unlock()
	if err := l.s.send(ctx, message); err != nil {
		select {
		case <-l.req.ended:
		default:
			if ctx.Err() != nil {
				return contextError(l.req.name, ctx.Err())
			}
			return &Error{Lock: l.req.name, Code: codes.Internal, Message: "could not be sent: " + err.Error(), kind: ErrFailed, cause: err}
		}
	}
	select {
	case <-ack:
		return nil
	case <-l.req.ended:
		l.s.mu.Lock()
		err := l.req.err
		l.s.mu.Unlock()
		if lost := l.Err(); lost != nil {
			return lost
		}
		if err != nil {
			return err
		}
		return notHeldError(l.req.name, "it was unlocked")
	case <-ctx.Done():
		return contextError(l.req.name, ctx.Err())
	}
}
