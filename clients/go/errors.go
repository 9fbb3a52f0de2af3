package lockstream

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrTimeout: the lock was not granted within the wait timeout (TryLock: it was held).
	ErrTimeout = errors.New("lockstream: lock not acquired within the wait timeout")
	// ErrLost: a held lock was lost; whatever it protected may now be held by someone else.
	ErrLost = errors.New("lockstream: lock lost")
	// ErrRevoked: someone asked the holder to release the lock (RevokeLock).
	ErrRevoked = errors.New("lockstream: lock revoke requested")
	// ErrPermissionDenied: the caller may not take the lock.
	ErrPermissionDenied = errors.New("lockstream: permission denied")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lockstream: client closed")
	// ErrNotHeld: the lock was released or lost before the call.
	ErrNotHeld = errors.New("lockstream: lock not held")
)

// Error is what the server said about one request: its gRPC code and message. errors.Is
// matches it to ErrTimeout, ErrLost and ErrPermissionDenied by code, and status.Code reads its
// code.
type Error struct {
	// Lock is the lock's name.
	Lock string
	// Code is the status the request ended with.
	Code codes.Code
	// Message is the server's message, naming the lock and the problem.
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("lockstream: lock %q: %s: %s", e.Lock, e.Code, e.Message)
}

// Is matches the sentinel errors by code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Code == codes.DeadlineExceeded
	case ErrLost:
		return e.Code == codes.Aborted
	case ErrPermissionDenied:
		return e.Code == codes.PermissionDenied
	}
	return false
}

// GRPCStatus lets status.Code and status.Convert read the error.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// lostError is why a held lock was lost: ErrLost, with the reason.
type lostError struct {
	lock   string
	reason error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("lockstream: lock %q lost: %v", e.lock, e.reason)
}

func (e *lostError) Is(target error) bool { return target == ErrLost }

func (e *lostError) Unwrap() error { return e.reason }
