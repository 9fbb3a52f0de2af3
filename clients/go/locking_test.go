// Taking locks: tokens, exclusion and queue order, shared and exclusive modes, wait timeouts and
// cancelled waits, semaphores, multi-locks.

package lockstream_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
	// A second Unlock answers as the first did.
	if err := first.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want nil, as the first", err)
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
