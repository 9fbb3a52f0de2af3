// Calls of the RecordService: each made on the current endpoint and, after UNAVAILABLE, on the
// next ones in turn, and the *Error it fails with (a write refused after an UNAVAILABLE try:
// outcome unknown).

package lockstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recordCall is what a call of the RecordService is about: the lock's records, and for a write
// (PutRecord, DeleteRecord) the token it is made as.
type recordCall struct {
	client *Client
	name   string
	write  bool
	token  uint64
}

// check refuses a call that cannot be sent: invalid options, name or key, a closed client, an
// ended context.
func (r recordCall) check(ctx context.Context, key string) error {
	c := r.client
	if c.optionsErr != nil {
		return c.optionsErr
	}
	if problem := checkName(r.name); problem != "" {
		return invalidArgument(r.name, "%s", problem)
	}
	if problem := checkRecordKey(key); problem != "" {
		return invalidArgument(r.name, "%s", problem)
	}
	if c.isClosed() {
		return closedError(r.name)
	}
	if err := ctx.Err(); err != nil {
		return r.contextError(err)
	}
	return nil
}

// invokeRecords makes call with the current endpoint's RecordService stub and returns its
// answer. UNAVAILABLE moves the client on to the next endpoint and tries there, once per
// endpoint (as the TypeScript SDK's unary calls do): UNAVAILABLE means the call may not have
// been made, and a write carries what makes trying it again safe (a Put, its request id).
// Anything else ends the call at once.
func invokeRecords[T any](ctx context.Context, r recordCall, call func(context.Context, pb.RecordServiceClient) (T, error)) (T, error) {
	var zero T
	e := r.client.endpoints
	unavailableBefore := false
	for tried := 1; ; tried++ {
		i := e.now()
		answer, err := call(ctx, e.records[i])
		if err == nil {
			return answer, nil
		}
		if ctx.Err() != nil {
			return zero, r.contextError(ctx.Err())
		}
		if r.client.isClosed() {
			return zero, closedError(r.name)
		}
		if status.Code(err) != codes.Unavailable {
			return zero, r.failure(err, unavailableBefore)
		}
		e.moveOn(i)
		if tried >= e.count() {
			return zero, r.failure(err, unavailableBefore)
		}
		unavailableBefore = true
	}
}

// failure is the error of a call that ended with err (not its context's end, nor the client's
// closing): the server's verdict in the package's terms, or, for a write refused after a try
// that ended UNAVAILABLE, UNAVAILABLE: the earlier try may have made it.
func (r recordCall) failure(err error, unavailableBefore bool) *Error {
	s := status.Convert(err)
	code := s.Code()
	if r.write && unavailableBefore && code != codes.Unavailable {
		return &Error{
			Lock: r.name, Code: codes.Unavailable, kind: ErrUnavailable, cause: err,
			Message: fmt.Sprintf("the write's outcome is unknown: a try ended with %v, and the next was refused with %v (%s)",
				codes.Unavailable, code, r.serverMessage(s.Message())),
		}
	}
	switch code {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unknown:
		// Not the server's verdict (it answers those only for the caller's own context).
		return transportError(r.name, "the call failed", err)
	}
	failure := &Error{Lock: r.name, Code: code, Message: r.serverMessage(s.Message()), kind: kindOf(code)}
	switch {
	case code == codes.FailedPrecondition && r.write:
		failure.kind = ErrNotHeld
	case code == codes.Aborted:
		failure.kind = ErrRevisionConflict
	}
	return failure
}

// serverMessage is the server's message without the lock's name, which Error puts in front: a
// record's messages name it as `lock "NAME"` or `"NAME"` anywhere, which read "the lock".
func (r recordCall) serverMessage(message string) string {
	for _, quoted := range []string{`"` + r.name + `"`, jsonQuote(r.name)} {
		message = strings.ReplaceAll(message, "lock "+quoted, quoted)
	}
	return withoutName(message, r.name)
}

// contextError is the error of a call whose context ended first.
func (r recordCall) contextError(err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Lock: r.name, Code: codes.DeadlineExceeded, Message: "the context's deadline passed first", kind: ErrTimeout, cause: err}
	}
	return &Error{Lock: r.name, Code: codes.Canceled, Message: "the call was cancelled", kind: ErrCanceled, cause: err}
}
