package lockstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
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

	inDoubt atomic.Bool
	mode    atomic.Int32

	once       sync.Once
	lost       chan struct{}
	lostErr    error // set before lost is closed
	revokeOnce sync.Once
	revoke     chan struct{}
	reason     atomic.Value // string, set before revoke is closed

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
// Not closed by Unlock.
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

// InDoubt reports whether the server cannot vouch for the lock right now (its ZooKeeper
// connection is interrupted); nothing else is granted the lock meanwhile.
func (l *Lock) InDoubt() bool { return l.inDoubt.Load() }

// RevokeRequested is closed when someone asked the holder to release the lock; Reason says why.
func (l *Lock) RevokeRequested() <-chan struct{} { return l.revoke }

// Reason is the reason given with a revoke request, once RevokeRequested is closed.
func (l *Lock) Reason() string {
	reason, _ := l.reason.Load().(string)
	return reason
}

func (l *Lock) revokeRequested(reason string) {
	l.revokeOnce.Do(func() {
		l.reason.Store(reason)
		close(l.revoke)
		l.cancel(fmt.Errorf("%w: lock %q: %s", ErrRevoked, l.req.name, reason))
	})
}

// ended: the request is over (err nil for OK); letGo: the client released or cancelled it.
func (l *Lock) ended(err error, letGo bool) {
	l.once.Do(func() {
		if err == nil || letGo && !errors.Is(err, ErrLost) {
			l.cancel(ErrNotHeld)
			return
		}
		l.lostErr = &lostError{lock: l.req.name, reason: err}
		close(l.lost)
		l.cancel(l.lostErr)
	})
}

// Unlock releases the lock and waits for the server to confirm. It returns the loss if the lock
// was lost first (errors.Is(err, ErrLost)), ErrNotHeld if it was unlocked already.
func (l *Lock) Unlock(ctx context.Context) error {
	l.s.mu.Lock()
	letGo := l.req.letGo != nil
	l.s.mu.Unlock()
	if letGo {
		if err := l.Err(); err != nil {
			return err
		}
		return ErrNotHeld
	}
	select {
	case <-l.req.ended:
		if err := l.Err(); err != nil {
			return err
		}
		return ErrNotHeld
	default:
	}
	l.s.letGo(l.req, &pb.SessionRequest{Kind: &pb.SessionRequest_Release{Release: &pb.SessionRelease{RequestId: l.req.id}}})
	select {
	case <-l.req.ended:
		return l.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetValue replaces the value the holder publishes (at most 1 KiB; empty clears it).
func (l *Lock) SetValue(ctx context.Context, value []byte) error {
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
		return ErrNotHeld
	default:
	}
	l.req.ack, l.req.asked = ack, message
	l.s.mu.Unlock()
	if err := l.s.send(ctx, message); err != nil {
		return err
	}
	select {
	case <-ack:
		return nil
	case <-l.req.ended:
		if l.req.err != nil {
			return l.req.err
		}
		return ErrNotHeld
	case <-ctx.Done():
		return ctx.Err()
	}
}
