// Resume and failover, a link's and the session's: when a call breaks, taking its owner over on
// a new call, on the next endpoint in turn; for the session, settling what the server's report
// leaves out.

package lockstream

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// broken: the call ended (io.EOF: OK). Resumes the link on a new call when the server may still
// keep it (and the owner would), else ends the owner.
func (l *link[Req, Resp]) broken(stream grpc.BidiStreamingClient[Req, Resp], err error) {
	l.mu.Lock()
	if l.ended || l.stream != stream {
		l.mu.Unlock()
		return
	}
	l.stream = nil
	l.streamCancel()
	cut := l.cutCause
	l.cutCause = nil
	if err == io.EOF {
		err = nil
	}
	resumable := l.owner.dropped()
	if !resumable || l.resumeToken == "" || l.resumeGrace <= 0 || cut == nil && final(err, stream.Trailer()) {
		l.mu.Unlock()
		l.owner.finish(l.owner.endOf(err, cut))
		return
	}
	l.resuming = true
	inDoubt := l.owner.doubtPath(true)
	l.mu.Unlock()
	if inDoubt != nil {
		inDoubt()
	}
	l.heartbeats.poke()
	go l.resume()
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

// resume takes the link over on new calls, each on the endpoint after the last one tried (with
// a single endpoint, that one again), until one succeeds or an instance gives a verdict its
// owner takes as final (refused). The watchdog ends the owner when the grace is over, which
// stops this too.
func (l *link[Req, Resp]) resume() {
	l.mu.Lock()
	from := l.endpoint
	l.mu.Unlock()
	n := l.endpoints.count()
	backoff := 50 * time.Millisecond
	for tried := 1; l.ctx.Err() == nil; tried++ {
		i := l.endpoints.moveOn(from)
		stream, cancel, trailer, err := l.takeOver(i)
		if err == nil {
			if !l.use(stream, cancel, i) {
				cancel()
			}
			return
		}
		if why, over := l.owner.refused(i, err, trailer); over {
			l.owner.finish(why)
			return
		}
		from = i
		// Back off once every endpoint has failed in turn.
		if tried%n != 0 {
			continue
		}
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// takeOver resumes the link on endpoint i: a call whose server has told where the owner stands
// again (resumed) within the attempt's limit (see resumeAttempt), then settled. On failure, the
// call's trailer if it ended, for its verdict.
func (l *link[Req, Resp]) takeOver(i int) (grpc.BidiStreamingClient[Req, Resp], context.CancelFunc, metadata.MD, error) {
	l.mu.Lock()
	message := l.owner.resumeWith()
	l.mu.Unlock()
	ctx, cancel, answered := attempt(l.ctx, l.resumeLimit())
	stream, response, err := l.call(ctx, i, message)
	for ; err == nil; response, err = stream.Recv() {
		l.heartbeats.hear()
		l.owner.handle(response)
		if !l.owner.resumed(response) {
			continue
		}
		if !answered() {
			cancel()
			return nil, nil, nil, attemptError(ctx, errNoAnswer)
		}
		if err := l.owner.settle(stream); err != nil {
			cancel()
			return nil, nil, nil, err
		}
		return stream, cancel, nil, nil
	}
	var trailer metadata.MD
	if stream != nil {
		trailer = stream.Trailer()
	}
	cancel()
	return nil, nil, trailer, attemptError(ctx, err)
}

// resumeLimit is how long an endpoint is given to take the link over (see resumeAttempt).
func (l *link[Req, Resp]) resumeLimit() time.Duration {
	l.mu.Lock()
	grace := l.resumeGrace
	l.mu.Unlock()
	return resumeAttempt(l.endpoints.count(), grace, l.heartbeats.now()-l.heartbeats.lastHeard())
}

// dropped: the stream is gone; requests wait for the next (see sendFor). Close gives the
// session up rather than resume it.
func (s *session) dropped() bool {
	s.ready = make(chan struct{})
	return !s.closing
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

// resumeWith is the message that resumes the session; each request is to be reported anew.
func (s *session) resumeWith() *pb.SessionRequest {
	for req := range s.requests.all() {
		req.reported = false
	}
	return &pb.SessionRequest{Kind: &pb.SessionRequest_Resume{Resume: &pb.SessionResume{
		ResumeToken: s.resumeToken, HeartbeatInterval: durationOrNil(s.heartbeats.interval),
	}}}
}

// resumed: the server's report on a resumed stream ends with `resumed`.
func (s *session) resumed(message *pb.SessionResponse) bool { return message.GetResumed() != nil }

// refused: an instance that does not know the session (NOT_FOUND) ends it; any other failure
// to resume it is tried again on the next endpoint.
func (s *session) refused(i int, err error, _ metadata.MD) (*Error, bool) {
	if status.Code(err) != codes.NotFound {
		return nil, false
	}
	message := "the server no longer knows the session (its resume grace is over, or it restarted)"
	if s.endpoints.count() > 1 {
		message = fmt.Sprintf("the server at %s does not know the session: %s", s.endpoints.name(i), status.Convert(err).Message())
	}
	return &Error{Code: codes.Unavailable, kind: ErrUnavailable, cause: err, Message: message}, true
}

// settle settles, once the server's report is read, every request the report did not mention:
// the server does not know it. One never granted is asked for again if its acquire went to the
// broken stream (and was lost with it); a held one ended meanwhile; one let go is over.
// What a reported request was sent last and has no answer to (release, cancel, set_value,
// downgrade: all idempotent) may have been lost with the old stream: it is sent again.
func (s *session) settle(stream sessionStream) error {
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
