// Client options: how a Client is configured (owner, resume grace, heartbeats, transport), and
// their defaults.

package lockstream

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Defaults, chosen against the server's (keepalive 3s + 3s, heartbeat silence 3 intervals): a
// holder cut off from the server reports its locks lost before the server can free them.
const (
	// DefaultResumeGrace is how long the server keeps the client's locks after its stream breaks.
	DefaultResumeGrace = 5 * time.Second
	// DefaultHeartbeatInterval is how often each side speaks on an idle session stream. Shorter
	// than the TypeScript SDK's 5s: grpc-go pings no more often than every 10s, so the Go client
	// notices a dead path by the silence of the server's heartbeats instead.
	DefaultHeartbeatInterval = 1 * time.Second
)

// gRPC keepalive: a ping after 10s without activity (grpc-go's minimum), the connection dropped
// when it is not answered within the server's own keepalive timeout. Heartbeats notice a dead
// path sooner; the pings free a dead connection for the next session.
var keepalivePings = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}

type clientOptions struct {
	owner             string
	resumeGrace       time.Duration
	heartbeatInterval time.Duration
	creds             credentials.TransportCredentials
	dialOptions       []grpc.DialOption
}

// heartbeat is the interval asked of the server: the one set, but at most a third of the
// grace, so that a live stream is heard from several times within it (see session.watch).
func (o *clientOptions) heartbeat() time.Duration {
	if o.resumeGrace > 0 && o.heartbeatInterval > o.resumeGrace/heartbeatsPerGrace {
		return o.resumeGrace / heartbeatsPerGrace
	}
	return o.heartbeatInterval
}

// ClientOption configures a Client.
type ClientOption func(*clientOptions)

// WithDefaultOwner names the caller in every request that does not name itself (WithOwner),
// for operators' eyes (at most 256 bytes of UTF-8, no control characters).
func WithDefaultOwner(owner string) ClientOption {
	return func(o *clientOptions) { o.owner = owner }
}

// WithResumeGrace sets how long the server keeps this client's locks after its stream breaks,
// for the client to take them over on a new stream (default 5s; 0: a broken stream loses them
// at once; otherwise at least 300ms). The client counts the grace from the last message it
// heard from the server, not from when it noticed the break, and reports the locks lost a tenth
// of the grace before it is over: the server, which counts from its own later notice, cannot
// have freed them yet.
func WithResumeGrace(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.resumeGrace = d }
}

// WithHeartbeatInterval sets the heartbeat interval in both directions (default 1s; at most a
// third of the resume grace; 0: none, 100ms to 10m otherwise). After two intervals without a
// word from the server, held locks are in doubt and the session is resumed on a new stream.
// Without heartbeats the client cannot tell a quiet server from a dead path: a break is then
// noticed by gRPC keepalive only (10s and more), and loses the locks at once unless the server
// was heard from within the grace.
func WithHeartbeatInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.heartbeatInterval = d }
}

// WithTransportCredentials makes Dial connect with these credentials (TLS); without it Dial
// connects in plaintext.
func WithTransportCredentials(creds credentials.TransportCredentials) ClientOption {
	return func(o *clientOptions) { o.creds = creds }
}

// WithDialOptions are passed to grpc.NewClient by Dial (per-RPC credentials, interceptors;
// grpc.WithKeepaliveParams replaces the client's keepalive settings).
func WithDialOptions(opts ...grpc.DialOption) ClientOption {
	return func(o *clientOptions) { o.dialOptions = append(o.dialOptions, opts...) }
}

func newClientOptions(opts []ClientOption) clientOptions {
	options := clientOptions{resumeGrace: DefaultResumeGrace, heartbeatInterval: DefaultHeartbeatInterval}
	for _, opt := range opts {
		opt(&options)
	}
	return options
}
