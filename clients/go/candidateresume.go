// A candidate's resume and failover, and its watchdog: taking the candidate over on a new
// Campaign call, on the next endpoint in turn, after its call breaks or falls silent; the rules
// of silence that cut a silent call and give the candidacy up before the server's grace is over.

package lockstream

import (
	"fmt"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// resumeWith is the message that resumes the candidate.
func (c *candidate) resumeWith() *pb.CampaignRequest {
	return &pb.CampaignRequest{Kind: &pb.CampaignRequest_Resume{Resume: &pb.CampaignResume{
		ResumeToken: c.resumeToken, HeartbeatInterval: durationOrNil(c.heartbeats.interval),
	}}}
}

// resumed: the server has told where the candidate stands again, `queued` or `elected`.
func (c *candidate) resumed(message *pb.CampaignResponse) bool {
	switch message.GetKind().(type) {
	case *pb.CampaignResponse_Queued, *pb.CampaignResponse_Elected:
		return true
	}
	return false
}

// settle: nothing is left out; a `resign` asked for meanwhile goes on the stream once it is
// taken into use (see taken).
func (c *candidate) settle(campaignStream) error { return nil }

// refused: an instance's verdict (the call ended so that the server keeps nothing of it to
// resume: see final) ends the candidate. NOT_FOUND (it keeps no such candidate) ends it as
// resigned if it had asked to resign (that `resign` may have ended it, as a loss would have: it
// is over either way), else as unavailable; any other, as the server says.
func (c *candidate) refused(i int, err error, trailer metadata.MD) (*Error, bool) {
	if !final(err, trailer) {
		return nil, false
	}
	if status.Code(err) != codes.NotFound {
		return c.endOf(err, nil), true
	}
	c.mu.Lock()
	resigning := c.resigning
	c.mu.Unlock()
	if resigning {
		return nil, true
	}
	message := "the server no longer keeps the candidate (its resume grace is over, or it restarted)"
	if c.endpoints.count() > 1 {
		message = fmt.Sprintf("the server at %s does not keep the candidate: %s", c.endpoints.name(i), status.Convert(err).Message())
	}
	return &Error{Lock: c.election.name, Code: codes.Unavailable, Message: message, kind: ErrUnavailable, cause: err, election: true}, true
}

// watch applies the rules of silence (heartbeats.judge) until the candidacy ends.
func (c *candidate) watch() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(c.check())
		select {
		case <-c.done:
			return
		case <-timer.C:
		case <-c.heartbeats.wake:
		}
	}
}

// check applies the rules of silence now, and says when to check again: a silent call is cut
// (and resumed), and a server silent for 0.9 x the grace ends the candidacy.
func (c *candidate) check() time.Duration {
	c.mu.Lock()
	stream, since, grace, resuming, ended := c.stream, c.streamSince, c.resumeGrace, c.resuming, c.ended
	c.mu.Unlock()
	if ended {
		return time.Hour
	}
	rule, silent, next := c.heartbeats.judge(grace, resuming, stream != nil, since)
	switch rule {
	case silenceLost:
		c.finish(&Error{Lock: c.election.name, Code: codes.Unavailable, kind: ErrUnavailable, election: true, Message: fmt.Sprintf(
			"no message from the server for %s; it may elect another candidate once its resume grace (%s) is over",
			silent.Round(time.Millisecond), grace)})
	case silenceSuspect:
		c.cut(stream, &Error{Lock: c.election.name, Code: codes.Unavailable, kind: ErrUnavailable, election: true, Message: fmt.Sprintf(
			"no message from the server for %s (%d heartbeat intervals)", silent.Round(time.Millisecond), suspectAfterIntervals)})
	}
	return next
}

// cut ends a call the server has gone silent on: the leadership is in doubt at once, and the
// candidate is resumed on a new call (see broken) or, without a grace, given up.
func (c *candidate) cut(stream campaignStream, why *Error) {
	c.mu.Lock()
	if c.stream != stream {
		c.mu.Unlock()
		return
	}
	c.cutCause = why
	c.pathDoubt = true
	cancel := c.streamCancel
	c.mu.Unlock()
	c.tellDoubt()
	cancel()
}
