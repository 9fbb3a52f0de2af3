// Guarded records across endpoints: a call that ends UNAVAILABLE is tried on the next endpoint,
// a Put with the same request id; a write refused after an UNAVAILABLE try is reported as
// UNAVAILABLE, outcome unknown, not as the refusal.

package lockstream_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeRecords is a RecordService that answers every write with err (nil: revision 7), and
// keeps the request ids it was sent.
type fakeRecords struct {
	pb.UnimplementedRecordServiceServer
	err error
	mu  sync.Mutex
	ids [][]byte
}

func (f *fakeRecords) PutRecord(_ context.Context, request *pb.PutRecordRequest) (*pb.PutRecordResponse, error) {
	f.mu.Lock()
	f.ids = append(f.ids, request.GetRequestId())
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &pb.PutRecordResponse{Revision: 7}, nil
}

func (f *fakeRecords) DeleteRecord(context.Context, *pb.DeleteRecordRequest) (*pb.DeleteRecordResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.DeleteRecordResponse{Deleted: true}, nil
}

func (f *fakeRecords) GetRecord(context.Context, *pb.GetRecordRequest) (*pb.GetRecordResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.GetRecordResponse{Found: true, Value: []byte("v"), Revision: 7}, nil
}

func (f *fakeRecords) requestIDs() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.ids...)
}

// serveRecords serves f on a loopback port for the test, and returns its address.
func serveRecords(t *testing.T, f *fakeRecords) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterRecordServiceServer(s, f)
	go func() { _ = s.Serve(listener) }()
	t.Cleanup(s.Stop)
	return listener.Addr().String()
}

// An endpoint nobody listens at: the records' calls go on to the next, on the real server.
func TestRecordsFailOverToTheNextEndpoint(t *testing.T) {
	ctx, name := testContext(t), recordsName(t)
	client := dialEndpoints(t, []string{refusedAddress(t), shared.address})
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(ctx)
	// The session went on to the server; the records' calls start again at the dead endpoint.
	fresh := dialEndpoints(t, []string{refusedAddress(t), shared.address})
	if revision, err := fresh.Records(name, lock.Token()).Put(ctx, "k", []byte("v")); err != nil || revision != 1 {
		t.Fatalf("Put: %d, %v", revision, err)
	}
	wantRecord(t, dialEndpoints(t, []string{refusedAddress(t), shared.address}), name, "k", "v", 1)
}

// A Put that ended UNAVAILABLE is sent again to the next endpoint with the same 16-byte request
// id (the server makes it at most once); another Put has another id.
func TestRecordsPutSentAgainWithItsRequestID(t *testing.T) {
	ctx := testContext(t)
	down := &fakeRecords{err: status.Error(codes.Unavailable, "the back end cannot be reached")}
	up := &fakeRecords{}
	client := dialEndpoints(t, []string{serveRecords(t, down), serveRecords(t, up)})
	records := client.Records("fake", 3)
	if revision, err := records.Put(ctx, "k", []byte("v")); err != nil || revision != 7 {
		t.Fatalf("Put: %d, %v; want 7 from the second endpoint", revision, err)
	}
	sent, again := down.requestIDs(), up.requestIDs()
	if len(sent) != 1 || len(again) != 1 || len(sent[0]) != 16 || string(sent[0]) != string(again[0]) {
		t.Fatalf("request ids %x then %x, want the same 16 bytes", sent, again)
	}
	// The client stays on the endpoint that answered.
	if _, err := records.Put(ctx, "k", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if later := up.requestIDs(); len(later) != 2 || string(later[1]) == string(later[0]) || len(down.requestIDs()) != 1 {
		t.Fatalf("the second Put: ids %x on the second endpoint, %d on the first", later, len(down.requestIDs()))
	}
}

// A write whose try ended UNAVAILABLE and whose next was refused may have been made by the
// first: it fails with UNAVAILABLE (outcome unknown, the refusal as its cause), not with the
// refusal. A read refused the same way is the refusal.
func TestRecordsWriteRefusedAfterUnavailableIsOutcomeUnknown(t *testing.T) {
	ctx := testContext(t)
	down := &fakeRecords{err: status.Error(codes.Unavailable, "the back end cannot be reached")}
	refusing := &fakeRecords{err: status.Error(codes.Aborted, `record "k" of "fake" is at revision 8, not 7`)}
	records := dialEndpoints(t, []string{serveRecords(t, down), serveRecords(t, refusing)}).Records("fake", 3)
	_, err := records.Put(ctx, "k", []byte("v"), lockstream.WithExpectedRevision(7))
	wantKind(t, err, lockstream.ErrUnavailable, codes.Unavailable, "Put refused after UNAVAILABLE")
	if errors.Is(err, lockstream.ErrRevisionConflict) || status.Code(errors.Unwrap(err)) != codes.Aborted ||
		!strings.Contains(err.Error(), "outcome is unknown") {
		t.Fatalf("Put refused after UNAVAILABLE: %v, want outcome unknown, the refusal as its cause only", err)
	}

	records = dialEndpoints(t, []string{serveRecords(t, down), serveRecords(t, refusing)}).Records("fake", 3)
	_, err = records.Delete(ctx, "k", lockstream.WithExpectedRevision(7))
	wantKind(t, err, lockstream.ErrUnavailable, codes.Unavailable, "Delete refused after UNAVAILABLE")

	client := dialEndpoints(t, []string{serveRecords(t, down), serveRecords(t, refusing)})
	_, _, err = client.GetRecord(ctx, "fake", "k")
	wantKind(t, err, lockstream.ErrRevisionConflict, codes.Aborted, "GetRecord refused after UNAVAILABLE")

	// With one endpoint, UNAVAILABLE is the answer: not tried again.
	single := dialEndpoints(t, []string{serveRecords(t, down)})
	_, err = single.Records("fake", 3).Put(ctx, "k", []byte("v"))
	wantKind(t, err, lockstream.ErrUnavailable, codes.Unavailable, "Put on a single endpoint that is down")
	if n := len(down.requestIDs()); n != 2 {
		t.Fatalf("%d Puts reached the endpoint that is down, want 2 (one per client)", n)
	}
}
