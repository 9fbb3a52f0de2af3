// Guarded records: the small keyed values under a lock's name that only a current holder of the
// lock writes (HolderRecords, bound to the name and the holder's fencing token), and that anyone
// who may see the lock reads (Client.GetRecord).

package lockstream

import (
	"context"
	"crypto/rand"
	"errors"

	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
)

// Record is a guarded record as read or written: its value, and its revision. Revisions start
// at 1 and strictly grow: each write or delete of any record of a lock gives the next revision
// of that lock's records, so a key's revisions grow even across its deletion.
type Record struct {
	Value    []byte
	Revision uint64
}

// requestIDBytes is the size of the id every Put carries, so that a try sent again after
// UNAVAILABLE makes the write at most once.
const requestIDBytes = 16

// HolderRecords are the guarded records of one lock as the holder whose fencing token is Token
// writes them: checkpoints, offsets, configuration that outlive their writer and that a holder
// which has lost the lock cannot overwrite, even before it has heard of the loss. Safe for
// concurrent use; it holds nothing itself.
type HolderRecords struct {
	client *Client
	name   string
	token  uint64
}

// Records are the guarded records of the lock named name, written as the holder whose fencing
// token is token: a Lock's Token(), a Leadership's Term(). The hold must be exclusive (Mutex,
// Write, a semaphore's, or an election's leader): a Read holder's token is refused. Nothing is
// sent until a call: a malformed name is an error matching ErrInvalidArgument from each.
//
//	records := client.Records(lock.Name(), lock.Token())
func (c *Client) Records(name string, token uint64) *HolderRecords {
	return &HolderRecords{client: c, name: name, token: token}
}

// Name is the lock's name.
func (r *HolderRecords) Name() string { return r.name }

// Token is the fencing token the records are written as.
func (r *HolderRecords) Token() uint64 { return r.token }

// GetRecord reads the guarded record key of the lock named name (anyone who may see the lock may
// read it): the record, and whether there is one (a zero Record when there is none). A read is
// as recent as the server's back end member that serves it; a write conditioned on the
// revision read (WithExpectedRevision) is refused if the record changed since.
func (c *Client) GetRecord(ctx context.Context, name, key string) (Record, bool, error) {
	call := recordCall{client: c, name: name}
	if err := call.check(ctx, key); err != nil {
		return Record{}, false, err
	}
	answer, err := invokeRecords(ctx, call, func(ctx context.Context, rpc pb.RecordServiceClient) (*pb.GetRecordResponse, error) {
		return rpc.GetRecord(ctx, &pb.GetRecordRequest{Name: name, Key: key})
	})
	if err != nil || !answer.GetFound() {
		return Record{}, false, err
	}
	return Record{Value: answer.GetValue(), Revision: answer.GetRevision()}, true, nil
}

// Get reads the record key, as Client.GetRecord does.
func (r *HolderRecords) Get(ctx context.Context, key string) (Record, bool, error) {
	return r.client.GetRecord(ctx, r.name, key)
}

// RecordOption conditions a write of a guarded record.
type RecordOption func(*recordOptions)

type recordOptions struct {
	expected *uint64
}

// WithExpectedRevision makes a write (Put, Delete) happen only if the record is at revision
// (0: only if it does not exist); otherwise nothing is written and the error matches
// ErrRevisionConflict.
func WithExpectedRevision(revision uint64) RecordOption {
	return func(o *recordOptions) { o.expected = &revision }
}

func recordOptionsOf(opts []RecordOption) recordOptions {
	var options recordOptions
	for _, opt := range opts {
		opt(&options)
	}
	return options
}

// Put writes value (at most MaxRecordValueBytes) under key, only while Token holds the lock, and
// returns the record's new revision. When Token does not hold the lock (never granted, released,
// lost, revoked, another lock's, a Read hold's), nothing is written and the error matches
// ErrNotHeld; with WithExpectedRevision, a record at another revision is left as it is and the
// error matches ErrRevisionConflict. A malformed key or a value over the limit is an error
// matching ErrInvalidArgument, with nothing sent.
//
// Every Put carries a random request id of its own, and is tried again on the next endpoint
// after UNAVAILABLE (as the server then may or may not have made it): the server makes it at
// most once. When a try ended UNAVAILABLE and the next was refused, the first may have been
// made all the same: Put returns an error matching ErrUnavailable (outcome unknown, the
// refusal as its cause) rather than the refusal; read the record to know.
func (r *HolderRecords) Put(ctx context.Context, key string, value []byte, opts ...RecordOption) (uint64, error) {
	call := r.write()
	if err := call.check(ctx, key); err != nil {
		return 0, err
	}
	if problem := checkRecordValue(value); problem != "" {
		return 0, invalidArgument(r.name, "%s", problem)
	}
	id := make([]byte, requestIDBytes)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	request := &pb.PutRecordRequest{
		Name: r.name, Key: key, Value: value, FencingToken: r.token,
		ExpectedRevision: recordOptionsOf(opts).expected, RequestId: id,
	}
	answer, err := invokeRecords(ctx, call, func(ctx context.Context, rpc pb.RecordServiceClient) (*pb.PutRecordResponse, error) {
		return rpc.PutRecord(ctx, request)
	})
	if err != nil {
		return 0, err
	}
	return answer.GetRevision(), nil
}

// Delete removes the record key, with Put's checks (ErrNotHeld, ErrRevisionConflict,
// ErrInvalidArgument, and UNAVAILABLE as Put's), and says whether there was one. Deleting a
// record that does not exist changes nothing and is not an error (but with a
// WithExpectedRevision other than 0, ErrRevisionConflict). A later Put of the key gets a larger
// revision than any it had.
func (r *HolderRecords) Delete(ctx context.Context, key string, opts ...RecordOption) (bool, error) {
	call := r.write()
	if err := call.check(ctx, key); err != nil {
		return false, err
	}
	request := &pb.DeleteRecordRequest{Name: r.name, Key: key, FencingToken: r.token, ExpectedRevision: recordOptionsOf(opts).expected}
	answer, err := invokeRecords(ctx, call, func(ctx context.Context, rpc pb.RecordServiceClient) (*pb.DeleteRecordResponse, error) {
		return rpc.DeleteRecord(ctx, request)
	})
	if err != nil {
		return false, err
	}
	return answer.GetDeleted(), nil
}

// Update is a read-modify-write that loses no update: it reads the record key, writes what
// change makes of its value (found false: there is none, and current is nil), and returns the
// record as written. The write is conditioned on the revision read, so that a write by anyone
// in between (another holder of a semaphore, say) makes Update read and call change again; and
// it is made only while Token holds the lock, so a holder that lost the lock changes nothing
// (ErrNotHeld). change may be called several times, and should do nothing but compute.
//
//	next, err := records.Update(ctx, "offset", func(current []byte, found bool) []byte {
//		offset, _ := strconv.Atoi(string(current)) // 0 when not found
//		return []byte(strconv.Itoa(offset + batch))
//	})
func (r *HolderRecords) Update(ctx context.Context, key string, change func(current []byte, found bool) []byte) (Record, error) {
	for {
		current, found, err := r.Get(ctx, key)
		if err != nil {
			return Record{}, err
		}
		value := change(current.Value, found)
		revision, err := r.Put(ctx, key, value, WithExpectedRevision(current.Revision))
		if errors.Is(err, ErrRevisionConflict) {
			continue // written meanwhile: read it again
		}
		if err != nil {
			return Record{}, err
		}
		return Record{Value: value, Revision: revision}, nil
	}
}

// write is how a write of these records is made.
func (r *HolderRecords) write() recordCall {
	return recordCall{client: r.client, name: r.name, write: true, token: r.token}
}
