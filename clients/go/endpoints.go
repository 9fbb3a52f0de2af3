// Endpoints: the servers a Client can talk to, one gRPC connection each, and which of them it
// talks to now.

package lockstream

import (
	"context"
	"sync/atomic"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
)

// endpoints are the servers a Client talks to, one at a time: requests go to the current one,
// and when its session stream breaks, or a resume on it fails, the session moves to the next one
// in turn (see link.resume). One gRPC connection each, so that the client, not gRPC's load
// balancing, chooses where the session goes.
type endpoints struct {
	addresses []string // as given, for messages; "" for a connection the caller passed to New
	conns     []grpc.ClientConnInterface
	rpcs      []pb.LockServiceClient
	elections []pb.ElectionServiceClient
	records   []pb.RecordServiceClient
	current   atomic.Int32
}

func newEndpoints(addresses []string, conns []grpc.ClientConnInterface) *endpoints {
	e := &endpoints{
		addresses: addresses, conns: conns,
		rpcs: make([]pb.LockServiceClient, len(conns)), elections: make([]pb.ElectionServiceClient, len(conns)),
		records: make([]pb.RecordServiceClient, len(conns)),
	}
	// Every service's stub rides the endpoint's one connection.
	for i, conn := range conns {
		e.rpcs[i] = pb.NewLockServiceClient(conn)
		e.elections[i] = pb.NewElectionServiceClient(conn)
		e.records[i] = pb.NewRecordServiceClient(conn)
	}
	return e
}

func (e *endpoints) count() int { return len(e.conns) }

// now is the index of the current endpoint.
func (e *endpoints) now() int { return int(e.current.Load()) }

// moveOn makes the endpoint after from the current one, and returns it.
func (e *endpoints) moveOn(from int) int {
	next := (from + 1) % len(e.conns)
	e.current.Store(int32(next))
	return next
}

// electionRPC is the ElectionService's stub on the current endpoint.
func (e *endpoints) electionRPC() pb.ElectionServiceClient { return e.elections[e.now()] }

// name is how messages name endpoint i.
func (e *endpoints) name(i int) string {
	if e.addresses[i] == "" {
		return "the server"
	}
	return e.addresses[i]
}

// Invoke and NewStream make endpoints a grpc.ClientConnInterface whose calls go to the current
// endpoint: Client.RPC's stub follows the session from one endpoint to the next.
func (e *endpoints) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return e.conns[e.now()].Invoke(ctx, method, args, reply, opts...)
}

func (e *endpoints) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return e.conns[e.now()].NewStream(ctx, desc, method, opts...)
}
