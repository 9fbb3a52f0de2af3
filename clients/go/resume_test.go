// Broken connections and dead servers: a session resumed keeps its locks and its waiters'
// places; a server killed under a holder loses its lock.

package lockstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

// The server dies under a holder: Lost fires and the lock's context ends, with ErrLost.
func TestServerKilledUnderTheHolder(t *testing.T) {
	ctx, s := testContext(t), startServer(t)
	lock, err := dial(t, s.address, lockstream.WithResumeGrace(time.Second)).Lock(ctx, lockName(t))
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	await(t, lock.Lost(), "Lost after the server was killed")
	await(t, lock.Context().Done(), "the lock's context ending")
	if !errors.Is(lock.Err(), lockstream.ErrLost) || !errors.Is(context.Cause(lock.Context()), lockstream.ErrLost) {
		t.Fatalf("Err %v, context cause %v: want ErrLost", lock.Err(), context.Cause(lock.Context()))
	}
	if err := lock.Unlock(ctx); !errors.Is(err, lockstream.ErrLost) {
		t.Fatalf("Unlock of a lost lock: %v, want ErrLost", err)
	}
}

// A broken connection is not a lost lock: the client resumes its session on a new one, and the
// lock is still held with the same token.
func TestResumeAfterABrokenConnection(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	p := startProxy(t, shared.address)
	client := dial(t, p.address(), lockstream.WithResumeGrace(10*time.Second), lockstream.WithHeartbeatInterval(200*time.Millisecond))
	lock, err := client.Lock(ctx, name, lockstream.WithMode(lockstream.Write))
	if err != nil {
		t.Fatal(err)
	}
	if cut := p.cut(); cut == 0 {
		t.Fatal("the proxy carried no connection")
	}
	// Answered only once the session is taken over on a new connection.
	if err := lock.SetValue(ctx, []byte("after the cut")); err != nil {
		t.Fatal(err)
	}
	observer := dial(t, shared.address)
	holders := describe(t, observer, name).GetHolders()
	if len(holders) != 1 || holders[0].GetFencingToken() != lock.Token() || string(holders[0].GetValue()) != "after the cut" {
		t.Fatalf("holders %v, want the same token %d with the new value", holders, lock.Token())
	}
	// Another client queued now is granted after this holder, which the server still knows.
	select {
	case <-lock.Lost():
		t.Fatalf("Lost fired across a resumed session: %v", lock.Err())
	default:
	}
	if _, err := observer.TryLock(ctx, name); !errors.Is(err, lockstream.ErrLocked) {
		t.Fatalf("TryLock while the resumed holder holds: %v", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := observer.TryLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_ = next.Unlock(ctx)
}

// A waiter whose connection breaks stays in its place in the queue.
func TestResumeKeepsAWaitersPlace(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	holder, err := dial(t, shared.address).Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, shared.address)
	waiting := dial(t, p.address(), lockstream.WithResumeGrace(10*time.Second))
	option, isQueued := queued()
	granted := make(chan *lockstream.Lock, 1)
	go func() {
		lock, err := waiting.Lock(ctx, name, option)
		if err != nil {
			t.Error(err)
		}
		granted <- lock
	}()
	await(t, isQueued, "the waiter queued")
	p.cut()
	late, lateQueued := queued()
	go func() { _, _ = dial(t, shared.address).Lock(ctx, name, late) }()
	await(t, lateQueued, "a later waiter queued")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lock := <-granted
	if lock == nil || lock.Token() <= holder.Token() {
		t.Fatalf("the resumed waiter got %v", lock)
	}
	_ = lock.Unlock(ctx)
}
