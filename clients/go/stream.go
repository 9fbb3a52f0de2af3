// A link's stream (the session's, a candidate's): opening it on an endpoint (going round the
// list), taking it into use, sending on it and reading from it; and the session's sends.

package lockstream

import (
	"context"
	"io"
	"strings"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// sessionStream is one Session call: the client's SessionRequests, the server's SessionResponses.
type sessionStream = grpc.BidiStreamingClient[pb.SessionRequest, pb.SessionResponse]

// connect opens the link's first call on the current endpoint, or on the next ones in turn
// while an endpoint cannot be reached (or does not answer in time): once round the list, after
// which the owner ends (ErrUnavailable). Any other failure is the server's answer, and ends it.
func (l *link[Req, Resp]) connect() {
	n := l.endpoints.count()
	var failures []string
	var last error
	for i, tried := l.endpoints.now(), 0; tried < n; i, tried = l.endpoints.moveOn(i), tried+1 {
		stream, cancel, err := l.open(i)
		if err == nil {
			if !l.use(stream, cancel, i) {
				cancel()
			}
			return
		}
		if l.ctx.Err() != nil {
			return // over meanwhile
		}
		if !l.owner.unreachable(err) {
			l.owner.finish(l.owner.endOf(err, nil))
			return
		}
		failures = append(failures, l.endpoints.name(i)+": "+status.Convert(err).Message())
		last = err
	}
	why := l.owner.transportError("could not reach the server", last)
	if n > 1 {
		why.Message = "could not reach the server at any endpoint: " + strings.Join(failures, "; ")
	}
	l.owner.finish(why)
}

// open starts the first call on endpoint i, and reads the server's first answer, within the
// attempt's limit (see openAttempt).
func (l *link[Req, Resp]) open(i int) (grpc.BidiStreamingClient[Req, Resp], context.CancelFunc, error) {
	ctx, cancel, answered := attempt(l.ctx, openAttempt(l.endpoints.count(), l.heartbeats))
	stream, first, err := l.call(ctx, i, l.first)
	if err == nil && !answered() {
		err = errNoAnswer
	}
	if err != nil {
		cancel()
		return nil, nil, attemptError(ctx, err)
	}
	l.heartbeats.hear()
	l.owner.handle(first)
	return stream, cancel, nil
}

// call starts a call on endpoint i, sends message and reads the first answer. The stream is nil
// unless the error (if any) is the call's end, with its trailer.
func (l *link[Req, Resp]) call(ctx context.Context, i int, message *Req) (grpc.BidiStreamingClient[Req, Resp], *Resp, error) {
	stream, err := l.owner.dial(ctx, i)
	if err != nil {
		return nil, nil, err
	}
	// io.EOF: the call ended already; Recv says how.
	if err := stream.Send(message); err != nil && err != io.EOF {
		return nil, nil, err
	}
	first, err := stream.Recv()
	return stream, first, err
}

// The time each attempt on an endpoint is given to answer, when there is another to try: long
// enough for a connection and a round trip, short enough that a frozen endpoint leaves time for
// the others within the resume grace.
const (
	maxAttempt = time.Second
	minAttempt = 100 * time.Millisecond
)

// openAttempt is how long an endpoint is given to answer the first message of a stream:
// maxAttempt when there is another endpoint to try; with a single endpoint, two heartbeat
// intervals, the silence after which a stream is given up (without heartbeats, gRPC's
// connection attempt and keepalive).
func openAttempt(endpoints int, h *heartbeats) time.Duration {
	if endpoints > 1 {
		return maxAttempt
	}
	return h.suspectAfter()
}

// resumeAttempt is how long an endpoint is given to take a stream over, silent since the server
// was last heard from: a third of what is left of the grace (at least minAttempt), at most
// maxAttempt. No limit with a single endpoint: a new attempt would go over the same connection,
// and there is nowhere else to go.
func resumeAttempt(endpoints int, grace, silent time.Duration) time.Duration {
	if endpoints == 1 {
		return 0
	}
	left := grace - grace/10 - silent
	return min(maxAttempt, max(left/3, minAttempt))
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// errNoAnswer cancels an attempt on an endpoint that did not answer within its limit.
var errNoAnswer = status.Error(codes.Unavailable, "no answer")

// attempt is the context of one attempt on an endpoint, a stream's. With a limit, it is
// cancelled (its cause UNAVAILABLE) unless answered, which stops the clock, is called within
// it; answered says false if it came too late.
func attempt(parent context.Context, limit time.Duration) (ctx context.Context, cancel context.CancelFunc, answered func() bool) {
	ctx, cancelCause := context.WithCancelCause(parent)
	cancel = func() { cancelCause(nil) }
	answered = func() bool { return true }
	if limit > 0 {
		clock := time.AfterFunc(limit, func() {
			cancelCause(status.Errorf(codes.Unavailable, "no answer within %s", limit.Round(time.Millisecond)))
		})
		cancel = func() { clock.Stop(); cancelCause(nil) }
		answered = clock.Stop
	}
	return ctx, cancel, answered
}

// attemptError is err, or why the attempt's context was cancelled if its clock did it.
func attemptError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); status.Code(cause) == codes.Unavailable {
		return cause
	}
	return err
}

// use makes stream the link's and starts reading it and beating on it; false if the owner
// ended meanwhile. The path to the server is sound again (doubtPath).
func (l *link[Req, Resp]) use(stream grpc.BidiStreamingClient[Req, Resp], cancel context.CancelFunc, endpoint int) bool {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return false
	}
	l.stream, l.streamCancel, l.streamSince, l.endpoint = stream, cancel, l.heartbeats.now(), endpoint
	l.resuming = false
	confirmed := l.owner.doubtPath(false)
	then := l.owner.taken(stream)
	l.mu.Unlock()
	if confirmed != nil {
		confirmed()
	}
	go l.heartbeats.beat(stream.Context().Done(), func() error { return l.sendOn(stream, l.heartbeat) })
	go l.read(stream)
	if then != nil {
		then()
	}
	l.heartbeats.poke()
	return true
}

// sendOn sends on stream, one sender at a time: a gRPC stream's Send is not safe for
// concurrent use.
func (l *link[Req, Resp]) sendOn(stream grpc.BidiStreamingClient[Req, Resp], message *Req) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	return stream.Send(message)
}

// read applies each message from the server as it comes, until the call ends (see broken).
func (l *link[Req, Resp]) read(stream grpc.BidiStreamingClient[Req, Resp]) {
	for {
		message, err := stream.Recv()
		if err != nil {
			l.broken(stream, err)
			return
		}
		l.heartbeats.hear()
		l.owner.handle(message)
	}
}

// dial starts a Session call on endpoint i.
func (s *session) dial(ctx context.Context, i int) (sessionStream, error) {
	return s.endpoints.rpcs[i].Session(ctx)
}

// unreachable: an attempt on an endpoint failed because it could not be reached or did not
// answer in time, so that the next endpoint may do better.
func (s *session) unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// taken: requests waiting for a stream go to this one (see sendFor).
func (s *session) taken(sessionStream) func() {
	close(s.ready)
	return nil
}

// send sends on the current stream, waiting while the session connects or resumes. A message
// lost with a breaking stream is accounted for by the resume (see settle).
func (s *session) send(ctx context.Context, message *pb.SessionRequest) error {
	return s.sendFor(ctx, message, nil)
}

// sendFor is send; for the acquire of acquiring, it notes that the acquire went to a stream, in
// the same step as choosing the stream: a resume sends again an acquire that went to the broken
// stream, not one that waited for the new stream and goes to it now.
func (s *session) sendFor(ctx context.Context, message *pb.SessionRequest, acquiring *request) error {
	for {
		s.mu.Lock()
		stream, ready, ended := s.stream, s.ready, s.ended
		if stream != nil && acquiring != nil {
			acquiring.sent = true
		}
		s.mu.Unlock()
		if ended {
			return errSessionOver
		}
		if stream == nil {
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return errSessionOver
			}
		}
		err := s.sendOn(stream, message)
		// io.EOF: the stream broke, which read sees and resumes from.
		if err != nil && err != io.EOF {
			return err
		}
		return nil
	}
}
