// The session: one Session stream and its successors, carrying every lock of a Client; how it
// starts, falls in doubt, and ends (when its grace runs out, the server drops it, or Close).

package lockstream

import (
	"errors"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errSessionOver: the session ended before the request could be queued on it; Lock takes the
// next session.
var errSessionOver = errors.New("lockstream: session over")

// session is one Session stream and its successors (after a resume): every lock of a Client.
//
// Safety rests on one clock: heard (kept by heartbeats), the last time a message came from the
// server. The server frees a request no earlier than its resume grace after it notices the
// break, and it cannot notice before it sent the last message this client heard. So the client
// reports every held lock lost a tenth of the grace (for that message's time on the way) before
// the grace, counted from heard, is over, whatever it is doing then: resuming, waiting for a
// connection, or nothing at all on a stream that went silent.
type session struct {
	// The Session calls; mu guards the fields below too.
	link[pb.SessionRequest, pb.SessionResponse]
	options clientOptions
	onEnd   func(*session, error) // tells the client the session ended, and why

	ready    chan struct{} // closed while `stream` is usable
	requests requestTable
	inDoubt  bool // the path to the server is broken or silent
	closing  bool
}

// startSession makes a session and connects it in the background: requests wait for the
// stream with their own contexts.
func startSession(endpoints *endpoints, options clientOptions, onEnd func(*session, error)) *session {
	s := &session{options: options, onEnd: onEnd, ready: make(chan struct{}), requests: newRequestTable()}
	h := newHeartbeats(options.heartbeat())
	open := &pb.SessionOpen{HeartbeatInterval: durationOrNil(h.interval)}
	if options.resumeGrace > 0 {
		open.ResumeGrace = durationpb.New(options.resumeGrace)
	}
	s.init(s, endpoints, h, &pb.SessionRequest{Kind: &pb.SessionRequest_Open{Open: open}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.AcquireHeartbeat{}}}, "free the locks")
	go s.connect()
	go s.watch()
	return s
}

// over: the session has ended; the next Lock starts a new one.
func (s *session) over() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// doubtPath marks the path to the server in doubt, or sound again: the held locks are in doubt,
// or confirmed (the server has just told where they stand). Called with mu held.
func (s *session) doubtPath(doubt bool) func() {
	if s.inDoubt == doubt {
		return nil
	}
	s.inDoubt = doubt
	locks := s.requests.held()
	return func() {
		for _, lock := range locks {
			lock.setDoubt(pathDoubt, doubt)
		}
	}
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
