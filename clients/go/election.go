// Elections: the Election handle a Client gives for a name, the current Leader, and the calls
// that act on a term through any instance (Leader, Proclaim, Resign); the errors they return.

package lockstream

import (
	"context"
	"errors"
	"io"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Election is one election of the server's ElectionService: candidates Campaign for it and lead
// one at a time, in the order they joined; anyone can Observe its terms, ask who is the Leader,
// and Proclaim or Resign naming a term. Shaped like etcd's concurrency.Election, except that a
// term, not a key, says which leader a call means. Safe for concurrent use; it holds nothing
// itself, so any number of Elections for the same name may be used.
type Election struct {
	client *Client
	name   string
}

// Election is the election named name (a lock name: the same rules and the same namespace; a
// name is an election or a lock, not both). Nothing is sent until a call: a malformed name is
// an error matching ErrInvalidArgument from each.
func (c *Client) Election(name string) *Election { return &Election{client: c, name: name} }

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// Leader is one leader's term, as Election.Leader and Observe tell it.
type Leader struct {
	// Term is the leader's fencing token: it grows from one leader to the next.
	Term uint64
	// Value is the leader's latest value: the one it campaigned with, or the last proclaimed.
	Value []byte
	// Owner is who campaigned (WithCampaignOwner, or the client's default owner), possibly "".
	Owner string
	// ElectedAt is when the term was recorded, by the wall clock of the server that recorded
	// it: for people.
	ElectedAt time.Time
}

func leaderOf(term *pb.ElectionTerm) *Leader {
	leader := &Leader{Term: term.GetTerm(), Value: term.GetValue(), Owner: term.GetOwner()}
	if at := term.GetElectedAt(); at != nil {
		leader.ElectedAt = at.AsTime()
	}
	return leader
}

// Leader says who leads the election now. When nobody does (also for an election nobody has
// campaigned in), the error matches ErrNoLeader, its Code NOT_FOUND; as etcd's Election.Leader
// answers concurrency.ErrElectionNoLeader. Every instance gives the same answer.
func (e *Election) Leader(ctx context.Context) (*Leader, error) {
	if err := e.check(ctx); err != nil {
		return nil, err
	}
	answer, err := e.client.endpoints.electionRPC().Leader(ctx, &pb.LeaderRequest{Name: e.name})
	if err != nil {
		return nil, e.callError(ctx, err, codes.NotFound, ErrNoLeader)
	}
	return leaderOf(answer.GetLeader()), nil
}

// Proclaim replaces the value of the leader of term (at most 1 KiB, or an error matching
// ErrInvalidArgument with nothing sent): Observe tells it as Proclaimed, Leader shows it from
// the reply on. When term is not the current leader's (it ended, or was never granted), nothing
// changes and the error matches ErrNotLeader. Leadership.Proclaim names its own term.
func (e *Election) Proclaim(ctx context.Context, term uint64, value []byte) error {
	if problem := checkValue(value); problem != "" {
		return e.invalid(problem)
	}
	if err := e.check(ctx); err != nil {
		return err
	}
	_, err := e.client.endpoints.electionRPC().Proclaim(ctx, &pb.ProclaimRequest{Name: e.name, Term: term, Value: value})
	if err != nil {
		return e.callError(ctx, err, codes.FailedPrecondition, ErrNotLeader)
	}
	return nil
}

// Resign ends the term of the current leader, through any instance and from any client, as an
// operator (or a new leader that knows the old one is gone) would: the leader's Leadership is
// Done with an error matching ErrLost before the next candidate is elected. When term is not the
// current leader's, nothing changes and the error matches ErrNotLeader. A leader steps down with
// Leadership.Resign instead.
func (e *Election) Resign(ctx context.Context, term uint64) error {
	if err := e.check(ctx); err != nil {
		return err
	}
	if _, err := e.client.endpoints.electionRPC().Resign(ctx, &pb.ResignRequest{Name: e.name, Term: term}); err != nil {
		return e.callError(ctx, err, codes.FailedPrecondition, ErrNotLeader)
	}
	return nil
}

// check refuses a call that cannot be sent: invalid options or name, a closed client, an
// ended context.
func (e *Election) check(ctx context.Context) error {
	c := e.client
	if c.optionsErr != nil {
		return c.optionsErr
	}
	if problem := checkName(e.name); problem != "" {
		return e.invalid(problem)
	}
	if c.isClosed() {
		return e.closed()
	}
	if err := ctx.Err(); err != nil {
		return e.contextError(err)
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (e *Election) invalid(problem string) *Error {
	err := invalidArgument(e.name, "%s", problem)
	err.election = true
	return err
}

func (e *Election) closed() *Error {
	err := closedError(e.name)
	err.election = true
	return err
}

func (e *Election) notLeader(why string) *Error {
	return &Error{Lock: e.name, Code: codes.FailedPrecondition, Message: "is not led by this Leadership: " + why, kind: ErrNotLeader, election: true}
}

func (e *Election) transportError(what string, err error) *Error {
	failure := transportError(e.name, what, err)
	failure.election = true
	return failure
}

// contextError is the error of a call whose context ended first.
func (e *Election) contextError(err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Lock: e.name, Code: codes.DeadlineExceeded, Message: "the context's deadline passed first", kind: ErrTimeout, cause: err, election: true}
	}
	return &Error{Lock: e.name, Code: codes.Canceled, Message: "the call was cancelled", kind: ErrCanceled, cause: err, election: true}
}

// callError is the error of a call of the ElectionService that failed with err: the context's
// end, the client's closing, the stream's end (io.EOF), or the server's verdict, whose kind is
// the call's own for code (NOT_FOUND is ErrNoLeader for Leader, say).
func (e *Election) callError(ctx context.Context, err error, code codes.Code, kind error) *Error {
	if ctx.Err() != nil {
		return e.contextError(ctx.Err())
	}
	if e.client.isClosed() {
		return e.closed()
	}
	if err == io.EOF {
		return &Error{Lock: e.name, Code: codes.Unavailable, Message: "the server ended the stream", kind: ErrUnavailable, election: true}
	}
	s := status.Convert(err)
	switch s.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unknown:
		// Not the server's verdict (it answers those only for the caller's own context).
		return e.transportError("the call failed", err)
	}
	failure := e.serverError(s.Code(), s.Message())
	if s.Code() == code {
		failure.kind = kind
	}
	return failure
}

// serverError is what the server said about the election: its name taken out of the message.
func (e *Election) serverError(code codes.Code, message string) *Error {
	return &Error{Lock: e.name, Code: code, Message: withoutNameAs(message, e.name, "the election"), kind: kindOf(code), election: true}
}
