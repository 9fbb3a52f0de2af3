// A candidate's resume (the link's, see resume.go): the message that takes it over on a new
// Campaign call, when the server's report on it is over, and which answers end the candidate.

package lockstream

import (
	"fmt"

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
