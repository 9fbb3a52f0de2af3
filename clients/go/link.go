// Links: what the session's Session stream and a candidate's Campaign stream have in common.
// Each is one call to the server and the calls that resume it, on the client's endpoints, with
// the client's heartbeats and rules of silence. A link keeps the current call, and the code that
// opens, reads and sends on it (stream.go), resumes it (resume.go) and watches its silence
// (heartbeats.go); its owner says what the server's messages mean and how the whole ends.

package lockstream

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// link is one kind of call to the server (Req the client's messages, Resp the server's) and
// its successors after a resume: the session's Session calls, or a candidate's Campaign calls.
// Its owner embeds it and is told of what happens on it (linkOwner).
type link[Req, Resp any] struct {
	owner      linkOwner[Req, Resp]
	endpoints  *endpoints
	heartbeats *heartbeats
	// The message that opens the first call, and the one the client beats with on every call.
	first, heartbeat *Req
	// What the server may do once the resume grace is over, for messages: "free the locks".
	stake string
	// Ends with the owner: every call's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// Closed when the owner is over (by its finish).
	done chan struct{}

	sendMu sync.Mutex // a gRPC stream's Send is not safe for concurrent use

	// mu guards these, and the owner's state as the owner says.
	mu           sync.Mutex
	stream       grpc.BidiStreamingClient[Req, Resp] // nil while it connects or resumes
	streamCancel context.CancelFunc
	endpoint     int           // where the current (or last) stream is
	streamSince  time.Duration // when the current stream was taken into use (heartbeats.now)
	cutCause     *Error        // why the client cut the current stream, if it did
	resumeToken  string        // the server's, to resume with (set by the owner's handle)
	resumeGrace  time.Duration // the server's (likewise)
	resuming     bool
	ended        bool // set by the owner's finish
}

// linkOwner is what owns a link (the session, a candidate): what it makes of the server's
// messages and of its calls' ends. The methods marked "mu held" are called with the link's mu
// held; a func they return, if not nil, is called once it is released.
type linkOwner[Req, Resp any] interface {
	// dial starts a call on endpoint i, under ctx.
	dial(ctx context.Context, i int) (grpc.BidiStreamingClient[Req, Resp], error)
	// unreachable: a call could not be opened on an endpoint for a reason the next endpoint may
	// not share (err is not the server's answer).
	unreachable(err error) bool
	// handle applies one message from the server.
	handle(message *Resp)
	// taken: stream is the link's now (mu held); the func is called once the link reads it.
	taken(stream grpc.BidiStreamingClient[Req, Resp]) func()
	// doubtPath: the path to the server is broken or silent (doubt), or sound again (mu held).
	doubtPath(doubt bool) func()

	// dropped: the current stream is gone (mu held); whether the owner would be resumed.
	dropped() bool
	// resumeWith is the message that starts a call to resume the link (mu held).
	resumeWith() *Req
	// resumed: message, handled already, ends the server's report on a resumed call.
	resumed(message *Resp) bool
	// settle: what the report left out, once it is read, before stream is taken into use.
	settle(stream grpc.BidiStreamingClient[Req, Resp]) error
	// refused: an endpoint's err (with the call's trailer, if it ended) to a resume is final,
	// and the owner ends with why.
	refused(i int, err error, trailer metadata.MD) (why *Error, final bool)

	// endOf is how a call that is not resumed ended: err is its end (nil: OK), cut why the
	// client cut it, if it did.
	endOf(err error, cut *Error) *Error
	// transportError is a failure of the path to the server: what happened, and err's message.
	transportError(what string, err error) *Error
	// finish ends the owner with why: it sets ended, closes done and cancels ctx.
	finish(why *Error)
}

// init makes l the link of owner, which opens its first call with first and beats with
// heartbeat; stake is what the server may do once the grace is over.
func (l *link[Req, Resp]) init(owner linkOwner[Req, Resp], endpoints *endpoints, heartbeats *heartbeats, first, heartbeat *Req, stake string) {
	l.owner, l.endpoints, l.heartbeats, l.first, l.heartbeat, l.stake = owner, endpoints, heartbeats, first, heartbeat, stake
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.done = make(chan struct{})
}
