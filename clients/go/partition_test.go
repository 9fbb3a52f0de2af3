// Network partitions between a holder and the server: in doubt, then lost before anyone else is
// granted the lock; a short partition is a blip.

package lockstream_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

// stamp returns a function that records when it is first called, and a channel closed then.
func stamp() (func(), <-chan struct{}, *time.Time) {
	var once sync.Once
	var at time.Time
	ch := make(chan struct{})
	return func() { once.Do(func() { at = time.Now(); close(ch) }) }, ch, &at
}

// stampOf records when ch is closed.
func stampOf(ch <-chan struct{}) (<-chan struct{}, *time.Time) {
	mark, marked, at := stamp()
	go func() { <-ch; mark() }()
	return marked, at
}

// A network partition between a holder and the server (no byte either way, sockets open): the
// holder's lock is in doubt, then lost (Lost closed, Context done), before the server grants it
// to the next client in line. Default options on both sides.
func TestPartitionedHolderLosesTheLockBeforeTheNextGrant(t *testing.T) {
	ctx, s, name := testContext(t), startServer(t), lockName(t)
	p := startProxy(t, s.address)
	markDoubt, inDoubt, doubtAt := stamp()
	holder, err := dial(t, p.address()).Lock(ctx, name, lockstream.WithOnInDoubt(markDoubt))
	if err != nil {
		t.Fatal(err)
	}
	option, isQueued := queued()
	markGrant, granted, grantAt := stamp()
	go func() {
		next, err := dial(t, s.address).Lock(ctx, name, option)
		if err != nil {
			t.Error(err)
			return
		}
		markGrant()
		_ = next.Unlock(ctx)
	}()
	await(t, isQueued, "the next client queued")

	frozenAt := time.Now()
	p.freeze()
	lost, lostAt := stampOf(holder.Lost())
	ended, endedAt := stampOf(holder.Context().Done())
	await(t, granted, "the next client's grant")
	await(t, inDoubt, "the holder in doubt")
	await(t, lost, "the holder's Lost")
	await(t, ended, "the holder's Context ending")

	since := func(at *time.Time) time.Duration { return at.Sub(frozenAt).Round(time.Millisecond) }
	t.Logf("after the freeze: in doubt %s, lost %s (context done %s), granted elsewhere %s: lost %s before the grant",
		since(doubtAt), since(lostAt), since(endedAt), since(grantAt), grantAt.Sub(*lostAt).Round(time.Millisecond))
	if !doubtAt.Before(*lostAt) {
		t.Errorf("in doubt %s after the freeze, not before the loss at %s", since(doubtAt), since(lostAt))
	}
	// The grace is counted from the last message heard, which came before the freeze: lost
	// within 0.9 of it (with some slack for a busy machine), not a grace after noticing.
	if latest := lockstream.DefaultResumeGrace*9/10 + 500*time.Millisecond; lostAt.Sub(frozenAt) > latest {
		t.Errorf("lost %s after the freeze, later than %s", since(lostAt), latest)
	}
	if !lostAt.Before(*grantAt) || !endedAt.Before(*grantAt) {
		t.Errorf("lost %s and context done %s after the freeze: not before the next grant at %s",
			since(lostAt), since(endedAt), since(grantAt))
	}
	if err := holder.Err(); !errors.Is(err, lockstream.ErrLost) || !holder.InDoubt() {
		t.Errorf("Err %v, InDoubt %v: want ErrLost, in doubt", err, holder.InDoubt())
	}
}

// A partition shorter than the grace is a blip: the holder is in doubt, then confirmed with the
// same token once the path is back, and never lost.
func TestAShortPartitionIsABlip(t *testing.T) {
	ctx, s, name := testContext(t), startServer(t), lockName(t)
	p := startProxy(t, s.address)
	markDoubt, inDoubt, _ := stamp()
	markConfirmed, confirmed, _ := stamp()
	holder, err := dial(t, p.address()).Lock(ctx, name,
		lockstream.WithOnInDoubt(markDoubt), lockstream.WithOnConfirmed(markConfirmed))
	if err != nil {
		t.Fatal(err)
	}
	p.freeze()
	await(t, inDoubt, "the holder in doubt")
	p.thaw()
	await(t, confirmed, "the holder confirmed")
	if err := holder.SetValue(ctx, []byte("after the blip")); err != nil {
		t.Fatal(err)
	}
	holders := describe(t, dial(t, s.address), name).GetHolders()
	if len(holders) != 1 || holders[0].GetFencingToken() != holder.Token() || holder.InDoubt() || holder.Err() != nil {
		t.Fatalf("holders %v, in doubt %v, err %v: want the same token %d, confirmed", holders, holder.InDoubt(), holder.Err(), holder.Token())
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
