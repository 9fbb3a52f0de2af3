// A candidate's resume and failover, and its watchdog: taking the candidate over on a new
// Campaign call, on the next endpoint in turn, after its call breaks or falls silent; the rules
// of silence that cut a silent call and give the candidacy up before the server's grace is over.

package lockstream

import (
	"context"
	"fmt"
	"time"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// resume takes the candidate over on new calls, each on the endpoint after the last one tried
// (with a single endpoint, that one again), until one succeeds or an instance gives its verdict
// (NOT_FOUND: it keeps no such candidate). The watchdog ends the candidacy when the grace is
// over, which stops this too.
func (c *candidate) resume() {
	c.mu.Lock()
	from := c.endpoint
	message := &pb.CampaignRequest{Kind: &pb.CampaignRequest_Resume{Resume: &pb.CampaignResume{
		ResumeToken: c.resumeToken, HeartbeatInterval: durationOrNil(c.heartbeats.interval),
	}}}
	c.mu.Unlock()
	n := c.endpoints.count()
	backoff := 50 * time.Millisecond
	for tried := 1; c.ctx.Err() == nil; tried++ {
		i := c.endpoints.moveOn(from)
		stream, cancel, trailer, err := c.takeOver(i, message)
		if err == nil {
			if !c.use(stream, cancel, i) {
				cancel()
			}
			return
		}
		if final(err, trailer) {
			c.finish(c.verdict(i, err, trailer))
			return
		}
		from = i
		// Back off once every endpoint has failed in turn.
		if tried%n != 0 {
			continue
		}
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// takeOver resumes the candidate on endpoint i: a call whose server has told where the
// candidate stands again (`queued` or `elected`) within the attempt's limit (see
// resumeAttempt). On failure, the call's trailer, for its verdict.
func (c *candidate) takeOver(i int, message *pb.CampaignRequest) (campaignStream, context.CancelFunc, metadata.MD, error) {
	c.mu.Lock()
	grace := c.resumeGrace
	c.mu.Unlock()
	limit := resumeAttempt(c.endpoints.count(), grace, c.heartbeats.now()-c.heartbeats.lastHeard())
	ctx, cancel, answered := attempt(c.ctx, limit)
	stream, response, err := c.call(ctx, i, message)
	for ; err == nil; response, err = stream.Recv() {
		c.heartbeats.hear()
		c.handle(response)
		switch response.GetKind().(type) {
		case *pb.CampaignResponse_Queued, *pb.CampaignResponse_Elected:
			if answered() {
				return stream, cancel, nil, nil
			}
			cancel()
			return nil, nil, nil, attemptError(ctx, errNoAnswer)
		}
	}
	var trailer metadata.MD
	if stream != nil {
		trailer = stream.Trailer()
	}
	cancel()
	return nil, nil, trailer, attemptError(ctx, err)
}

// verdict is the end of a candidate an instance would not resume: NOT_FOUND (it keeps no such
// candidate) ends it as resigned if it had asked to resign (that `resign` may have ended it, as
// a loss would have: it is over either way), else as unavailable; any other, as the server says.
func (c *candidate) verdict(i int, err error, trailer metadata.MD) *Error {
	if status.Code(err) != codes.NotFound {
		return c.endOf(err, nil)
	}
	c.mu.Lock()
	resigning := c.resigning
	c.mu.Unlock()
	if resigning {
		return nil
	}
	message := "the server no longer keeps the candidate (its resume grace is over, or it restarted)"
	if c.endpoints.count() > 1 {
		message = fmt.Sprintf("the server at %s does not keep the candidate: %s", c.endpoints.name(i), status.Convert(err).Message())
	}
	return &Error{Lock: c.election.name, Code: codes.Unavailable, Message: message, kind: ErrUnavailable, cause: err, election: true}
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
