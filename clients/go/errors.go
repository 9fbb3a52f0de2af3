// Errors: the kinds of failure, the *Error every call returns, and how its message names the
// lock (or election) once.

package lockstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The kinds of failure. Every error a call of this package returns is an *Error that matches
// exactly one of them with errors.Is.
var (
	// ErrInvalidArgument: the request breaks a rule the server enforces (name length or
	// encoding, value or owner size, a negative duration, ...). Found before anything is sent,
	// so nothing else of the client is touched.
	ErrInvalidArgument = errors.New("lockstream: invalid argument")
	// ErrLocked: TryLock found the lock held; nothing was queued. Not a failure: the answer
	// "not acquired" (as etcd's concurrency.ErrLocked).
	ErrLocked = errors.New("lockstream: lock is held by someone else")
	// ErrTimeout: the lock was not granted within the wait timeout (WithWaitTimeout, or the
	// context's deadline); nothing is left queued.
	ErrTimeout = errors.New("lockstream: lock not acquired within the wait timeout")
	// ErrCanceled: the context passed to the call was cancelled; nothing is left queued.
	ErrCanceled = errors.New("lockstream: call cancelled")
	// ErrLost: a held lock was lost (or the whole session, for Client.Err): whatever it
	// protected may be held by someone else now.
	ErrLost = errors.New("lockstream: lock lost")
	// ErrRevoked: someone asked the holder to release the lock (RevokeLock); the cause of the
	// lock's Context.
	ErrRevoked = errors.New("lockstream: lock revoke requested")
	// ErrPermissionDenied: the caller may not take the lock.
	ErrPermissionDenied = errors.New("lockstream: permission denied")
	// ErrUnavailable: the server could not be reached, or the session broke before the request
	// was granted; trying again later is safe.
	ErrUnavailable = errors.New("lockstream: server unavailable")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lockstream: client closed")
	// ErrNotHeld: the lock was released or lost before the call (SetValue, Downgrade); or a
	// guarded record's write named a fencing token that does not hold the lock (any more), and
	// nothing was written.
	ErrNotHeld = errors.New("lockstream: lock not held")
	// ErrRevisionConflict: a guarded record's write conditioned on a revision
	// (WithExpectedRevision) found the record at another: someone wrote it since it was read.
	// Nothing was written; its Code is ABORTED.
	ErrRevisionConflict = errors.New("lockstream: record revision conflict")
	// ErrNoLeader: nobody leads the election (Election.Leader), as etcd's
	// concurrency.ErrElectionNoLeader; also for an election nobody has campaigned in.
	ErrNoLeader = errors.New("lockstream: election has no leader")
	// ErrNotLeader: the term named is not the current leader's (it ended, or was never granted),
	// so nothing was done (Election.Proclaim, Election.Resign), as etcd's
	// concurrency.ErrElectionNotLeader; or the Leadership resigned already.
	ErrNotLeader = errors.New("lockstream: not the leader")
	// ErrFailed: anything else the server refused (FAILED_PRECONDITION, RESOURCE_EXHAUSTED,
	// INTERNAL, ...); Code says which.
	ErrFailed = errors.New("lockstream: request failed")
)

// Error is every failure of this package: which lock, the gRPC code it maps to, and what
// happened. errors.Is matches it to one of the Err* kinds above, status.Code reads its Code,
// and errors.Unwrap gives the underlying error if there is one (a context's error, a transport
// failure).
type Error struct {
	// Lock is the lock's name (a multi-lock's names joined with "+"), or the election's for an
	// error of an Election; empty for an error about the client or its session.
	Lock string
	// Code is the gRPC status code of the failure (the server's, or the one the client maps a
	// local failure to, e.g. INVALID_ARGUMENT).
	Code codes.Code
	// Message says what happened, without the lock's name (Error puts it in front).
	Message string

	kind     error
	cause    error
	election bool // Lock names an election
}

// Error reads "lockstream: lock "NAME" MESSAGE" (an election's: "lockstream: election "NAME"
// MESSAGE"): the name once, quoted with control characters escaped, and cut short when it is
// long.
func (e *Error) Error() string {
	message := printable(e.Message, messageShown)
	if e.Lock == "" {
		return "lockstream: " + message
	}
	joint := ": "
	if startsWithVerb(message) {
		joint = " "
	}
	noun := "lock "
	if e.election {
		noun = "election "
	}
	return "lockstream: " + noun + quoteName(e.Lock) + joint + message
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.kind }

// Unwrap is the underlying error, if any.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets status.Code and status.Convert read the error.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// kindOf is the kind of a failure the server reported with code.
func kindOf(code codes.Code) error {
	switch code {
	case codes.InvalidArgument, codes.OutOfRange:
		return ErrInvalidArgument
	case codes.DeadlineExceeded:
		return ErrTimeout
	case codes.Canceled:
		return ErrCanceled
	case codes.Aborted:
		return ErrLost
	case codes.PermissionDenied, codes.Unauthenticated:
		return ErrPermissionDenied
	case codes.Unavailable:
		return ErrUnavailable
	}
	return ErrFailed
}

func invalidArgument(lock, format string, args ...any) *Error {
	return &Error{Lock: lock, Code: codes.InvalidArgument, Message: fmt.Sprintf(format, args...), kind: ErrInvalidArgument}
}

func closedError(lock string) *Error {
	return &Error{Lock: lock, Code: codes.Canceled, Message: "the client was closed", kind: ErrClosed}
}

func notHeldError(lock string, why string) *Error {
	return &Error{Lock: lock, Code: codes.FailedPrecondition, Message: "is not held: " + why, kind: ErrNotHeld}
}

// contextError is the error of a call whose context ended first.
func contextError(lock string, err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Lock: lock, Code: codes.DeadlineExceeded, Message: "was not acquired before the context's deadline", kind: ErrTimeout, cause: err}
	}
	return &Error{Lock: lock, Code: codes.Canceled, Message: "the call was cancelled", kind: ErrCanceled, cause: err}
}

// transportError is a failure of the connection itself (no server verdict), e.g. an
// unreachable server.
func transportError(lock, what string, err error) *Error {
	code := status.Code(err)
	message := what
	if s, ok := status.FromError(err); ok && s.Message() != "" {
		message += ": " + s.Message()
	} else if err != nil {
		message += ": " + err.Error()
	}
	if code == codes.OK || code == codes.Unknown || code == codes.Canceled || code == codes.DeadlineExceeded {
		code = codes.Unavailable
	}
	return &Error{Lock: lock, Code: code, Message: message, kind: kindOf(code), cause: err}
}

// serverError is what the server said about a request of lock (serverName: how the server
// names it in messages). The server's messages name the lock themselves; the name is taken
// out of the message so that Error says it once.
func serverError(lock, serverName string, code codes.Code, message string) *Error {
	return &Error{Lock: lock, Code: code, Message: withoutName(message, serverName), kind: kindOf(code)}
}

// lossOf is the loss of a held lock that ended with err (a server's verdict or the session's
// end): one *Error, not a chain of them.
func lossOf(lock string, err *Error) *Error {
	message := err.Message
	if !strings.HasPrefix(message, "was lost") && !strings.HasPrefix(message, "was revoked") {
		message = "was lost: " + message
	}
	return &Error{Lock: lock, Code: err.Code, Message: message, kind: ErrLost, cause: err.cause}
}

// withoutName takes the server's mention of the lock out of message: the leading `lock "NAME"`
// (or `locks "A", "B"` for a multi-lock), and "the lock" for any later one.
func withoutName(message, serverName string) string {
	return withoutNameAs(message, serverName, "the lock")
}

// withoutNameAs is withoutName, naming the lock as later mentions in the message do ("the
// lock", or "the election", for which a leading `election "NAME"` goes too).
func withoutNameAs(message, serverName, as string) string {
	prefixes := []string{`lock "` + serverName + `"`, `locks ` + serverName + ` `, `lock ` + serverName}
	if as == "the election" {
		prefixes = append([]string{`election "` + serverName + `"`}, prefixes...)
	}
	for _, prefix := range prefixes {
		if rest, ok := strings.CutPrefix(message, prefix); ok {
			message = strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " ")
			break
		}
	}
	if serverName != "" {
		quotes := []string{`"` + serverName + `"`}
		if quoted := jsonQuote(serverName); quoted != quotes[0] {
			quotes = append(quotes, quoted)
		}
		for _, quoted := range quotes {
			if as == "the election" {
				// `in election "NAME"` reads "in the election", not "in election the election".
				message = strings.ReplaceAll(message, "election "+quoted, as)
			}
			message = strings.ReplaceAll(message, quoted, as)
		}
	}
	return message
}

// jsonQuote quotes s as JavaScript's JSON.stringify does (the server's quoting in messages).
func jsonQuote(s string) string {
	var b strings.Builder
	encoder := json.NewEncoder(&b)
	encoder.SetEscapeHTML(false)
	_ = encoder.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Names longer than this are cut short in messages; a message is cut at messageShown.
const (
	nameShown    = 64
	messageShown = 400
)

// quoteName quotes a lock name for a message: Go-quoted (control characters and invalid UTF-8
// escaped), and a long one cut short with its length.
func quoteName(name string) string {
	if len(name) <= nameShown {
		return strconv.Quote(name)
	}
	cut := nameShown - 16
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	quoted := strconv.Quote(name[:cut])
	return fmt.Sprintf(`%s…" (%d bytes)`, quoted[:len(quoted)-1], len(name))
}

// printable escapes control characters and invalid UTF-8 in text, and cuts it at limit bytes.
func printable(text string, limit int) string {
	var b strings.Builder
	for i, r := range text {
		if b.Len() >= limit {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(text[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, text[i])
		case unicode.IsControl(r):
			quoted := strconv.QuoteRune(r)
			b.WriteString(quoted[1 : len(quoted)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// startsWithVerb: the message goes on from the lock's name ("was lost: ..."), rather than
// after a colon.
func startsWithVerb(message string) bool {
	for _, verb := range []string{"is ", "was ", "were ", "has ", "could not ", "cannot "} {
		if strings.HasPrefix(message, verb) {
			return true
		}
	}
	return false
}
