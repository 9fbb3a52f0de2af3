// A candidate: one Campaign stream and its successors after a resume, from `start` until the
// call ends; what the server says on it, stepping down, and how the candidacy (and with it a
// leadership) ends.

package lockstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// campaignStream is one Campaign call: the candidate's requests, the server's responses.
type campaignStream = grpc.BidiStreamingClient[pb.CampaignRequest, pb.CampaignResponse]

// candidate is one Campaign call of Election.Campaign and the calls that resume it: a session
// of one request, as the server keeps it. Its clock is the session's (see session): heard is
// when the server last spoke; the candidate (and a leadership) is given up a tenth of the grace
// before the grace, counted from heard, is over, so a leader cut off from the server hears it
// has lost before another candidate can be elected.
type candidate struct {
	// The Campaign calls; mu guards the fields below too.
	link[pb.CampaignRequest, pb.CampaignResponse]
	election    *Election
	onQueued    func(ahead int)
	onInDoubt   func()           // WithOnCampaignInDoubt, told by tellDoubt
	onConfirmed func()           // WithOnCampaignConfirmed, told by tellDoubt
	onEnd       func(*candidate) // tells the client the candidacy is over
	resign      *pb.CampaignRequest

	// The Leadership's context: cancelled at a resign request or at the end.
	leadCtx    context.Context
	leadCancel context.CancelCauseFunc
	elected    chan struct{} // closed at the first `elected`
	revoke     chan struct{} // closed at the first `resign_requested`

	doubtMu   sync.Mutex // one tellDoubt at a time, so that they are told in order
	toldDoubt bool       // what tellDoubt last told: in doubt (true) or confirmed

	term        uint64 // once elected
	resigning   bool   // `resign` asked for (sent on every stream taken into use)
	closing     bool   // the Client is closing
	serverDoubt bool   // the server said `in_doubt`
	pathDoubt   bool   // the path to the server is broken or silent
	err         error  // how it ended, once done is closed: nil when it resigned as asked
}

// newCandidate makes the candidate of a Campaign call; connect starts it.
func newCandidate(e *Election, options clientOptions, value []byte, campaign campaignOptions) *candidate {
	h := newHeartbeats(options.heartbeat())
	start := &pb.CampaignStart{
		Name: e.name, Value: value, Owner: campaign.owner, HeartbeatInterval: durationOrNil(h.interval),
	}
	if campaign.waitTimeout != nil {
		start.WaitTimeout = durationpb.New(*campaign.waitTimeout)
	}
	if options.resumeGrace > 0 {
		start.ResumeGrace = durationpb.New(options.resumeGrace)
	}
	leadCtx, leadCancel := context.WithCancelCause(context.Background())
	c := &candidate{
		election: e, onQueued: campaign.onQueued, onInDoubt: campaign.onInDoubt, onConfirmed: campaign.onConfirmed,
		onEnd:   e.client.discharge,
		resign:  &pb.CampaignRequest{Kind: &pb.CampaignRequest_Resign{Resign: &pb.CampaignResign{}}},
		leadCtx: leadCtx, leadCancel: leadCancel, elected: make(chan struct{}), revoke: make(chan struct{}),
	}
	c.init(c, e.client.endpoints, h, &pb.CampaignRequest{Kind: &pb.CampaignRequest_Start{Start: start}},
		&pb.CampaignRequest{Kind: &pb.CampaignRequest_Heartbeat{Heartbeat: &pb.CampaignHeartbeat{}}}, "elect another candidate")
	return c
}

// dial starts a Campaign call on endpoint i.
func (c *candidate) dial(ctx context.Context, i int) (campaignStream, error) {
	return c.endpoints.elections[i].Campaign(ctx)
}

// unreachable: only UNAVAILABLE (the endpoint could not be reached, or did not answer in time)
// sends the candidate on to the next endpoint; anything else is the server's verdict (refused,
// or ended at once: wait_timeout 0, DEADLINE_EXCEEDED).
func (c *candidate) unreachable(err error) bool { return status.Code(err) == codes.Unavailable }

// transportError is a failure of the path to the server, in the election.
func (c *candidate) transportError(what string, err error) *Error {
	return c.election.transportError(what, err)
}

// taken: a `resign` asked for meanwhile goes on the new stream.
func (c *candidate) taken(stream campaignStream) func() {
	if !c.resigning {
		return nil
	}
	return func() { _ = c.sendOn(stream, c.resign) }
}

// doubtPath: the path to the server is broken or silent, or sound again; tellDoubt tells it.
func (c *candidate) doubtPath(doubt bool) func() {
	c.pathDoubt = doubt
	return c.tellDoubt
}

// handle applies one message from the server.
func (c *candidate) handle(message *pb.CampaignResponse) {
	var after func() // a callback, run once mu is released
	c.mu.Lock()
	switch kind := message.GetKind().(type) {
	case *pb.CampaignResponse_Resumable:
		c.resumeToken = kind.Resumable.GetResumeToken()
		c.resumeGrace = kind.Resumable.GetResumeGrace().AsDuration()
		after = c.heartbeats.poke
	case *pb.CampaignResponse_Queued:
		if onQueued := c.onQueued; onQueued != nil {
			ahead := int(kind.Queued.GetAhead())
			after = func() { onQueued(ahead) }
		}
	case *pb.CampaignResponse_Elected:
		// Told again after a resume, with the same term.
		if c.term == 0 {
			c.term = kind.Elected.GetTerm()
			close(c.elected)
		}
	case *pb.CampaignResponse_InDoubt:
		c.serverDoubt = true
	case *pb.CampaignResponse_Confirmed:
		c.serverDoubt = false
	case *pb.CampaignResponse_ResignRequested:
		select {
		case <-c.revoke:
		default:
			close(c.revoke)
			reason := kind.ResignRequested.GetReason()
			c.leadCancel(&Error{Lock: c.election.name, Code: codes.Aborted, Message: "resign requested: " + reason, kind: ErrRevoked, election: true})
		}
	}
	// `heartbeat` is heard, and `resigned` comes right before the call's OK.
	c.mu.Unlock()
	if after != nil {
		after()
	}
	c.tellDoubt()
}

// tellDoubt tells WithOnCampaignInDoubt or WithOnCampaignConfirmed if the leadership's doubt
// (serverDoubt or pathDoubt) is no longer what it last told; nothing before it is elected or
// once it is over. Called after each change of either, without mu: it reads the state then, so
// what it tells alternates and ends with the state as it is, whatever order the goroutines
// that changed it call it in (a doubt over before it is told is not told).
func (c *candidate) tellDoubt() {
	if c.onInDoubt == nil && c.onConfirmed == nil {
		return
	}
	c.doubtMu.Lock()
	defer c.doubtMu.Unlock()
	c.mu.Lock()
	doubt, leading := c.serverDoubt || c.pathDoubt, c.term != 0 && !c.ended
	c.mu.Unlock()
	if !leading || doubt == c.toldDoubt {
		return
	}
	c.toldDoubt = doubt
	if doubt && c.onInDoubt != nil {
		c.onInDoubt()
	} else if !doubt && c.onConfirmed != nil {
		c.onConfirmed()
	}
}

// stepDown asks for `resign` (a leader steps down, a waiting candidate withdraws): sent now on
// the current stream, and again on every stream taken into use after it.
func (c *candidate) stepDown() {
	c.mu.Lock()
	if c.ended || c.resigning {
		c.mu.Unlock()
		return
	}
	c.resigning = true
	stream := c.stream
	c.mu.Unlock()
	if stream != nil {
		_ = c.sendOn(stream, c.resign)
	}
}

// withdraw is Campaign's when its context ends first: the candidate resigns, and the server's
// answer ends the candidacy. One still connecting (no answer yet on its first call) is given up
// at once with why, so that an endpoint that does not answer cannot keep Campaign waiting: the
// server, if it heard the candidate, sees its call cancelled.
func (c *candidate) withdraw(why *Error) {
	c.mu.Lock()
	connecting := c.stream == nil && !c.resuming
	c.mu.Unlock()
	if connecting {
		c.finish(why)
		return
	}
	c.stepDown()
	<-c.done
}

// dropped: the stream is gone; the candidate is resumed (even while the Client closes: its
// `resign` goes on the next stream).
func (c *candidate) dropped() bool { return true }

// endOf says how a call that is not resumed ended: nil when it ended as the candidate asked
// (`resign`: OK as leader, CANCELLED while queued).
func (c *candidate) endOf(err error, cut *Error) *Error {
	if cut != nil {
		return cut
	}
	c.mu.Lock()
	resigning := c.resigning
	c.mu.Unlock()
	code := status.Code(err)
	switch {
	case resigning && (err == nil || code == codes.Canceled):
		return nil
	case err == nil:
		return &Error{Lock: c.election.name, Code: codes.Unavailable, Message: "the server ended the campaign", kind: ErrUnavailable, election: true}
	case code == codes.Unavailable || code == codes.Unknown || code == codes.Canceled:
		return c.election.transportError("the campaign ended", err)
	}
	return c.election.serverError(code, status.Convert(err).Message())
}

// finish ends the candidacy, with why (nil: resigned as asked): a leader's term is lost then
// (ErrLost), unless it resigned; a Client's Close makes it ErrClosed.
func (c *candidate) finish(why *Error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	switch {
	case c.closing:
		c.err = c.election.closed()
	case why == nil:
	case c.term != 0:
		message := fmt.Sprintf("term %d was lost: %s", c.term, why.Message)
		if strings.HasPrefix(why.Message, "was ") {
			message = fmt.Sprintf("term %d %s", c.term, why.Message)
		}
		c.err = &Error{Lock: c.election.name, Code: why.Code, Message: message, kind: ErrLost, cause: why.cause, election: true}
	default:
		c.err = why
	}
	err := c.err
	c.mu.Unlock()
	if err == nil {
		err = c.election.notLeader("it resigned")
	}
	c.leadCancel(err) // before Done: a leader that sees Done sees its context ended
	close(c.done)
	c.cancel()
	c.onEnd(c)
}

// failure is how a candidacy that was not elected ended (once done is closed).
func (c *candidate) failure() error {
	if c.err != nil {
		return c.err
	}
	return &Error{Lock: c.election.name, Code: codes.Unavailable, Message: "the campaign ended before the candidate was elected", kind: ErrUnavailable, election: true}
}

// close is the Client's Close: the candidate resigns (withdraws) and the candidacy ends, after
// the server confirms or at most 5s; its error matches ErrClosed.
func (c *candidate) close() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.mu.Unlock()
	c.stepDown()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
	c.finish(nil)
}
