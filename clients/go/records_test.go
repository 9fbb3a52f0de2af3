// Guarded records against a real server: a holder's put, get, update and delete, the revision a
// write may be conditioned on, a stale token refused with nothing written, and the requests the
// client refuses itself.

package lockstream_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	lockstream "github.com/lockstream/lockstream/clients/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recordsName is a lock name of its own for each run of the test: records outlive the locks,
// and the shared server runs as long as the test binary (go test -count=2).
func recordsName(t *testing.T) string { return lockName(t) + "/" + rand.Text() }

// wantRecord fails the test unless the record key of name reads value at revision (found).
func wantRecord(t *testing.T, client *lockstream.Client, name, key, value string, revision uint64) {
	t.Helper()
	record, found, err := client.GetRecord(testContext(t), name, key)
	if err != nil {
		t.Fatal(err)
	}
	if !found || string(record.Value) != value || record.Revision != revision {
		t.Fatalf("record %q: found %v, %q at revision %d; want %q at revision %d", key, found, record.Value, record.Revision, value, revision)
	}
}

// wantKind fails the test unless err matches kind and carries code.
func wantKind(t *testing.T, err, kind error, code codes.Code, what string) {
	t.Helper()
	if !errors.Is(err, kind) || status.Code(err) != code {
		t.Fatalf("%s: %v (code %v), want %v with %v", what, err, status.Code(err), kind, code)
	}
}

// A holder writes, reads, updates and deletes its lock's records; revisions start at 1 and grow
// with every write, across a deletion too; another client reads what it wrote.
func TestRecordsWrittenByAHolder(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), recordsName(t)
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(ctx)
	records := client.Records(name, lock.Token())
	if _, found, err := records.Get(ctx, "offset"); err != nil || found {
		t.Fatalf("Get before any write: found %v, %v", found, err)
	}
	if revision, err := records.Put(ctx, "offset", []byte("5")); err != nil || revision != 1 {
		t.Fatalf("Put: revision %d, %v; want 1", revision, err)
	}
	next, err := records.Update(ctx, "offset", func(current []byte, found bool) []byte {
		n, _ := strconv.Atoi(string(current))
		return []byte(strconv.Itoa(n + 3))
	})
	if err != nil || string(next.Value) != "8" || next.Revision != 2 {
		t.Fatalf("Update: %q at revision %d, %v; want \"8\" at 2", next.Value, next.Revision, err)
	}
	wantRecord(t, dial(t, shared.address), name, "offset", "8", 2)

	_, err = records.Put(ctx, "offset", []byte("x"), lockstream.WithExpectedRevision(1))
	wantKind(t, err, lockstream.ErrRevisionConflict, codes.Aborted, "Put at a past revision")
	if errors.Is(err, lockstream.ErrLost) {
		t.Fatalf("a conflict matches ErrLost too: %v", err)
	}
	_, err = records.Put(ctx, "offset", []byte("x"), lockstream.WithExpectedRevision(0))
	wantKind(t, err, lockstream.ErrRevisionConflict, codes.Aborted, "Put of a new record over an existing one")
	wantRecord(t, client, name, "offset", "8", 2)
	if revision, err := records.Put(ctx, "offset", []byte("9"), lockstream.WithExpectedRevision(2)); err != nil || revision != 3 {
		t.Fatalf("Put at the revision read: %d, %v; want 3", revision, err)
	}

	_, err = records.Delete(ctx, "offset", lockstream.WithExpectedRevision(2))
	wantKind(t, err, lockstream.ErrRevisionConflict, codes.Aborted, "Delete at a past revision")
	if deleted, err := records.Delete(ctx, "offset", lockstream.WithExpectedRevision(3)); err != nil || !deleted {
		t.Fatalf("Delete: %v, %v", deleted, err)
	}
	if deleted, err := records.Delete(ctx, "offset"); err != nil || deleted {
		t.Fatalf("Delete again: %v, %v; want false", deleted, err)
	}
	if _, found, err := client.GetRecord(ctx, name, "offset"); err != nil || found {
		t.Fatalf("GetRecord after Delete: found %v, %v", found, err)
	}
	// A new record, not the deleted one: its revision is above any the key had.
	if revision, err := records.Put(ctx, "offset", nil, lockstream.WithExpectedRevision(0)); err != nil || revision <= 3 {
		t.Fatalf("Put after Delete: revision %d, %v; want more than 3", revision, err)
	}
	// An empty value is a value.
	if record, found, err := records.Get(ctx, "offset"); err != nil || !found || len(record.Value) != 0 {
		t.Fatalf("the empty record: %q, found %v, %v", record.Value, found, err)
	}
}

// A token that does not hold the lock writes nothing: a released holder's (with the lock held by
// another since), a Read holder's, another lock's. Each write is refused with ErrNotHeld
// (FAILED_PRECONDITION), the record is unchanged, and the current holder writes on.
func TestRecordsStaleTokenRefused(t *testing.T) {
	ctx, name := testContext(t), recordsName(t)
	client, other := dial(t, shared.address), dial(t, shared.address)
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	stale := client.Records(name, lock.Token())
	if _, err := stale.Put(ctx, "checkpoint", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := other.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	elsewhere, err := client.Lock(ctx, name+"/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Unlock(ctx)
	reader, err := client.Lock(ctx, name+"/read", lockstream.WithMode(lockstream.Read))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Unlock(ctx)

	writes := map[string]func() error{
		"Put with a released token": func() error { _, err := stale.Put(ctx, "checkpoint", []byte("late")); return err },
		"Update with a released token": func() error {
			_, err := stale.Update(ctx, "checkpoint", func([]byte, bool) []byte { return []byte("late") })
			return err
		},
		"Delete with a released token": func() error { _, err := stale.Delete(ctx, "checkpoint"); return err },
		"Put with another lock's token": func() error {
			_, err := client.Records(name, elsewhere.Token()).Put(ctx, "checkpoint", []byte("late"))
			return err
		},
		"Put with a Read holder's token": func() error {
			_, err := client.Records(name+"/read", reader.Token()).Put(ctx, "checkpoint", []byte("late"))
			return err
		},
	}
	for what, write := range writes {
		err := write()
		wantKind(t, err, lockstream.ErrNotHeld, codes.FailedPrecondition, what)
		if failure := lockError(t, err, what); failure.Lock == "" || strings.Contains(failure.Message, `"`+failure.Lock+`"`) || strings.Contains(failure.Message, "lock the lock") {
			t.Errorf("%s: %q should name the lock once, in front", what, err)
		}
	}
	wantRecord(t, other, name, "checkpoint", "1", 1)
	if _, found, _ := client.GetRecord(ctx, name+"/read", "checkpoint"); found {
		t.Fatal("a Read holder wrote a record")
	}
	if revision, err := other.Records(name, next.Token()).Put(ctx, "checkpoint", []byte("2"), lockstream.WithExpectedRevision(1)); err != nil || revision != 2 {
		t.Fatalf("the new holder's Put: %d, %v; want 2", revision, err)
	}
}

// Update loses no update: two holders of a semaphore add to the same record at once, each
// conflict making the loser read again, and every addition is there in the end.
func TestRecordsUpdateLosesNoUpdate(t *testing.T) {
	ctx, name := testContext(t), recordsName(t)
	const holders, additions = 2, 15
	var wg sync.WaitGroup
	for range holders {
		client := dial(t, shared.address)
		lock, err := client.Lock(ctx, name, lockstream.WithLimit(holders), lockstream.WithMode(lockstream.Semaphore))
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock(ctx)
		records := client.Records(name, lock.Token())
		wg.Go(func() {
			for range additions {
				if _, err := records.Update(ctx, "count", func(current []byte, found bool) []byte {
					n, _ := strconv.Atoi(string(current))
					return []byte(strconv.Itoa(n + 1))
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	record, _, err := dial(t, shared.address).GetRecord(ctx, name, "count")
	if err != nil || string(record.Value) != strconv.Itoa(holders*additions) || record.Revision != holders*additions {
		t.Fatalf("count %q at revision %d, %v; want %d at %d", record.Value, record.Revision, err, holders*additions, holders*additions)
	}
}

// A key or a value the server would refuse is refused by the client, before anything is sent;
// one at the limits is sent and written.
func TestRecordsValidatedBeforeSending(t *testing.T) {
	ctx, name := testContext(t), recordsName(t)
	var sent atomic.Int32
	counting := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasPrefix(method, "/lockstream.v1.RecordService/") {
			sent.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	client := dial(t, shared.address, lockstream.WithDialOptions(counting))
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(ctx)
	records := client.Records(name, lock.Token())
	put := func(key string, value []byte) func() error {
		return func() error { _, err := records.Put(ctx, key, value); return err }
	}
	tooLong := strings.Repeat("k", lockstream.MaxRecordKeyBytes+1)
	for _, bad := range []struct {
		what string
		call func() error
	}{
		{"a key over the limit", put(tooLong, []byte("v"))},
		{"a value over the limit", put("k", make([]byte, lockstream.MaxRecordValueBytes+1))},
		{"an empty key", put("", []byte("v"))},
		{"a key with a control character", put("bell\a", []byte("v"))},
		{"a key that is not UTF-8", put("\xff", []byte("v"))},
		{"Get of a key over the limit", func() error { _, _, err := records.Get(ctx, tooLong); return err }},
		{"Delete of a key over the limit", func() error { _, err := records.Delete(ctx, tooLong); return err }},
		{"Update of a key over the limit", func() error {
			_, err := records.Update(ctx, tooLong, func([]byte, bool) []byte { return nil })
			return err
		}},
		{"Update to a value over the limit", func() error {
			_, err := records.Update(ctx, "k", func([]byte, bool) []byte { return make([]byte, lockstream.MaxRecordValueBytes+1) })
			return err
		}},
		{"a record of a malformed lock name", func() error { _, _, err := client.GetRecord(ctx, "", "k"); return err }},
	} {
		before := sent.Load()
		err := bad.call()
		wantKind(t, err, lockstream.ErrInvalidArgument, codes.InvalidArgument, bad.what)
		// Update reads before it writes: only its read may go.
		if n := sent.Load() - before; n > 0 && !strings.HasPrefix(bad.what, "Update to") || n > 1 {
			t.Errorf("%s: %d calls sent, want none", bad.what, n)
		}
	}
	atLimit := strings.Repeat("k", lockstream.MaxRecordKeyBytes)
	if _, err := records.Put(ctx, atLimit, make([]byte, lockstream.MaxRecordValueBytes)); err != nil {
		t.Fatalf("a key and a value at the limits: %v", err)
	}
	if record, found, err := records.Get(ctx, atLimit); err != nil || !found || len(record.Value) != lockstream.MaxRecordValueBytes {
		t.Fatalf("the record at the limits: %d bytes, found %v, %v", len(record.Value), found, err)
	}
	if sent.Load() == 0 {
		t.Fatal("the interceptor saw no call: it counts nothing")
	}
}

// After Close, every call fails with ErrClosed; an ended context with its own kind.
func TestRecordsClosedAndCancelled(t *testing.T) {
	client, name := dial(t, shared.address), recordsName(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := client.Records(name, 1).Put(ctx, "k", []byte("v"))
	wantKind(t, err, lockstream.ErrCanceled, codes.Canceled, "Put with a cancelled context")
	_ = client.Close()
	_, _, err = client.GetRecord(testContext(t), name, "k")
	wantKind(t, err, lockstream.ErrClosed, codes.Canceled, "GetRecord after Close")
}
