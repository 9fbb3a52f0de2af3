// The session's stream: opening it on an endpoint (going round the list), taking it into use,
// sending on it and reading from it.

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

// connect opens the session on the current endpoint, or on the next ones in turn if it cannot
// reach it: once round the list, after which the session ends (ErrUnavailable).
func (s *session) connect() {
	open := &pb.SessionOpen{HeartbeatInterval: durationOrNil(s.heartbeats.interval)}
	if s.options.resumeGrace > 0 {
		open.ResumeGrace = durationpb.New(s.options.resumeGrace)
	}
	message := &pb.SessionRequest{Kind: &pb.SessionRequest_Open{Open: open}}
	n := s.endpoints.count()
	var failures []string
	var last error
	for i, tried := s.endpoints.now(), 0; tried < n; i, tried = s.endpoints.moveOn(i), tried+1 {
		stream, cancel, err := s.open(i, message)
		if err == nil {
			if !s.use(stream, cancel, i) {
				cancel()
			}
			return
		}
		if s.ctx.Err() != nil {
			return // closed meanwhile
		}
		if !unreachable(err) {
			s.finish(transportError("", "the session ended", err))
			return
		}
		failures = append(failures, s.endpoints.name(i)+": "+status.Convert(err).Message())
		last = err
	}
	if n == 1 {
		s.finish(transportError("", "could not reach the server", last))
		return
	}
	s.finish(&Error{Code: codes.Unavailable, kind: ErrUnavailable, cause: last,
		Message: "could not reach the server at any endpoint: " + strings.Join(failures, "; ")})
}

// open opens the session on endpoint i: a stream whose first message from the server
// (`opened`) has come.
func (s *session) open(i int, message *pb.SessionRequest) (sessionStream, context.CancelFunc, error) {
	stream, cancel, answered, err := s.startStream(i, message, s.openLimit())
	if err != nil {
		return nil, nil, err
	}
	first, err := stream.Recv()
	if err == nil && !answered() {
		err = errNoAnswer
	}
	if err != nil {
		err = attemptError(stream.Context(), err)
		cancel()
		return nil, nil, err
	}
	s.heartbeats.hear()
	s.handle(first)
	return stream, cancel, nil
}

// unreachable: an attempt on an endpoint failed because it could not be reached or did not
// answer in time, so that the next endpoint may do better.
func unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// The time each attempt on an endpoint is given to answer, when there is another to try: long
// enough for a connection and a round trip, short enough that a frozen endpoint leaves time for
// the others within the resume grace.
const (
	maxAttempt = time.Second
	minAttempt = 100 * time.Millisecond
)

// openLimit is how long an endpoint is given to answer an open: see openAttempt.
func (s *session) openLimit() time.Duration { return openAttempt(s.endpoints.count(), s.heartbeats) }

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

// startStream opens a Session stream on endpoint i and sends its first message, within an
// attempt of limit (see attempt).
func (s *session) startStream(i int, first *pb.SessionRequest, limit time.Duration) (stream sessionStream, cancel context.CancelFunc, answered func() bool, err error) {
	ctx, cancel, answered := attempt(s.ctx, limit)
	stream, err = s.endpoints.rpcs[i].Session(ctx)
	if err == nil {
		err = stream.Send(first)
		if err == io.EOF {
			_, err = stream.Recv()
		}
	}
	if err != nil {
		err = attemptError(ctx, err)
		cancel()
		return nil, nil, nil, err
	}
	return stream, cancel, answered, nil
}

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

// use makes `stream` the session's stream and starts reading it; false if the session ended
// meanwhile. Held locks are confirmed: the server has just told where they stand.
func (s *session) use(stream sessionStream, cancel context.CancelFunc, endpoint int) bool {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return false
	}
	s.stream, s.streamCancel, s.streamSince, s.endpoint = stream, cancel, s.heartbeats.now(), endpoint
	s.resuming = false
	close(s.ready)
	confirmed := s.inDoubt
	s.inDoubt = false
	locks := s.requests.held()
	s.mu.Unlock()
	if confirmed {
		for _, lock := range locks {
			lock.setDoubt(pathDoubt, false)
		}
	}
	heartbeat := &pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.AcquireHeartbeat{}}}
	go s.heartbeats.beat(stream.Context().Done(), func() error { return s.sendOn(stream, heartbeat) })
	go s.read(stream)
	s.heartbeats.poke()
	return true
}

// send sends on the current stream, waiting while the session connects or resumes. A message
// lost with a breaking stream is accounted for by the resume (see takeOver).
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

// sendOn sends on stream, one sender at a time: a gRPC stream's Send is not safe for
// concurrent use.
func (s *session) sendOn(stream sessionStream, message *pb.SessionRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return stream.Send(message)
}

// read applies each message from the server as it comes, until the stream ends (see broken).
func (s *session) read(stream sessionStream) {
	for {
		message, err := stream.Recv()
		if err != nil {
			s.broken(stream, err)
			return
		}
		s.heartbeats.hear()
		s.handle(message)
	}
}
