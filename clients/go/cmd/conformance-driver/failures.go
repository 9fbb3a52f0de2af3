// Failures: an error of the Go client named in the protocol's common vocabulary (kind, code,
// class, message), and the observation that reports it.

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	lockstream "github.com/lockstream/lockstream/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type failure struct {
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Class   string `json:"class,omitempty"`
	Message string `json:"message,omitempty"`
}

func sayFailure(event, id string, err error) {
	f := failureOf(err)
	say(event, map[string]any{"id": id, "kind": f.Kind, "code": f.Code, "class": f.Class, "message": f.Message})
}

// failureOf names an error of the client in the common vocabulary: its sentinels first, then
// the gRPC code of its *Error, then the code of any status it carries.
func failureOf(err error) failure {
	f := failure{Message: err.Error(), Class: fmt.Sprintf("%T", err)}
	var lockErr *lockstream.Error
	if errors.As(err, &lockErr) {
		f.Code = codeName(lockErr.Code)
	} else if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		f.Code = codeName(s.Code())
	}
	sentinels := []struct {
		target error
		kind   string
		class  string
	}{
		{lockstream.ErrClosed, "closed", "ErrClosed"},
		{lockstream.ErrLost, "lost", "ErrLost"},
		{lockstream.ErrTimeout, "timeout", "ErrTimeout"},
		{lockstream.ErrInvalidArgument, "invalid-argument", "ErrInvalidArgument"},
		{lockstream.ErrUnavailable, "unavailable", "ErrUnavailable"},
		{lockstream.ErrCanceled, "cancelled", "ErrCanceled"},
		{lockstream.ErrNotHeld, "not-held", "ErrNotHeld"},
		{lockstream.ErrRevisionConflict, "conflict", "ErrRevisionConflict"},
		// The term named is not the leader's: the election's not-held.
		{lockstream.ErrNotLeader, "not-held", "ErrNotLeader"},
		{lockstream.ErrNoLeader, "not-found", "ErrNoLeader"},
		{lockstream.ErrPermissionDenied, "permission-denied", "ErrPermissionDenied"},
		{context.Canceled, "cancelled", "context.Canceled"},
	}
	for _, sentinel := range sentinels {
		if errors.Is(err, sentinel.target) {
			f.Kind, f.Class = sentinel.kind, sentinel.class
			return f
		}
	}
	if lockErr != nil {
		f.Kind = kindOfCode(lockErr.Code)
	} else {
		// Not the client's own error: a raw gRPC status, or another error, escaped it.
		f.Kind = "foreign"
	}
	return f
}

var kindOfStatus = map[string]string{
	"INVALID_ARGUMENT":    "invalid-argument",
	"DEADLINE_EXCEEDED":   "timeout",
	"ABORTED":             "lost",
	"UNAVAILABLE":         "unavailable",
	"CANCELLED":           "cancelled",
	"PERMISSION_DENIED":   "permission-denied",
	"RESOURCE_EXHAUSTED":  "resource-exhausted",
	"FAILED_PRECONDITION": "failed-precondition",
	"NOT_FOUND":           "not-found",
}

func kindOfCode(code codes.Code) string {
	if kind, ok := kindOfStatus[codeName(code)]; ok {
		return kind
	}
	return "other"
}

// codeName is the gRPC status name as the other languages spell it (DEADLINE_EXCEEDED).
func codeName(code codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[code]; ok {
		return name
	}
	return strconv.Itoa(int(code))
}
