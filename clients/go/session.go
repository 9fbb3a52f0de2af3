package lockstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errSessionOver: the session ended before the request could be queued on it; Lock takes the
// next session.
var errSessionOver = errors.New("lockstream: session over")

type sessionStream = grpc.BidiStreamingClient[pb.SessionRequest, pb.SessionResponse]

// session is one Session stream and its successors (after a resume): every lock of a Client.
//
// Safety rests on one clock: heard (kept by heartbeats), the last time a message came from the
// server. The server frees a request no earlier than its resume grace after it notices the
// break, and it cannot notice before it sent the last message this client heard. So the client
// reports every held lock lost a tenth of the grace (for that message's time on the way) before
// the grace, counted from heard, is over, whatever it is doing then: resuming, waiting for a
// connection, or nothing at all on a stream that went silent.
type session struct {
	endpoints *endpoints
	options   clientOptions
	onEnd     func(*session, error) // tells the client the session ended, and why
	// Ends with the session: every stream's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// Closed when the session is over; nothing is held or queued for it any more.
	done chan struct{}
	// The server's heartbeats and the client's, and when the server was last heard from.
	heartbeats *heartbeats

	sendMu sync.Mutex // a gRPC stream's Send is not safe for concurrent use

	mu           sync.Mutex
	stream       sessionStream // nil while the session connects or resumes
	streamCancel context.CancelFunc
	endpoint     int           // where the current (or last) stream is
	streamSince  time.Duration // when the current stream was taken into use (heartbeats.now)
	cutCause     *Error        // why the client cut the current stream, if it did
	ready        chan struct{} // closed while `stream` is usable
	requests     requestTable
	resumeToken  string
	resumeGrace  time.Duration // the server's, from `opened`
	opened       bool
	resuming     bool
	inDoubt      bool // the path to the server is broken or silent
	closing      bool
	ended        bool
}

// startSession makes a session and connects it in the background: requests wait for the
// stream with their own contexts.
func startSession(endpoints *endpoints, options clientOptions, onEnd func(*session, error)) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		endpoints: endpoints, options: options, onEnd: onEnd, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), heartbeats: newHeartbeats(options.heartbeat()), ready: make(chan struct{}),
		requests: newRequestTable(),
	}
	go s.connect()
	go s.watch()
	return s
}

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

// openLimit is how long an endpoint is given to answer an open: maxAttempt when there is another
// endpoint to try; with a single endpoint, two heartbeat intervals, the silence after which a
// stream is given up (without heartbeats, gRPC's connection attempt and keepalive).
func (s *session) openLimit() time.Duration {
	if s.endpoints.count() > 1 {
		return maxAttempt
	}
	return s.heartbeats.suspectAfter()
}

// resumeLimit is how long an endpoint is given to take the session over: a third of what is
// left of the grace (at least minAttempt), at most maxAttempt. No limit with a single endpoint:
// a new attempt would go over the same connection, and there is nowhere else to go.
func (s *session) resumeLimit() time.Duration {
	if s.endpoints.count() == 1 {
		return 0
	}
	s.mu.Lock()
	grace := s.resumeGrace
	s.mu.Unlock()
	left := grace - grace/10 - (s.heartbeats.now() - s.heartbeats.lastHeard())
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

// startStream opens a Session stream on endpoint i and sends its first message. With a limit,
// the stream is cancelled unless answered (which stops the clock) is called within it;
// answered says false if it came too late.
func (s *session) startStream(i int, first *pb.SessionRequest, limit time.Duration) (stream sessionStream, cancel context.CancelFunc, answered func() bool, err error) {
	ctx, cancelCause := context.WithCancelCause(s.ctx)
	cancel = func() { cancelCause(nil) }
	answered = func() bool { return true }
	if limit > 0 {
		clock := time.AfterFunc(limit, func() {
			cancelCause(status.Errorf(codes.Unavailable, "no answer within %s", limit.Round(time.Millisecond)))
		})
		cancel = func() { clock.Stop(); cancelCause(nil) }
		answered = clock.Stop
	}
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
	go s.heartbeats.beat(stream, s.sendOn)
	go s.read(stream)
	s.heartbeats.poke()
	return true
}

func (s *session) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
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

// doubt marks the path in doubt; the held locks to tell. Called with mu held.
func (s *session) doubt() []*Lock {
	if s.inDoubt {
		return nil
	}
	s.inDoubt = true
	return s.requests.held()
}

// handle applies one message from the server.
func (s *session) handle(message *pb.SessionResponse) {
	var after []func() // callbacks, run in order once mu is released
	defer func() {
		for _, f := range after {
			f()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind := message.GetKind().(type) {
	case *pb.SessionResponse_Opened:
		s.resumeToken = kind.Opened.GetResumeToken()
		s.resumeGrace = kind.Opened.GetResumeGrace().AsDuration()
		s.opened = true
		after = append(after, s.heartbeats.poke)
		return
	case *pb.SessionResponse_Heartbeat, *pb.SessionResponse_Resumed:
		return
	}
	req := s.requests.get(message.GetRequestId())
	if req == nil {
		return
	}
	req.reported = true
	lock := req.lock
	switch kind := message.GetKind().(type) {
	case *pb.SessionResponse_Queued:
		if onQueued := req.options.onQueued; onQueued != nil {
			ahead := int(kind.Queued.GetAhead())
			after = append(after, func() { onQueued(ahead) })
		}
	case *pb.SessionResponse_Acquired:
		if lock == nil {
			req.lock = newLock(s, req, kind.Acquired)
			close(req.granted)
		}
	case *pb.SessionResponse_InDoubt:
		if lock != nil {
			after = append(after, func() { lock.setDoubt(serverDoubt, true) })
		}
	case *pb.SessionResponse_Confirmed:
		if lock != nil {
			after = append(after, func() { lock.setDoubt(serverDoubt, false) })
		}
	case *pb.SessionResponse_RevokeRequested:
		if lock != nil {
			reason, deadline := kind.RevokeRequested.GetReason(), time.Time{}
			if forceAt := kind.RevokeRequested.GetForceAt(); forceAt != nil {
				deadline = forceAt.AsTime()
			}
			after = append(after, func() { lock.revokeRequested(reason, deadline) })
		}
	case *pb.SessionResponse_ValueSet, *pb.SessionResponse_Downgraded:
		if _, downgraded := kind.(*pb.SessionResponse_Downgraded); downgraded && lock != nil {
			lock.mode.Store(int32(Read))
		}
		if req.ack != nil {
			close(req.ack)
			req.ack, req.asked = nil, nil
		}
	case *pb.SessionResponse_Ended:
		var err error
		if code := codes.Code(kind.Ended.GetCode()); code != codes.OK {
			failure := serverError(req.name, req.serverName, code, kind.Ended.GetMessage())
			if req.options.try && code == codes.DeadlineExceeded && lock == nil {
				failure.kind = ErrLocked
			}
			err = failure
		}
		s.requests.end(req, err)
	}
}

// broken: the stream ended. Resumes the session on a new stream when the server may still
// keep it, else ends it.
func (s *session) broken(stream sessionStream, err error) {
	s.mu.Lock()
	if s.stream != stream {
		s.mu.Unlock()
		return
	}
	s.stream = nil
	s.ready = make(chan struct{})
	s.streamCancel()
	cut := s.cutCause
	s.cutCause = nil
	token, grace, closing := s.resumeToken, s.resumeGrace, s.closing
	if err == io.EOF {
		err = nil
	}
	if closing || token == "" || grace <= 0 || cut == nil && final(err, stream) {
		s.mu.Unlock()
		s.finish(endCause(err, cut))
		return
	}
	s.resuming = true
	locks := s.doubt()
	s.mu.Unlock()
	for _, lock := range locks {
		lock.setDoubt(pathDoubt, true)
	}
	s.heartbeats.poke()
	go s.resume()
}

// endCause says why a stream that is not resumed ended.
func endCause(err error, cut *Error) *Error {
	switch {
	case cut != nil:
		return cut
	case err == nil:
		return &Error{Code: codes.Unavailable, Message: "the server ended the session", kind: ErrUnavailable}
	}
	return transportError("", "the session ended", err)
}

// final: the call ended so that the server keeps nothing of the session to resume.
func final(err error, stream sessionStream) bool {
	if err == nil || slices.Contains(stream.Trailer().Get("lockstream-request"), "ended") {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Internal, codes.Unknown:
		return false
	}
	return true
}

// resume takes the session over on new streams, each on the endpoint after the last one tried
// (with a single endpoint, that one again), until one succeeds or an instance says it has no such
// session. The watchdog ends the session when the grace is over, which stops this too.
func (s *session) resume() {
	s.mu.Lock()
	from := s.endpoint
	s.mu.Unlock()
	n := s.endpoints.count()
	backoff := 50 * time.Millisecond
	for tried := 1; s.ctx.Err() == nil; tried++ {
		i := s.endpoints.moveOn(from)
		s.mu.Lock()
		message := &pb.SessionRequest{Kind: &pb.SessionRequest_Resume{Resume: &pb.SessionResume{
			ResumeToken: s.resumeToken, HeartbeatInterval: durationOrNil(s.heartbeats.interval),
		}}}
		s.mu.Unlock()
		stream, cancel, answered, err := s.startStream(i, message, s.resumeLimit())
		if err == nil {
			if err = s.takeOver(stream, answered); err == nil {
				if !s.use(stream, cancel, i) {
					cancel()
				}
				return
			}
			cancel()
		}
		if status.Code(err) == codes.NotFound {
			message := "the server no longer knows the session (its resume grace is over, or it restarted)"
			if n > 1 {
				message = fmt.Sprintf("the server at %s does not know the session: %s", s.endpoints.name(i), status.Convert(err).Message())
			}
			s.finish(&Error{Code: codes.Unavailable, kind: ErrUnavailable, cause: err, Message: message})
			return
		}
		from = i
		// Back off once every endpoint has failed in turn.
		if tried%n != 0 {
			continue
		}
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// takeOver reads a resumed stream's report up to `resumed`, then settles every request the
// report did not mention: the server does not know it. One never granted is asked for again
// if its acquire went to the broken stream (and was lost with it); a held one ended meanwhile;
// one let go is over.
// What a reported request was sent last and has no answer to (release, cancel, set_value,
// downgrade: all idempotent) may have been lost with the old stream: it is sent again.
func (s *session) takeOver(stream sessionStream, answered func() bool) error {
	s.mu.Lock()
	for req := range s.requests.all() {
		req.reported = false
	}
	s.mu.Unlock()
	for {
		message, err := stream.Recv()
		if err != nil {
			return attemptError(stream.Context(), err)
		}
		s.heartbeats.hear()
		if message.GetResumed() != nil {
			if !answered() {
				return attemptError(stream.Context(), errNoAnswer)
			}
			break
		}
		s.handle(message)
	}
	var again []*pb.SessionRequest
	s.mu.Lock()
	for req := range s.requests.all() {
		if req.reported {
			if req.letGo != nil {
				again = append(again, req.letGo)
			} else if req.asked != nil {
				again = append(again, req.asked)
			}
			continue
		}
		switch {
		case req.letGo != nil:
			s.requests.end(req, nil)
		case req.lock != nil:
			s.requests.end(req, &Error{Lock: req.name, Code: codes.Aborted, Message: "was lost while the stream was broken", kind: ErrLost})
		case req.sent:
			again = append(again, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: req.message}})
		}
		// Otherwise its acquire is waiting for a stream (sendFor), and goes to this one.
	}
	s.mu.Unlock()
	for _, message := range again {
		if err := s.sendOn(stream, message); err != nil {
			return err
		}
	}
	return nil
}

// finish ends the session: every request ends with why (held locks lost, unless let go).
func (s *session) finish(why *Error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	close(s.done)
	closing := s.closing
	for req := range s.requests.all() {
		var err error
		switch {
		case req.letGo != nil:
		case closing:
			err = closedError(req.name)
		default:
			err = &Error{Lock: req.name, Code: why.Code, Message: why.Message, kind: kindOf(why.Code), cause: why.cause}
		}
		s.requests.end(req, err)
	}
	s.mu.Unlock()
	s.cancel()
	if closing {
		s.onEnd(s, closedError(""))
	} else {
		s.onEnd(s, &Error{Code: why.Code, Message: "the session was lost: " + why.Message, kind: ErrLost, cause: why.cause})
	}
}

// close releases every lock and ends every waiting request at once (ErrClosed), then ends the
// session; waits a little for the server to confirm the releases.
func (s *session) close() {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.closing = true
	var releases []*pb.SessionRequest
	for req := range s.requests.all() {
		if req.letGo == nil {
			req.letGo = &pb.SessionRequest{Kind: &pb.SessionRequest_Release{Release: &pb.SessionRelease{RequestId: req.id}}}
			releases = append(releases, req.letGo)
		}
		if req.lock == nil {
			s.requests.end(req, closedError(req.name))
		} else {
			req.byClose = true
		}
	}
	stream := s.stream
	s.mu.Unlock()
	if stream != nil {
		s.sendMu.Lock()
		for _, release := range releases {
			_ = stream.Send(release)
		}
		_ = stream.CloseSend()
		s.sendMu.Unlock()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
	}
	s.finish(closedError(""))
}
