package lockstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Held locks are in doubt, and the stream is replaced, after this many heartbeat intervals
// without a message from the server (it sends one every interval).
const suspectAfterIntervals = 2

// session is one Session stream and its successors (after a resume): every lock of a Client.
//
// Safety rests on one clock: heard, the last time a message came from the server. The server
// frees a request no earlier than its resume grace after it notices the break, and it cannot
// notice before it sent the last message this client heard. So the client reports every held
// lock lost a tenth of the grace (for that message's time on the way) before the grace, counted
// from heard, is over, whatever it is doing then: resuming, waiting for a connection, or
// nothing at all on a stream that went silent.
type session struct {
	endpoints *endpoints
	options   clientOptions
	onEnd     func(*session, error) // tells the client the session ended, and why
	born      time.Time             // the monotonic base of heard and streamSince
	// Ends with the session: every stream's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// Closed when the session is over; nothing is held or queued for it any more.
	done chan struct{}
	// When the server was last heard from (since born), for the watchdog.
	heard atomic.Int64
	// Wakes the watchdog when its deadlines change.
	wake chan struct{}

	sendMu sync.Mutex // a gRPC stream's Send is not safe for concurrent use

	mu           sync.Mutex
	stream       sessionStream // nil while the session connects or resumes
	streamCancel context.CancelFunc
	endpoint     int           // where the current (or last) stream is
	streamSince  time.Duration // when the current stream was taken into use (since born)
	cutCause     *Error        // why the client cut the current stream, if it did
	ready        chan struct{} // closed while `stream` is usable
	requests     map[uint32]*request
	lastID       uint32
	resumeToken  string
	resumeGrace  time.Duration // the server's, from `opened`
	opened       bool
	resuming     bool
	inDoubt      bool // the path to the server is broken or silent
	closing      bool
	ended        bool
}

// request is one lock request of the session, from `acquire` to `ended`.
type request struct {
	id         uint32
	name       string // as the client names it (a multi-lock's names joined with "+")
	serverName string // as the server's messages name it
	message    *pb.SessionAcquire
	options    lockOptions

	granted chan struct{} // closed at `acquired`
	ended   chan struct{} // closed at `ended`
	// Guarded by the session's mu.
	sent     bool               // the acquire went to a stream (see sendFor)
	err      error              // how it ended; nil for OK
	lock     *Lock              // once granted
	letGo    *pb.SessionRequest // the release or cancel sent, if any
	byClose  bool               // the release was Close's
	ack      chan struct{}      // the `value_set` or `downgraded` awaited, if any
	asked    *pb.SessionRequest // the `set_value` or `downgrade` it answers
	reported bool               // said something during a resume
}

// startSession makes a session and connects it in the background: requests wait for the
// stream with their own contexts.
func startSession(endpoints *endpoints, options clientOptions, onEnd func(*session, error)) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		endpoints: endpoints, options: options, onEnd: onEnd, born: time.Now(), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1), ready: make(chan struct{}),
		requests: map[uint32]*request{},
	}
	go s.connect()
	go s.watch()
	return s
}

// connect opens the session on the current endpoint, or on the next ones in turn if it cannot
// reach it: once round the list, after which the session ends (ErrUnavailable).
func (s *session) connect() {
	open := &pb.SessionOpen{HeartbeatInterval: durationOrNil(s.options.heartbeat())}
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
	s.heard.Store(int64(s.now()))
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
	return suspectAfterIntervals * s.options.heartbeat()
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
	left := grace - grace/10 - (s.now() - time.Duration(s.heard.Load()))
	return min(maxAttempt, max(left/3, minAttempt))
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// now is the time since the session was made (monotonic).
func (s *session) now() time.Duration { return time.Since(s.born) }

func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
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
	s.stream, s.streamCancel, s.streamSince, s.endpoint = stream, cancel, s.now(), endpoint
	s.resuming = false
	close(s.ready)
	confirmed := s.inDoubt
	s.inDoubt = false
	locks := s.heldLocks()
	s.mu.Unlock()
	if confirmed {
		for _, lock := range locks {
			lock.setDoubt(pathDoubt, false)
		}
	}
	go s.heartbeats(stream)
	go s.read(stream)
	s.poke()
	return true
}

// heldLocks are the session's granted locks. Called with mu held.
func (s *session) heldLocks() []*Lock {
	var locks []*Lock
	for _, req := range s.requests {
		if req.lock != nil {
			locks = append(locks, req.lock)
		}
	}
	return locks
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
		s.sendMu.Lock()
		err := stream.Send(message)
		s.sendMu.Unlock()
		// io.EOF: the stream broke, which read sees and resumes from.
		if err != nil && err != io.EOF {
			return err
		}
		return nil
	}
}

func (s *session) acquire(ctx context.Context, name string, options lockOptions) (*Lock, error) {
	message := &pb.SessionAcquire{
		Name: name, Mode: options.mode.proto(), Owner: options.owner, Value: options.value,
		Limit: options.limit, Weight: options.weight,
	}
	if options.waitTimeout != nil {
		message.WaitTimeout = durationpb.New(*options.waitTimeout)
	}
	serverName := name
	if options.targets != nil {
		message.Name, message.Mode, message.Limit, message.Weight = "", pb.LockMode_LOCK_MODE_UNSPECIFIED, 0, nil
		serverName = ""
		for i, target := range options.targets {
			lock := &pb.LockTarget{Name: target.Name, Mode: target.mode().proto(), Limit: int32(target.Limit)}
			if target.Weight != 0 {
				weight := int32(target.Weight)
				lock.Weight = &weight
			}
			message.Locks = append(message.Locks, lock)
			if i > 0 {
				serverName += ", "
			}
			serverName += jsonQuote(target.Name)
		}
	}
	req := &request{
		name: name, serverName: serverName, message: message, options: options,
		granted: make(chan struct{}), ended: make(chan struct{}),
	}
	s.mu.Lock()
	if s.ended || s.closing {
		s.mu.Unlock()
		return nil, errSessionOver
	}
	req.id = s.newID()
	message.RequestId = req.id
	s.requests[req.id] = req
	s.mu.Unlock()

	if err := s.sendFor(ctx, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: message}}, req); err != nil {
		s.mu.Lock()
		if s.requests[req.id] == req {
			delete(s.requests, req.id)
		}
		s.mu.Unlock()
		select {
		case <-req.ended:
			// The session ended with the request in it: that is the answer.
			return nil, req.failure()
		default:
		}
		switch {
		case errors.Is(err, errSessionOver):
			return nil, err
		case ctx.Err() != nil:
			return nil, contextError(name, ctx.Err())
		}
		return nil, &Error{Lock: name, Code: codes.Internal, Message: "could not be sent: " + err.Error(), kind: ErrFailed, cause: err}
	}
	select {
	case <-req.granted:
		return req.lock, nil
	case <-req.ended:
		return nil, req.failure()
	case <-ctx.Done():
		// Leave the queue (or give back a grant that crossed the cancel) before returning.
		s.letGo(req, &pb.SessionRequest{Kind: &pb.SessionRequest_Cancel{Cancel: &pb.SessionCancel{RequestId: req.id}}})
		select {
		case <-req.ended:
		case <-s.done:
		}
		return nil, contextError(name, ctx.Err())
	}
}

// failure is how a request that was not granted ended (once `ended` is closed).
func (req *request) failure() error {
	if req.err != nil {
		return req.err
	}
	return &Error{Lock: req.name, Code: codes.Unavailable, Message: "the request ended before it was granted", kind: ErrUnavailable}
}

// newID is an id no request of the session uses. Called with mu held.
func (s *session) newID() uint32 {
	for {
		s.lastID++
		if s.lastID == 0 {
			s.lastID = 1
		}
		if _, used := s.requests[s.lastID]; !used {
			return s.lastID
		}
	}
}

// letGo sends a release or cancel for req, once.
func (s *session) letGo(req *request, message *pb.SessionRequest) {
	s.mu.Lock()
	already := req.letGo != nil
	if !already {
		req.letGo = message
	}
	s.mu.Unlock()
	if !already {
		_ = s.send(s.ctx, message)
	}
}

func (s *session) read(stream sessionStream) {
	for {
		message, err := stream.Recv()
		if err != nil {
			s.broken(stream, err)
			return
		}
		s.heard.Store(int64(s.now()))
		s.handle(message)
	}
}

// heartbeats sends one every interval, so that the server hears from a quiet client (and
// idle-timeout proxies leave the stream alone). The watchdog listens for the server's.
func (s *session) heartbeats(stream sessionStream) {
	interval := s.options.heartbeat()
	if interval <= 0 {
		return
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	heartbeat := &pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.AcquireHeartbeat{}}}
	for {
		select {
		case <-stream.Context().Done():
			return
		case <-ticker.C:
		}
		s.sendMu.Lock()
		_ = stream.Send(heartbeat)
		s.sendMu.Unlock()
	}
}

// watch applies the two rules of silence until the session ends: held locks are in doubt, and
// the stream is replaced, after two heartbeat intervals without a word from the server; they
// are lost a tenth of the resume grace before the grace, counted from the last word, is over.
func (s *session) watch() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(s.check())
		select {
		case <-s.done:
			return
		case <-timer.C:
		case <-s.wake:
		}
	}
}

// check applies the rules of silence now, and says when to check again.
func (s *session) check() time.Duration {
	interval := s.options.heartbeat()
	now, heard := s.now(), time.Duration(s.heard.Load())
	s.mu.Lock()
	stream, since, opened, grace, resuming, ended := s.stream, s.streamSince, s.opened, s.resumeGrace, s.resuming, s.ended
	s.mu.Unlock()
	next := time.Hour
	if ended {
		return next
	}
	// Without heartbeats a quiet stream says nothing about the path: the rule applies once it broke.
	if opened && grace > 0 && (interval > 0 || resuming) {
		lossAfter := grace - grace/10
		silent := now - heard
		if silent >= lossAfter {
			s.finish(&Error{Code: codes.Unavailable, Message: fmt.Sprintf(
				"no message from the server for %s; it may free the locks once its resume grace (%s) is over",
				silent.Round(time.Millisecond), grace), kind: ErrUnavailable})
			return next
		}
		next = lossAfter - silent
	}
	if interval > 0 && stream != nil {
		suspectAfter := suspectAfterIntervals * interval
		silent := now - max(heard, since)
		if silent >= suspectAfter {
			s.cut(stream, &Error{Code: codes.Unavailable, Message: fmt.Sprintf(
				"no message from the server for %s (%d heartbeat intervals)", silent.Round(time.Millisecond), suspectAfterIntervals)})
		} else {
			next = min(next, suspectAfter-silent)
		}
	}
	return next
}

// cut ends a stream the server has gone silent on: held locks are in doubt at once, and the
// session is resumed on a new stream (see broken).
func (s *session) cut(stream sessionStream, why *Error) {
	s.mu.Lock()
	if s.stream != stream {
		s.mu.Unlock()
		return
	}
	s.cutCause = why
	cancel := s.streamCancel
	locks := s.doubt()
	s.mu.Unlock()
	for _, lock := range locks {
		lock.setDoubt(pathDoubt, true)
	}
	cancel()
}

// doubt marks the path in doubt; the held locks to tell. Called with mu held.
func (s *session) doubt() []*Lock {
	if s.inDoubt {
		return nil
	}
	s.inDoubt = true
	return s.heldLocks()
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
		after = append(after, s.poke)
		return
	case *pb.SessionResponse_Heartbeat, *pb.SessionResponse_Resumed:
		return
	}
	req := s.requests[message.GetRequestId()]
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
		s.end(req, err)
	}
}

// end ends req with err (nil: OK). Called with mu held.
func (s *session) end(req *request, err error) {
	if s.requests[req.id] == req {
		delete(s.requests, req.id)
	}
	req.err = err
	close(req.ended)
	if req.lock != nil {
		req.lock.ended(err, req.letGo != nil)
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
	s.poke()
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
			ResumeToken: s.resumeToken, HeartbeatInterval: durationOrNil(s.options.heartbeat()),
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
	for _, req := range s.requests {
		req.reported = false
	}
	s.mu.Unlock()
	for {
		message, err := stream.Recv()
		if err != nil {
			return attemptError(stream.Context(), err)
		}
		s.heard.Store(int64(s.now()))
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
	for _, req := range s.requests {
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
			s.end(req, nil)
		case req.lock != nil:
			s.end(req, &Error{Lock: req.name, Code: codes.Aborted, Message: "was lost while the stream was broken", kind: ErrLost})
		case req.sent:
			again = append(again, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: req.message}})
		}
		// Otherwise its acquire is waiting for a stream (sendFor), and goes to this one.
	}
	s.mu.Unlock()
	for _, message := range again {
		s.sendMu.Lock()
		err := stream.Send(message)
		s.sendMu.Unlock()
		if err != nil {
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
	for _, req := range s.requests {
		var err error
		switch {
		case req.letGo != nil:
		case closing:
			err = closedError(req.name)
		default:
			err = &Error{Lock: req.name, Code: why.Code, Message: why.Message, kind: kindOf(why.Code), cause: why.cause}
		}
		s.end(req, err)
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
	for id, req := range s.requests {
		if req.letGo == nil {
			req.letGo = &pb.SessionRequest{Kind: &pb.SessionRequest_Release{Release: &pb.SessionRelease{RequestId: id}}}
			releases = append(releases, req.letGo)
		}
		if req.lock == nil {
			s.end(req, closedError(req.name))
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
