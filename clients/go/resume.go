// Resume and failover: when the stream breaks, taking the session over on a new stream, on the
// next endpoint in turn, and settling what the server's report leaves out.

package lockstream

import (
	"fmt"
	"io"
	"slices"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// resumeLimit is how long an endpoint is given to take the session over (see resumeAttempt).
func (s *session) resumeLimit() time.Duration {
	s.mu.Lock()
	grace := s.resumeGrace
	s.mu.Unlock()
	return resumeAttempt(s.endpoints.count(), grace, s.heartbeats.now()-s.heartbeats.lastHeard())
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
	if closing || token == "" || grace <= 0 || cut == nil && final(err, stream.Trailer()) {
		s.mu.Unlock()
		s.finish(s.endOf(err, cut))
		return
	}
	s.resuming = true
	inDoubt := s.doubtPath(true)
	s.mu.Unlock()
	if inDoubt != nil {
		inDoubt()
	}
	s.heartbeats.poke()
	go s.resume()
}

// endOf says why a stream that is not resumed ended.
func (s *session) endOf(err error, cut *Error) *Error {
	switch {
	case cut != nil:
		return cut
	case err == nil:
		return &Error{Code: codes.Unavailable, Message: "the server ended the session", kind: ErrUnavailable}
	}
	return s.transportError("the session ended", err)
}

// transportError is a failure of the path to the server: the session's, no lock's.
func (s *session) transportError(what string, err error) *Error {
	return transportError("", what, err)
}

// final: the call ended (with trailer) so that the server keeps nothing of it to resume.
func final(err error, trailer metadata.MD) bool {
	if err == nil || slices.Contains(trailer.Get("lockstream-request"), "ended") {
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
