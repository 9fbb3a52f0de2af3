// Lock options: what one Lock call asks for (the mode, a multi-lock's targets, the wait, the
// callbacks), as LockOptions set it.

package lockstream

import (
	"fmt"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
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
