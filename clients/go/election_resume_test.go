// A leader and its connection: resumed after a break with the same term, on the next endpoint
// when its own is gone, Done before anyone else is elected when the path freezes or the server
// dies.

package lockstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
)

// A broken connection is not a lost leadership: the candidate is resumed on a new one, with
// the same term, and can still resign.
func TestLeadershipIsResumedAfterABrokenConnection(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	p := startProxy(t, shared.address)
	client := dial(t, p.address(), lockstream.WithResumeGrace(10*time.Second), lockstream.WithHeartbeatInterval(200*time.Millisecond))
	leadership := campaign(t, client.Election(name), "resumed")
	nextOutcome := campaignInBackground(t, dial(t, shared.address).Election(name), "next")
	if cut := p.cut(); cut == 0 {
		t.Fatal("the proxy carried no connection")
	}
	// The old connection is closed: a request to step down reaches the leader only on the
	// stream it was resumed on.
	asked, err := dial(t, shared.address).RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "after the cut"})
	if err != nil || asked.GetHoldersAsked() != 1 {
		t.Fatalf("RevokeLock: %v, %v", asked, err)
	}
	await(t, leadership.ResignRequested(), "the resumed leader asked to step down")
	select {
	case <-leadership.Done():
		t.Fatalf("Done across a resumed stream: %v", leadership.Err())
	default:
	}
	if err := leadership.Resign(ctx); err != nil {
		t.Fatalf("Resign after the cut: %v", err)
	}
	successor := elected(t, nextOutcome)
	if successor.Term() <= leadership.Term() {
		t.Fatalf("the next term %d is not after %d", successor.Term(), leadership.Term())
	}
	_ = successor.Resign(ctx)
}

// The server dies under a leader: Done is closed, with ErrLost.
func TestServerKilledUnderTheLeader(t *testing.T) {
	s := startServer(t)
	leadership := campaign(t, dial(t, s.address, lockstream.WithResumeGrace(time.Second)).Election(lockName(t)), "")
	s.kill()
	await(t, leadership.Done(), "Done after the server was killed")
	if !errors.Is(leadership.Err(), lockstream.ErrLost) {
		t.Fatalf("Err %v, want ErrLost", leadership.Err())
	}
}

// The leader's endpoint goes away: the candidate is resumed on the next one, still leader.
func TestLeadershipFailsOverToTheNextEndpoint(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	first, second := startProxy(t, shared.address), startProxy(t, shared.address)
	client, err := lockstream.DialEndpoints([]string{first.address(), second.address()},
		lockstream.WithResumeGrace(10*time.Second), lockstream.WithHeartbeatInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	var told []string
	var toldMu sync.Mutex
	tell := func(what string) func() {
		return func() {
			toldMu.Lock()
			defer toldMu.Unlock()
			told = append(told, what)
		}
	}
	leadership, err := client.Election(name).Campaign(ctx, []byte("failing over"),
		lockstream.WithOnCampaignInDoubt(tell("in doubt")), lockstream.WithOnCampaignConfirmed(tell("confirmed")))
	if err != nil {
		t.Fatal(err)
	}
	first.stop()
	asked, err := dial(t, shared.address).RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "after the failover"})
	if err != nil || asked.GetHoldersAsked() != 1 {
		t.Fatalf("RevokeLock: %v, %v", asked, err)
	}
	await(t, leadership.ResignRequested(), "the leader asked to step down on the next endpoint")
	if err := leadership.Resign(ctx); err != nil {
		t.Fatalf("Resign on the next endpoint: %v", err)
	}
	if leader, err := client.Election(name).Leader(ctx); !errors.Is(err, lockstream.ErrNoLeader) {
		t.Fatalf("Leader after the resign: %+v, %v", leader, err)
	}
	// In doubt from the break until the resume on the next endpoint, which the request to step
	// down came through: told once each, in order.
	toldMu.Lock()
	defer toldMu.Unlock()
	if fmt.Sprint(told) != "[in doubt confirmed]" {
		t.Fatalf("told %q, want in doubt, then confirmed", told)
	}
}

// A network partition between a leader and the server (no byte either way, sockets open): the
// leader is in doubt, then Done (ErrLost, its Context ended), before the server elects the next
// candidate.
func TestPartitionedLeaderIsDoneBeforeTheNextIsElected(t *testing.T) {
	ctx, s, name := testContext(t), startServer(t), lockName(t)
	p := startProxy(t, s.address)
	grace := 1500 * time.Millisecond
	leadership := campaign(t, dial(t, p.address(), lockstream.WithResumeGrace(grace), lockstream.WithHeartbeatInterval(200*time.Millisecond)).Election(name), "")
	nextOutcome := campaignInBackground(t, dial(t, s.address).Election(name), "")

	frozenAt := time.Now()
	p.freeze()
	done, doneAt := stampOf(leadership.Done())
	ended, endedAt := stampOf(leadership.Context().Done())
	successor := elected(t, nextOutcome)
	electedAt := time.Now()
	await(t, done, "the leader's Done")
	await(t, ended, "the leader's Context ending")
	since := func(at time.Time) time.Duration { return at.Sub(frozenAt).Round(time.Millisecond) }
	t.Logf("after the freeze: done %s (context %s), next elected %s", since(*doneAt), since(*endedAt), since(electedAt))
	if !doneAt.Before(electedAt) || !endedAt.Before(electedAt) {
		t.Errorf("done %s and context ended %s after the freeze: not before the next was elected at %s",
			since(*doneAt), since(*endedAt), since(electedAt))
	}
	if err := leadership.Err(); !errors.Is(err, lockstream.ErrLost) || !leadership.InDoubt() {
		t.Errorf("Err %v, InDoubt %v: want ErrLost, in doubt", err, leadership.InDoubt())
	}
	if successor.Term() <= leadership.Term() {
		t.Errorf("the next term %d is not after %d", successor.Term(), leadership.Term())
	}
	_ = successor.Resign(ctx)
}

// A Campaign whose endpoint never answers (and no heartbeats to notice it) returns when its
// context ends, not when gRPC's keepalive gives the connection up (13 s).
func TestCampaignOnAFrozenEndpointEndsWithItsContext(t *testing.T) {
	p := startProxy(t, shared.address)
	p.freeze()
	client := dial(t, p.address(), lockstream.WithHeartbeatInterval(0))
	ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		_, err := client.Election(lockName(t)).Campaign(ctx, nil)
		returned <- err
	}()
	select {
	case err := <-returned:
		if !errors.Is(err, lockstream.ErrTimeout) {
			t.Fatalf("Campaign: %v, want ErrTimeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Campaign did not return when its context ended")
	}
}
