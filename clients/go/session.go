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

// session is one Session stream and its successors (after a resume): every lock of a Client.
type session struct {
	rpc     pb.LockServiceClient
	options clientOptions
	// Ends with the session: every stream's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// Closed when the session is over; nothing is held or queued for it any more.
	done chan struct{}

	// The time of the last message from the server (UnixNano), for the heartbeat watchdog.
	heard atomic.Int64

	sendMu sync.Mutex // a gRPC stream's Send is not safe for concurrent use

	mu           sync.Mutex
	stream       sessionStream // nil while the session is being resumed
	streamCancel context.CancelFunc
	ready        chan struct{} // closed while `stream` is usable
	requests     map[uint32]*request
	lastID       uint32
	resumeToken  string
	resumeGrace  time.Duration
	closing      bool
	ended        bool
}

// request is one lock request of the session, from `acquire` to `ended`.
type request struct {
	id      uint32
	name    string
	message *pb.SessionAcquire
	onQueue func(ahead int)

	granted chan struct{} // closed at `acquired`
	ended   chan struct{} // closed at `ended`
	// Guarded by the session's mu.
	err      error              // how it ended; nil for OK
	lock     *Lock              // once granted
	letGo    *pb.SessionRequest // the release or cancel sent, if any
	ack      chan struct{}      // the `value_set` or `downgraded` awaited, if any
	asked    *pb.SessionRequest // the `set_value` or `downgrade` it answers
	reported bool               // said something during a resume
}

func openSession(rpc pb.LockServiceClient, options clientOptions) (*session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		rpc: rpc, options: options, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		ready: make(chan struct{}), requests: map[uint32]*request{},
	}
	open := &pb.SessionOpen{HeartbeatInterval: durationOrNil(options.heartbeatInterval)}
	if options.resumeGrace > 0 {
		open.ResumeGrace = durationpb.New(options.resumeGrace)
	}
	stream, streamCancel, err := s.startStream(&pb.SessionRequest{Kind: &pb.SessionRequest_Open{Open: open}})
	if err != nil {
		cancel()
		return nil, err
	}
	s.use(stream, streamCancel)
	return s, nil
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// startStream opens a Session stream and sends its first message.
func (s *session) startStream(first *pb.SessionRequest) (sessionStream, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	stream, err := s.rpc.Session(ctx)
	if err == nil {
		err = stream.Send(first)
	}
	if err != nil {
		cancel()
		if err == io.EOF {
			_, err = stream.Recv()
		}
		return nil, nil, err
	}
	s.heard.Store(time.Now().UnixNano())
	return stream, cancel, nil
}

// use makes `stream` the session's stream and starts reading it.
func (s *session) use(stream sessionStream, cancel context.CancelFunc) {
	s.mu.Lock()
	s.stream, s.streamCancel = stream, cancel
	close(s.ready)
	s.mu.Unlock()
	go s.heartbeats(stream, cancel)
	go s.read(stream)
}

func (s *session) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// send sends on the current stream, waiting while the session is being resumed. A message lost
// with a breaking stream is accounted for by the resume (see takeOver).
func (s *session) send(ctx context.Context, message *pb.SessionRequest) error {
	for {
		s.mu.Lock()
		stream, ready, ended := s.stream, s.ready, s.ended
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
		_ = stream.Send(message) // a failed send shows as a broken stream in read
		s.sendMu.Unlock()
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
	if len(options.targets) > 0 {
		message.Name, message.Mode, message.Limit, message.Weight = "", pb.LockMode_LOCK_MODE_UNSPECIFIED, 0, nil
		names := make([]string, len(options.targets))
		for i, target := range options.targets {
			names[i] = target.Name
			lock := &pb.LockTarget{Name: target.Name, Mode: target.Mode.proto(), Limit: int32(target.Limit)}
			if target.Weight > 0 {
				weight := int32(target.Weight)
				lock.Weight = &weight
			}
			message.Locks = append(message.Locks, lock)
		}
		name = strings.Join(names, "+")
	}
	req := &request{
		name: name, message: message, onQueue: options.onQueued,
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

	if err := s.send(ctx, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: message}}); err != nil {
		s.mu.Lock()
		if s.requests[req.id] == req {
			delete(s.requests, req.id)
		}
		s.mu.Unlock()
		return nil, err
	}
	select {
	case <-req.granted:
		return req.lock, nil
	case <-req.ended:
		return nil, req.err
	case <-ctx.Done():
		// Leave the queue (or give back a grant that crossed the cancel) before returning.
		s.letGo(req, &pb.SessionRequest{Kind: &pb.SessionRequest_Cancel{Cancel: &pb.SessionCancel{RequestId: req.id}}})
		select {
		case <-req.ended:
		case <-s.done:
		}
		return nil, ctx.Err()
	}
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
		s.heard.Store(time.Now().UnixNano())
		s.handle(message)
	}
}

// heartbeats sends one every interval, and cuts the stream after three without a word from
// the server: a connection that silently died, to be resumed on a new one.
func (s *session) heartbeats(stream sessionStream, cancel context.CancelFunc) {
	interval := s.options.heartbeatInterval
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
		if time.Since(time.Unix(0, s.heard.Load())) > 3*interval {
			cancel()
			return
		}
		s.sendMu.Lock()
		_ = stream.Send(heartbeat)
		s.sendMu.Unlock()
	}
}

// handle applies one message from the server.
func (s *session) handle(message *pb.SessionResponse) {
	s.mu.Lock()
	switch kind := message.GetKind().(type) {
	case *pb.SessionResponse_Opened:
		s.resumeToken = kind.Opened.GetResumeToken()
		s.resumeGrace = kind.Opened.GetResumeGrace().AsDuration()
		s.mu.Unlock()
		return
	case *pb.SessionResponse_Heartbeat, *pb.SessionResponse_Resumed:
		s.mu.Unlock()
		return
	}
	req := s.requests[message.GetRequestId()]
	if req == nil {
		s.mu.Unlock()
		return
	}
	req.reported = true
	var onQueue func()
	switch kind := message.GetKind().(type) {
	case *pb.SessionResponse_Queued:
		if req.onQueue != nil {
			ahead := int(kind.Queued.GetAhead())
			onQueue = func() { req.onQueue(ahead) }
		}
	case *pb.SessionResponse_Acquired:
		if req.lock == nil {
			req.lock = newLock(s, req, kind.Acquired)
			close(req.granted)
		}
	case *pb.SessionResponse_InDoubt:
		if req.lock != nil {
			req.lock.inDoubt.Store(true)
		}
	case *pb.SessionResponse_Confirmed:
		if req.lock != nil {
			req.lock.inDoubt.Store(false)
		}
	case *pb.SessionResponse_RevokeRequested:
		if req.lock != nil {
			req.lock.revokeRequested(kind.RevokeRequested.GetReason())
		}
	case *pb.SessionResponse_ValueSet, *pb.SessionResponse_Downgraded:
		if _, downgraded := kind.(*pb.SessionResponse_Downgraded); downgraded && req.lock != nil {
			req.lock.mode.Store(int32(Read))
		}
		if req.ack != nil {
			close(req.ack)
			req.ack, req.asked = nil, nil
		}
	case *pb.SessionResponse_Ended:
		var err error
		if code := codes.Code(kind.Ended.GetCode()); code != codes.OK {
			err = &Error{Lock: req.name, Code: code, Message: kind.Ended.GetMessage()}
		}
		s.end(req, err)
	}
	s.mu.Unlock()
	if onQueue != nil {
		onQueue()
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
	token, grace, closing := s.resumeToken, s.resumeGrace, s.closing
	s.mu.Unlock()
	if err == io.EOF {
		err = nil
	}
	if closing || token == "" || grace <= 0 || final(err, stream) {
		s.finish(err)
		return
	}
	go s.resume(time.Now().Add(grace), err)
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

// resume takes the session over on new streams until one succeeds, the server says it has no
// such session, or the grace is over (every lock lost then).
func (s *session) resume(deadline time.Time, cause error) {
	backoff := 50 * time.Millisecond
	for {
		s.mu.Lock()
		message := &pb.SessionRequest{Kind: &pb.SessionRequest_Resume{Resume: &pb.SessionResume{
			ResumeToken: s.resumeToken, HeartbeatInterval: durationOrNil(s.options.heartbeatInterval),
		}}}
		closing := s.closing
		s.mu.Unlock()
		if closing {
			s.finish(cause)
			return
		}
		stream, cancel, err := s.startStream(message)
		if err == nil {
			// A server that accepts the stream but never answers must not outlast the grace.
			timer := time.AfterFunc(time.Until(deadline), cancel)
			err = s.takeOver(stream)
			if timer.Stop() && err == nil {
				s.use(stream, cancel)
				return
			}
			cancel()
			if err == nil {
				err = cause
			}
		}
		if status.Code(err) == codes.NotFound || time.Now().After(deadline) || s.ctx.Err() != nil {
			s.finish(fmt.Errorf("could not resume the session: %w", err))
			return
		}
		cause = err
		select {
		case <-time.After(min(backoff, time.Until(deadline))):
		case <-s.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// takeOver reads a resumed stream's report up to `resumed`, then settles every request the
// report did not mention: the server does not know it. One never granted is asked for again
// (its acquire was lost with the broken stream); a held one ended meanwhile; one let go is over.
// What a reported request was sent last and has no answer to (release, cancel, set_value,
// downgrade: all idempotent) may have been lost with the old stream: it is sent again.
func (s *session) takeOver(stream sessionStream) error {
	s.mu.Lock()
	for _, req := range s.requests {
		req.reported = false
	}
	s.mu.Unlock()
	for {
		message, err := stream.Recv()
		if err != nil {
			return err
		}
		s.heard.Store(time.Now().UnixNano())
		if message.GetResumed() != nil {
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
			s.end(req, &Error{Lock: req.name, Code: codes.Aborted, Message: "the lock ended while the stream was broken"})
		default:
			again = append(again, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: req.message}})
		}
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

// finish ends the session: every request ends (held locks lost, unless let go) with cause.
func (s *session) finish(cause error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	close(s.done)
	for _, req := range s.requests {
		var err error
		switch {
		case req.letGo != nil:
			err = nil
		case s.closing:
			err = ErrClosed
		case cause == nil:
			err = &Error{Lock: req.name, Code: codes.Unavailable, Message: "the session ended"}
		default:
			err = &Error{Lock: req.name, Code: status.Code(cause), Message: "the session ended: " + cause.Error()}
		}
		s.end(req, err)
	}
	s.mu.Unlock()
	s.cancel()
}

// close releases every lock, withdraws every request and ends the session; waits a little for
// the server to confirm.
func (s *session) close() {
	s.mu.Lock()
	s.closing = true
	var releases []*pb.SessionRequest
	for id, req := range s.requests {
		if req.letGo == nil {
			req.letGo = &pb.SessionRequest{Kind: &pb.SessionRequest_Release{Release: &pb.SessionRelease{RequestId: id}}}
			releases = append(releases, req.letGo)
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
	s.finish(nil)
}
