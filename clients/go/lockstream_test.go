package lockstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// shared is the server most tests use; tests that kill or cut theirs start their own.
var shared *server

func TestMain(m *testing.M) {
	var err error
	shared, err = launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// patience bounds every wait for an event, so that a broken promise fails instead of hanging.
const patience = 20 * time.Second

func dial(t *testing.T, address string, opts ...lockstream.ClientOption) *lockstream.Client {
	t.Helper()
	client, err := lockstream.Dial(address, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func lockName(t *testing.T) string { return "go-client/" + t.Name() }

// await fails the test if ch is not closed within patience.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("%s did not happen within %s", what, patience)
	}
}

// queued returns an option that closes the channel when the request is queued.
func queued() (lockstream.LockOption, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return lockstream.WithOnQueued(func(int) { once.Do(func() { close(ch) }) }), ch
}

func describe(t *testing.T, client *lockstream.Client, name string) *pb.DescribeLockResponse {
	t.Helper()
	described, err := client.RPC().DescribeLock(testContext(t), &pb.DescribeLockRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return described
}

func TestLockUnlockTokensGrow(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	first, err := client.Lock(ctx, name, lockstream.WithOwner("first"))
	if err != nil {
		t.Fatal(err)
	}
	if holders := describe(t, client, name).GetHolders(); len(holders) != 1 || holders[0].GetFencingToken() != first.Token() || holders[0].GetOwner() != "first" {
		t.Fatalf("holders %v, want the lock's token %d", holders, first.Token())
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); !errors.Is(err, lockstream.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	await(t, first.Context().Done(), "the unlocked lock's context ending")
	select {
	case <-first.Lost():
		t.Fatal("Unlock closed Lost")
	default:
	}
	second, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(ctx)
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after %d: tokens must grow", second.Token(), first.Token())
	}
}

// Three clients on one lock: the history of who held it shows exclusion and queue order.
func TestExclusionInQueueOrder(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	var mu sync.Mutex
	var history []string
	record := func(event string) { mu.Lock(); history = append(history, event); mu.Unlock() }

	holder, err := dial(t, shared.address).Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	record("a+")
	var wg sync.WaitGroup
	tokens := make([]uint64, 3)
	tokens[0] = holder.Token()
	for i, who := range []string{"b", "c"} {
		option, isQueued := queued()
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock, err := dial(t, shared.address).Lock(ctx, name, option)
			if err != nil {
				t.Error(err)
				return
			}
			record(who + "+")
			tokens[i+1] = lock.Token()
			record(who + "-")
			if err := lock.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		await(t, isQueued, who+" queued")
	}
	record("a-")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if want := []string{"a+", "a-", "b+", "b-", "c+", "c-"}; !slices.Equal(history, want) {
		t.Fatalf("history %v, want %v", history, want)
	}
	if !slices.IsSorted(tokens) || tokens[0] == tokens[1] || tokens[1] == tokens[2] {
		t.Fatalf("tokens %v must grow", tokens)
	}
}

func TestReadersShareAWriterWaits(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	readers := make([]*lockstream.Lock, 2)
	for i := range readers {
		lock, err := dial(t, shared.address).Lock(ctx, name, lockstream.WithMode(lockstream.Read))
		if err != nil {
			t.Fatal(err)
		}
		readers[i] = lock
	}
	writer := dial(t, shared.address)
	_, err := writer.TryLock(ctx, name, lockstream.WithMode(lockstream.Write))
	if !errors.Is(err, lockstream.ErrLocked) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("TryLock of a read-held lock: %v, want ErrLocked (DEADLINE_EXCEEDED)", err)
	}
	option, isQueued := queued()
	granted := make(chan *lockstream.Lock, 1)
	go func() {
		lock, err := writer.Lock(ctx, name, lockstream.WithMode(lockstream.Write), option)
		if err != nil {
			t.Error(err)
		}
		granted <- lock
	}()
	await(t, isQueued, "the writer queued")
	if err := readers[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-granted:
		t.Fatal("the writer was granted while a reader held the lock")
	default:
	}
	if holders := describe(t, writer, name).GetHolders(); len(holders) != 1 || holders[0].GetFencingToken() != readers[1].Token() {
		t.Fatalf("holders %v: want the second reader alone", holders)
	}
	if err := readers[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lock := <-granted
	if lock == nil || lock.Token() <= readers[1].Token() {
		t.Fatalf("writer's lock %v after readers", lock)
	}
	_ = lock.Unlock(ctx)
}

func TestWaitTimeout(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	holder, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	start := time.Now()
	_, err = dial(t, shared.address).Lock(ctx, name, lockstream.WithWaitTimeout(200*time.Millisecond))
	var lockErr *lockstream.Error
	if !errors.Is(err, lockstream.ErrTimeout) || !errors.As(err, &lockErr) || lockErr.Lock != name {
		t.Fatalf("Lock: %v, want ErrTimeout naming the lock", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("gave up after %s, before the 200ms wait timeout", waited)
	}
}

// A caller that stops waiting leaves the queue: nobody is left waiting, the next one is served.
func TestCancelledWaitLeavesTheQueue(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	holder, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	option, isQueued := queued()
	done := make(chan error, 1)
	go func() {
		_, err := dial(t, shared.address).Lock(waitCtx, name, option)
		done <- err
	}()
	await(t, isQueued, "the waiter queued")
	if waiters := describe(t, client, name).GetWaiters(); len(waiters) != 1 {
		t.Fatalf("waiters %v, want one", waiters)
	}
	stopWaiting()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock: %v, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Fatal("Lock did not return after its context was cancelled")
	}
	if waiters := describe(t, client, name).GetWaiters(); len(waiters) != 0 {
		t.Fatalf("waiters %v left after the wait was cancelled", waiters)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

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

func TestValueAndDowngrade(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	lock, err := client.Lock(ctx, name, lockstream.WithMode(lockstream.Write), lockstream.WithValue([]byte("10.0.0.7:8080")))
	if err != nil {
		t.Fatal(err)
	}
	if holders := describe(t, client, name).GetHolders(); string(holders[0].GetValue()) != "10.0.0.7:8080" {
		t.Fatalf("value %q", holders[0].GetValue())
	}
	if err := lock.SetValue(ctx, []byte("10.0.0.8:8080")); err != nil {
		t.Fatal(err)
	}
	if holders := describe(t, client, name).GetHolders(); string(holders[0].GetValue()) != "10.0.0.8:8080" {
		t.Fatalf("value %q after SetValue", holders[0].GetValue())
	}
	// A reader queued behind the writer is granted once it downgrades, while it still holds.
	option, isQueued := queued()
	granted := make(chan *lockstream.Lock, 1)
	go func() {
		reader, err := dial(t, shared.address).Lock(ctx, name, lockstream.WithMode(lockstream.Read), option)
		if err != nil {
			t.Error(err)
		}
		granted <- reader
	}()
	await(t, isQueued, "the reader queued")
	if err := lock.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if lock.Mode() != lockstream.Read {
		t.Fatalf("mode %v after Downgrade", lock.Mode())
	}
	reader := <-granted
	if reader == nil {
		t.Fatal("the reader was not granted")
	}
	if holders := describe(t, client, name).GetHolders(); len(holders) != 2 {
		t.Fatalf("holders %v, want the downgraded writer and the reader", holders)
	}
	_ = reader.Unlock(ctx)
	_ = lock.Unlock(ctx)

	// A read hold cannot be downgraded: the request ends with FAILED_PRECONDITION.
	read, err := client.Lock(ctx, name, lockstream.WithMode(lockstream.Read))
	if err != nil {
		t.Fatal(err)
	}
	if err := read.Downgrade(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Downgrade of a read hold: %v, want FAILED_PRECONDITION", err)
	}
}

func TestRevokeEndsTheLocksContext(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "maintenance", ForceAfter: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	await(t, lock.RevokeRequested(), "the revoke request")
	await(t, lock.Context().Done(), "the lock's context ending")
	if !errors.Is(context.Cause(lock.Context()), lockstream.ErrRevoked) || lock.Reason() != "maintenance" {
		t.Fatalf("cause %v, reason %q", context.Cause(lock.Context()), lock.Reason())
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphore(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	heavy, err := dial(t, shared.address).Lock(ctx, name, lockstream.WithLimit(3), lockstream.WithWeight(2))
	if err != nil {
		t.Fatal(err)
	}
	light, err := dial(t, shared.address).TryLock(ctx, name, lockstream.WithLimit(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, shared.address).TryLock(ctx, name, lockstream.WithLimit(3)); !errors.Is(err, lockstream.ErrLocked) {
		t.Fatalf("a third unit of a 3-unit semaphore in use: %v", err)
	}
	described := describe(t, dial(t, shared.address), name)
	if described.GetLimit() != 3 || described.GetUsedWeight() != 3 {
		t.Fatalf("limit %d used %d", described.GetLimit(), described.GetUsedWeight())
	}
	_ = heavy.Unlock(ctx)
	_ = light.Unlock(ctx)
}

// A multi-lock is granted all its locks at once, or none: a holder of one of them keeps the whole
// set waiting, and takes nothing of it meanwhile.
func TestLockAll(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	accounts, ledger := name+"/accounts", name+"/ledger"
	blocker, err := dial(t, shared.address).Lock(ctx, ledger)
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, shared.address)
	targets := []lockstream.Target{{Name: accounts, Mode: lockstream.Write}, {Name: ledger, Mode: lockstream.Read}}
	if _, err := client.LockAll(ctx, targets, lockstream.WithWaitTimeout(0)); !errors.Is(err, lockstream.ErrTimeout) {
		t.Fatalf("LockAll with one lock held: %v, want ErrTimeout", err)
	}
	// Nothing of the set was taken: the free lock is free.
	free, err := dial(t, shared.address).TryLock(ctx, accounts)
	if err != nil {
		t.Fatalf("the free lock of a refused set: %v", err)
	}
	_ = free.Unlock(ctx)

	option, isQueued := queued()
	granted := make(chan *lockstream.Lock, 1)
	go func() {
		lock, err := client.LockAll(ctx, targets, option)
		if err != nil {
			t.Error(err)
		}
		granted <- lock
	}()
	await(t, isQueued, "the multi-lock queued")
	if err := blocker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	set := <-granted
	if set == nil {
		t.Fatal("the set was not granted")
	}
	tokens := set.Tokens()
	if len(tokens) != 2 || tokens[0].Name != accounts || tokens[1].Name != ledger || set.Token() != tokens[0].Token {
		t.Fatalf("tokens %v, token %d", tokens, set.Token())
	}
	for _, token := range tokens {
		if holders := describe(t, client, token.Name).GetHolders(); len(holders) != 1 || holders[0].GetFencingToken() != token.Token {
			t.Fatalf("%s holders %v, want token %d", token.Name, holders, token.Token)
		}
	}
	if err := set.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, token := range tokens {
		if holders := describe(t, client, token.Name).GetHolders(); len(holders) != 0 {
			t.Fatalf("%s still held after Unlock: %v", token.Name, holders)
		}
	}
}
