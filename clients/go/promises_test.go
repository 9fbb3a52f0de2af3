// What the client promises when something fails: a bad request fails alone, errors are short
// and name the lock, Done on a lost session, Close, TryLock's ErrLocked, malformed addresses,
// a revoke's deadline.

package lockstream_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
)

// lockError is err as the package's *Error, or fails the test.
func lockError(t *testing.T, err error, what string) *lockstream.Error {
	t.Helper()
	var failure *lockstream.Error
	if !errors.As(err, &failure) {
		t.Fatalf("%s: %v (%T), want a *lockstream.Error", what, err, err)
	}
	return failure
}

// A request the server would refuse fails on its own, before anything is sent: the client's
// held lock keeps its token and is never in doubt, and its session goes on.
func TestABadRequestFailsAlone(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	var doubts atomic.Int32
	held, err := client.Lock(ctx, name, lockstream.WithOnInDoubt(func() { doubts.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([]lockstream.Target, lockstream.MaxLocks+1)
	for i := range tooMany {
		tooMany[i] = lockstream.Target{Name: name + "/" + string(rune('a'+i))}
	}
	lock := func(name string, opts ...lockstream.LockOption) func() error {
		return func() error { _, err := client.Lock(ctx, name, opts...); return err }
	}
	for _, bad := range []struct {
		what string
		call func() error
	}{
		{"a 10 KB name", lock(strings.Repeat("n", 10<<10))},
		{"a 5 KB value", lock(name+"/value", lockstream.WithValue(make([]byte, 5<<10)))},
		{"an invalid-UTF-8 name", lock("go-client/\xff\xfe")},
		{"a name with a control character", lock("go-client/bell\a")},
		{"an empty name", lock("")},
		{"a 300-byte owner", lock(name+"/owner", lockstream.WithOwner(strings.Repeat("o", 300)))},
		{"a negative wait timeout", lock(name+"/timeout", lockstream.WithWaitTimeout(-time.Second))},
		{"a weight outside a semaphore", lock(name+"/weight", lockstream.WithWeight(2))},
		{"a weight over the limit", lock(name+"/weight", lockstream.WithLimit(2), lockstream.WithWeight(3))},
		{"17 locks at once", func() error { _, err := client.LockAll(ctx, tooMany); return err }},
		{"a lock named twice in a multi-lock", func() error {
			_, err := client.LockAll(ctx, []lockstream.Target{{Name: name + "/x"}, {Name: name + "/x"}})
			return err
		}},
		{"a 5 KB value set on the held lock", func() error { return held.SetValue(ctx, make([]byte, 5<<10)) }},
	} {
		err := bad.call()
		if !errors.Is(err, lockstream.ErrInvalidArgument) || lockError(t, err, bad.what).Code != codes.InvalidArgument {
			t.Errorf("%s: %v, want ErrInvalidArgument", bad.what, err)
		}
	}
	if err := held.SetValue(ctx, []byte("still held")); err != nil {
		t.Fatalf("SetValue after the bad requests: %v", err)
	}
	holders := describe(t, client, name).GetHolders()
	if len(holders) != 1 || holders[0].GetFencingToken() != held.Token() || string(holders[0].GetValue()) != "still held" {
		t.Fatalf("holders %v, want the held lock's token %d", holders, held.Token())
	}
	if held.InDoubt() || doubts.Load() != 0 || held.Err() != nil {
		t.Fatalf("the held lock: in doubt %v (%d times), err %v", held.InDoubt(), doubts.Load(), held.Err())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Messages name the lock once, escape control characters, cut a huge name short, and do not
// nest; every failure is a *lockstream.Error.
func TestErrorMessages(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	holder, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	_, err = dial(t, shared.address).Lock(ctx, name, lockstream.WithWaitTimeout(50*time.Millisecond))
	message := err.Error()
	if failure := lockError(t, err, "a wait timeout"); !errors.Is(err, lockstream.ErrTimeout) || failure.Lock != name ||
		failure.Code != codes.DeadlineExceeded || strings.Count(message, name) != 1 ||
		!strings.HasPrefix(message, `lockstream: lock "`+name+`" `) {
		t.Errorf("wait timeout: %q, want ErrTimeout naming the lock once", message)
	}

	t.Logf("wait timeout: %s", message)

	huge := strings.Repeat("x", 10<<10)
	_, err = client.Lock(ctx, huge)
	t.Logf("10 KB name: %s", err)
	if message := err.Error(); len(message) > 300 || !strings.Contains(message, "10240 bytes") {
		t.Errorf("a 10 KB name: %d characters: %q", len(message), message)
	}

	_, err = client.Lock(ctx, "go-client/bell\a\x1b[31m")
	t.Logf("control characters: %s", err)
	if message := err.Error(); strings.ContainsFunc(message, unicode.IsControl) || !strings.Contains(message, `\a\x1b[31m`) {
		t.Errorf("a name with control characters: %q, want them escaped", message)
	}

	// Found before anything is sent: on a client whose server cannot be reached, too.
	unreachable := dial(t, "127.0.0.1:1")
	_, err = unreachable.Lock(ctx, name, lockstream.WithWaitTimeout(-time.Millisecond))
	if !errors.Is(err, lockstream.ErrInvalidArgument) {
		t.Errorf("a negative wait timeout: %v, want ErrInvalidArgument", err)
	}
	// The transport's failure, in the hierarchy.
	_, err = unreachable.Lock(ctx, name)
	t.Logf("unreachable: %s", err)
	if failure := lockError(t, err, "an unreachable server"); !errors.Is(err, lockstream.ErrUnavailable) ||
		failure.Code != codes.Unavailable || strings.Count(err.Error(), "lockstream:") != 1 {
		t.Errorf("an unreachable server: %v, want ErrUnavailable", err)
	}
}

// The server dies under a holder: Done closes for the whole client (ErrLost), and the lock's
// error is one short message, not a chain.
func TestDoneWhenTheSessionIsLost(t *testing.T) {
	ctx, s, name := testContext(t), startServer(t), lockName(t)
	client := dial(t, s.address, lockstream.WithResumeGrace(time.Second))
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-client.Done():
		t.Fatalf("Done closed while the lock is held: %v", client.Err())
	default:
	}
	s.kill()
	await(t, client.Done(), "the client's Done")
	await(t, lock.Lost(), "the lock's Lost")
	if !errors.Is(client.Err(), lockstream.ErrLost) {
		t.Errorf("client Err %v, want ErrLost", client.Err())
	}
	message := lock.Err().Error()
	t.Logf("loss: %s; client: %s", message, client.Err())
	if failure := lockError(t, lock.Err(), "the loss"); failure.Lock != name || strings.Count(message, "lockstream:") != 1 ||
		strings.Count(message, name) != 1 || !strings.HasPrefix(message, `lockstream: lock "`+name+`" was lost: `) {
		t.Errorf("loss: %q, want one message naming the lock once", message)
	}
}

// After Close, a waiting Lock and every new call fail with ErrClosed at once.
func TestClosedMeansClosed(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	blocker, err := dial(t, shared.address).Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Unlock(ctx)
	client := dial(t, shared.address)
	held, err := client.Lock(ctx, name+"/held")
	if err != nil {
		t.Fatal(err)
	}
	option, isQueued := queued()
	waited := make(chan error, 1)
	go func() { _, err := client.Lock(ctx, name, option); waited <- err }()
	await(t, isQueued, "the waiter queued")

	closing := time.Now()
	closed := make(chan struct{})
	go func() { _ = client.Close(); close(closed) }()
	select {
	case err := <-waited:
		if !errors.Is(err, lockstream.ErrClosed) {
			t.Errorf("the waiter: %v, want ErrClosed", err)
		}
		if took := time.Since(closing); took > time.Second {
			t.Errorf("the waiter returned %s after Close", took)
		}
	case <-time.After(patience):
		t.Fatal("the waiter did not return after Close")
	}
	for what, call := range map[string]func() error{
		"Lock":    func() error { _, err := client.Lock(ctx, name+"/after"); return err },
		"TryLock": func() error { _, err := client.TryLock(ctx, name+"/after"); return err },
		"LockAll": func() error {
			_, err := client.LockAll(ctx, []lockstream.Target{{Name: name + "/a"}, {Name: name + "/b"}})
			return err
		},
	} {
		started := time.Now()
		if err := call(); !errors.Is(err, lockstream.ErrClosed) || time.Since(started) > time.Second {
			t.Errorf("%s after Close: %v after %s, want ErrClosed at once", what, err, time.Since(started))
		}
	}
	await(t, closed, "Close returning")
	await(t, client.Done(), "the client's Done")
	if !errors.Is(client.Err(), lockstream.ErrClosed) {
		t.Errorf("client Err %v, want ErrClosed", client.Err())
	}
	if err := held.Unlock(ctx); !errors.Is(err, lockstream.ErrClosed) {
		t.Errorf("Unlock of a lock Close released: %v, want ErrClosed", err)
	}
	if holders := describe(t, dial(t, shared.address), name+"/held"); len(holders.GetHolders()) != 0 {
		t.Errorf("holders %v after Close released the lock", holders.GetHolders())
	}
}

// TryLock answers "not acquired" with ErrLocked, queuing nothing, as etcd's TryLock does.
func TestTryLockOnAHeldLock(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	holder, err := client.TryLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := dial(t, shared.address).TryLock(ctx, name)
	if lock != nil || !errors.Is(err, lockstream.ErrLocked) || errors.Is(err, lockstream.ErrTimeout) {
		t.Fatalf("TryLock of a held lock: %v, %v, want nil, ErrLocked", lock, err)
	}
	if waiters := describe(t, client, name).GetWaiters(); len(waiters) != 0 {
		t.Fatalf("waiters %v after a TryLock", waiters)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDialRejectsAMalformedAddress(t *testing.T) {
	for _, address := range []string{"not a host::://", "", "127.0.0.1", "localhost:99999", "localhost:http", "bad host:50051"} {
		if client, err := lockstream.Dial(address); !errors.Is(err, lockstream.ErrInvalidArgument) {
			t.Errorf("Dial(%q): %v, want ErrInvalidArgument", address, err)
			if client != nil {
				_ = client.Close()
			}
		}
	}
	// Dial does not connect: an address nobody answers at is found out by the first Lock.
	for _, address := range []string{"127.0.0.1:1", "localhost:50051", "[::1]:50051", "dns:///localhost:50051", "unix:///run/lockstream.sock"} {
		client, err := lockstream.Dial(address)
		if err != nil {
			t.Errorf("Dial(%q): %v", address, err)
			continue
		}
		_ = client.Close()
	}
	for what, option := range map[string]lockstream.ClientOption{
		"a negative resume grace":   lockstream.WithResumeGrace(-time.Second),
		"a 10ms heartbeat":          lockstream.WithHeartbeatInterval(10 * time.Millisecond),
		"a control character owner": lockstream.WithDefaultOwner("a\nb"),
	} {
		if _, err := lockstream.Dial("127.0.0.1:1", option); !errors.Is(err, lockstream.ErrInvalidArgument) {
			t.Errorf("Dial with %s: %v, want ErrInvalidArgument", what, err)
		}
	}
}

// A cooperative revoke, then a forced one: the holder hears both, the second with its deadline.
func TestASecondRevokeRequestBringsTheDeadline(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	type revoke struct {
		reason   string
		deadline time.Time
	}
	revokes := make(chan revoke, 2)
	lock, err := client.Lock(ctx, name, lockstream.WithOnRevokeRequested(func(reason string, deadline time.Time) {
		revokes <- revoke{reason, deadline}
	}))
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) revoke {
		t.Helper()
		select {
		case r := <-revokes:
			return r
		case <-time.After(patience):
			t.Fatalf("%s did not reach the holder", what)
			return revoke{}
		}
	}
	if _, err := client.RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "please"}); err != nil {
		t.Fatal(err)
	}
	if first := next("the cooperative revoke"); first.reason != "please" || !first.deadline.IsZero() {
		t.Fatalf("first revoke %+v, want the reason and no deadline", first)
	}
	await(t, lock.RevokeRequested(), "RevokeRequested")
	if _, set := lock.RevokeDeadline(); set {
		t.Fatal("a deadline after a cooperative revoke")
	}
	asked := time.Now()
	if _, err := client.RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "now", ForceAfter: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	second := next("the forced revoke")
	if second.deadline.Before(asked.Add(50*time.Second)) || second.deadline.After(asked.Add(70*time.Second)) {
		t.Fatalf("second revoke %+v, want a deadline a minute after %s", second, asked)
	}
	if deadline, set := lock.RevokeDeadline(); !set || !deadline.Equal(second.deadline) || lock.Reason() != "now" {
		t.Fatalf("RevokeDeadline %s %v, Reason %q", deadline, set, lock.Reason())
	}
	if !errors.Is(context.Cause(lock.Context()), lockstream.ErrRevoked) {
		t.Fatalf("context cause %v, want ErrRevoked", context.Cause(lock.Context()))
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
