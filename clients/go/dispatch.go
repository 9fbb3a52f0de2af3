// Dispatch: applying each message from the server to the session and to the request it names.

package lockstream

import (
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
)

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
