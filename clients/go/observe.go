// Observing an election: Election.Observe, the events it sends on its channel (terms,
// proclamations, vacancies, gaps, and the stream's failure), and where it starts (FromTerm).

package lockstream

import (
	"context"
	"fmt"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
)

// EventKind says what an ElectionEvent tells.
type EventKind int

const (
	// EventTerm: a leader was elected (or, first without FromTerm, leads now). Term, Value
	// (the value it campaigned with, or for the current state its latest proclaimed one),
	// Owner and ElectedAt.
	EventTerm EventKind = iota + 1
	// EventProclaimed: the leader of Term proclaimed Value.
	EventProclaimed
	// EventVacant: nobody leads; AfterTerm is the last term seen to end (0 if none). A
	// handover may be seen without one, when the next term has begun by the time the end of
	// the last is seen.
	EventVacant
	// EventHistoryGone: the history no longer reaches back to FromTerm; FirstTerm is the first
	// term it still has (0: none). Sent first, before the terms from there on.
	EventHistoryGone
	// EventSkipped: this observer fell so far behind that terms it was not told left the
	// history; FirstTerm is the first term after the gap (0: none is recorded yet).
	EventSkipped
	// EventFailed: the stream failed, and this is the last event; Err says why.
	EventFailed
)

func (k EventKind) String() string {
	switch k {
	case EventTerm:
		return "term"
	case EventProclaimed:
		return "proclaimed"
	case EventVacant:
		return "vacant"
	case EventHistoryGone:
		return "history gone"
	case EventSkipped:
		return "skipped"
	case EventFailed:
		return "failed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// ElectionEvent is one event of an election, as Observe sends them. Kind says which of its
// fields are set: the Leader fields for EventTerm (Term and Value for EventProclaimed),
// AfterTerm for EventVacant, FirstTerm for EventHistoryGone and EventSkipped, Err for
// EventFailed.
type ElectionEvent struct {
	Kind EventKind
	Leader
	AfterTerm uint64
	FirstTerm uint64

	err error
}

// Err is why the stream failed, for the last event (EventFailed): like etcd's
// WatchResponse.Err. nil for every other event.
func (ev ElectionEvent) Err() error { return ev.err }

func eventOf(message *pb.ObserveResponse) (ElectionEvent, bool) {
	switch kind := message.GetKind().(type) {
	case *pb.ObserveResponse_Term:
		return ElectionEvent{Kind: EventTerm, Leader: *leaderOf(kind.Term)}, true
	case *pb.ObserveResponse_Proclaimed:
		return ElectionEvent{Kind: EventProclaimed, Leader: Leader{Term: kind.Proclaimed.GetTerm(), Value: kind.Proclaimed.GetValue()}}, true
	case *pb.ObserveResponse_Vacant:
		return ElectionEvent{Kind: EventVacant, AfterTerm: kind.Vacant.GetAfterTerm()}, true
	case *pb.ObserveResponse_HistoryGone:
		return ElectionEvent{Kind: EventHistoryGone, FirstTerm: kind.HistoryGone.GetFirstTerm()}, true
	case *pb.ObserveResponse_Skipped:
		return ElectionEvent{Kind: EventSkipped, FirstTerm: kind.Skipped.GetFirstTerm()}, true
	}
	return ElectionEvent{}, false // a kind newer than this client
}

type observeOptions struct {
	fromTerm *uint64
}

// ObserveOption configures one Observe call.
type ObserveOption func(*observeOptions)

// FromTerm makes Observe replay every term from term on (inclusive) out of the election's
// history, each followed by its proclamations, before it goes on live; EventHistoryGone first
// when the history (the last 100 terms) no longer reaches back so far. To go on where an
// earlier Observe stopped, start from the last term it told.
func FromTerm(term uint64) ObserveOption {
	return func(o *observeOptions) { o.fromTerm = &term }
}

// Observe streams the election's events, in order, on the channel it returns, as etcd's
// Election.Observe streams its leaders: without FromTerm, first the current state (EventTerm
// for the current leader, or EventVacant: an election nobody campaigned in is not an error),
// then every term as it begins (none is ever skipped, even one that began and ended between two
// looks), the values its leader proclaims, and EventVacant when the seat is seen empty.
//
// The channel is closed when ctx ends, or after an EventFailed event when the stream fails
// (the server shuts down or cannot reach its back end: ErrUnavailable; a malformed name:
// ErrInvalidArgument; the client is closed: ErrClosed). Nothing is kept for a reader that does
// not read: the server sends no more than the stream's flow control lets through, and tells
// the terms it missed (or EventSkipped) once it reads again. Cancel ctx to stop observing.
// The stream goes to the client's current endpoint; observe again (FromTerm) after a failure.
func (e *Election) Observe(ctx context.Context, opts ...ObserveOption) <-chan ElectionEvent {
	var options observeOptions
	for _, opt := range opts {
		opt(&options)
	}
	events := make(chan ElectionEvent)
	go e.observe(ctx, options, events)
	return events
}

// observe sends the stream's events on events until ctx ends or the stream fails, then closes
// it.
func (e *Election) observe(ctx context.Context, options observeOptions, events chan<- ElectionEvent) {
	defer close(events)
	fail := func(err error) {
		select {
		case events <- ElectionEvent{Kind: EventFailed, err: err}:
		case <-ctx.Done():
		}
	}
	if err := e.check(ctx); err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.client.endpoints.electionRPC().Observe(ctx, &pb.ObserveRequest{Name: e.name, FromTerm: options.fromTerm})
	if err != nil {
		if ctx.Err() == nil {
			fail(e.callError(ctx, err, codes.OK, nil))
		}
		return
	}
	for {
		message, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				fail(e.callError(ctx, err, codes.OK, nil))
			}
			return
		}
		event, known := eventOf(message)
		if !known {
			continue
		}
		select {
		case events <- event:
		case <-ctx.Done():
			return
		}
	}
}
