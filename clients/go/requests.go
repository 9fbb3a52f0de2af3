// Requests: the session's lock requests, from the acquire sent to the end the server reports,
// and the table that holds them by id.

package lockstream

import (
	"context"
	"errors"
	"iter"
	"maps"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
)

// request is one lock request of the session, from `acquire` to `ended`.
type request struct {
	id         uint32
	name       string // as the client names it (a multi-lock's names joined with "+")
	serverName string // as the server's messages name it
	message    *pb.SessionAcquire
	options    lockOptions

	granted chan struct{} // closed at `acquired`
	ended   chan struct{} // closed at `ended`
	// Guarded by the session's mu.
	sent     bool               // the acquire went to a stream (see sendFor)
	err      error              // how it ended; nil for OK
	lock     *Lock              // once granted
	letGo    *pb.SessionRequest // the release or cancel sent, if any
	byClose  bool               // the release was Close's
	ack      chan struct{}      // the `value_set` or `downgraded` awaited, if any
	asked    *pb.SessionRequest // the `set_value` or `downgrade` it answers
	reported bool               // said something during a resume
}

// newRequest is the request for a Lock call: its acquire message (without its id, given when
// the request enters the table), and the lock's name as the server's messages give it.
func newRequest(name string, options lockOptions) *request {
	message := &pb.SessionAcquire{
		Name: name, Mode: options.mode.proto(), Owner: options.owner, Value: options.value,
		Limit: options.limit, Weight: options.weight,
	}
	if options.waitTimeout != nil {
		message.WaitTimeout = durationpb.New(*options.waitTimeout)
	}
	serverName := name
	if options.targets != nil {
		message.Name, message.Mode, message.Limit, message.Weight = "", pb.LockMode_LOCK_MODE_UNSPECIFIED, 0, nil
		serverName = ""
		for i, target := range options.targets {
			lock := &pb.LockTarget{Name: target.Name, Mode: target.mode().proto(), Limit: int32(target.Limit)}
			if target.Weight != 0 {
				weight := int32(target.Weight)
				lock.Weight = &weight
			}
			message.Locks = append(message.Locks, lock)
			if i > 0 {
				serverName += ", "
			}
			serverName += jsonQuote(target.Name)
		}
	}
	return &request{
		name: name, serverName: serverName, message: message, options: options,
		granted: make(chan struct{}), ended: make(chan struct{}),
	}
}

// failure is how a request that was not granted ended (once `ended` is closed).
func (req *request) failure() error {
	if req.err != nil {
		return req.err
	}
	return &Error{Lock: req.name, Code: codes.Unavailable, Message: "the request ended before it was granted", kind: ErrUnavailable}
}

// requestTable is the session's requests by id, each there from its acquire until it ends.
// Guarded by the session's mu.
type requestTable struct {
	byID   map[uint32]*request
	lastID uint32
}

func newRequestTable() requestTable {
	return requestTable{byID: map[uint32]*request{}}
}

// add gives req an id no request in the table uses, in its acquire message too, and enters it.
func (t *requestTable) add(req *request) {
	req.id = t.newID()
	req.message.RequestId = req.id
	t.byID[req.id] = req
}

// newID is an id no request in the table uses.
func (t *requestTable) newID() uint32 {
	for {
		t.lastID++
		if t.lastID == 0 {
			t.lastID = 1
		}
		if _, used := t.byID[t.lastID]; !used {
			return t.lastID
		}
	}
}

// get is the request with this id, nil if none.
func (t *requestTable) get(id uint32) *request { return t.byID[id] }

// remove takes req out of the table, if it is still there.
func (t *requestTable) remove(req *request) {
	if t.byID[req.id] == req {
		delete(t.byID, req.id)
	}
}

// all are the requests in the table, in no order; each may be ended (and removed) on the way.
func (t *requestTable) all() iter.Seq[*request] { return maps.Values(t.byID) }

// held are the granted requests' locks.
func (t *requestTable) held() []*Lock {
	var locks []*Lock
	for _, req := range t.byID {
		if req.lock != nil {
			locks = append(locks, req.lock)
		}
	}
	return locks
}

// end ends req with err (nil: OK): out of the table, its waiters and its lock told.
func (t *requestTable) end(req *request, err error) {
	t.remove(req)
	req.err = err
	close(req.ended)
	if req.lock != nil {
		req.lock.ended(err, req.letGo != nil)
	}
}

// acquire queues a lock request on the session and waits until it is granted, ends, or ctx
// ends (the request then leaves the queue).
func (s *session) acquire(ctx context.Context, name string, options lockOptions) (*Lock, error) {
	req := newRequest(name, options)
	s.mu.Lock()
	if s.ended || s.closing {
		s.mu.Unlock()
		return nil, errSessionOver
	}
	s.requests.add(req)
	s.mu.Unlock()

	if err := s.sendFor(ctx, &pb.SessionRequest{Kind: &pb.SessionRequest_Acquire{Acquire: req.message}}, req); err != nil {
		s.mu.Lock()
		s.requests.remove(req)
		s.mu.Unlock()
		select {
		case <-req.ended:
			// The session ended with the request in it: that is the answer.
			return nil, req.failure()
		default:
		}
		switch {
		case errors.Is(err, errSessionOver):
			return nil, err
		case ctx.Err() != nil:
			return nil, contextError(name, ctx.Err())
		}
		return nil, &Error{Lock: name, Code: codes.Internal, Message: "could not be sent: " + err.Error(), kind: ErrFailed, cause: err}
	}
	select {
	case <-req.granted:
		return req.lock, nil
	case <-req.ended:
		return nil, req.failure()
	case <-ctx.Done():
		// Leave the queue (or give back a grant that crossed the cancel) before returning.
		s.letGo(req, &pb.SessionRequest{Kind: &pb.SessionRequest_Cancel{Cancel: &pb.SessionCancel{RequestId: req.id}}})
		select {
		case <-req.ended:
		case <-s.done:
		}
		return nil, contextError(name, ctx.Err())
	}
}

// letGo sends a release or cancel for req, once.
func (s *session) letGo(req *request, message *pb.SessionRequest) {
	s.mu.Lock()
	already := req.letGo != nil
	if !already {
		req.letGo = message
	}
	s.mu.Unlock()
	if !already {
		_ = s.send(s.ctx, message)
	}
}
