// Failover between endpoints (DialEndpoints): the session moves to the next endpoint when its
// own goes down, and is lost when none takes it.

package lockstream_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

// The ways an endpoint goes down: frozen (no byte either way, sockets open: a paused instance
// or a partition), or stopped (connections broken and refused: a dead instance).
var endpointFailures = []struct {
	name string
	fail func(*proxy)
}{
	{"frozen", (*proxy).freeze},
	{"stopped", (*proxy).stop},
}

// refusedAddress is a loopback address nobody listens at: connections to it are refused.
func refusedAddress(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	_ = listener.Close()
	return address
}

func dialEndpoints(t *testing.T, endpoints []string, opts ...lockstream.ClientOption) *lockstream.Client {
	t.Helper()
	client, err := lockstream.DialEndpoints(endpoints, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// One server behind two proxies, two endpoints of the same instance: when the endpoint the
// holder talks through goes down, the session moves to the other. The lock is in doubt, then
// confirmed with the same token, never lost; the next client in line is not granted it
// meanwhile; a Lock made during the move waits for the session. Default options.
func TestFailoverToTheNextEndpoint(t *testing.T) {
	for _, failure := range endpointFailures {
		t.Run(failure.name, func(t *testing.T) {
			t.Parallel()
			ctx, name := testContext(t), lockName(t)
			first, second := startProxy(t, shared.address), startProxy(t, shared.address)
			markDoubt, inDoubt, _ := stamp()
			markConfirmed, confirmed, _ := stamp()
			client := dialEndpoints(t, []string{first.address(), second.address()})
			holder, err := client.Lock(ctx, name, lockstream.WithOnInDoubt(markDoubt), lockstream.WithOnConfirmed(markConfirmed))
			if err != nil {
				t.Fatal(err)
			}
			option, isQueued := queued()
			markGrant, granted, _ := stamp()
			go func() {
				next, err := dial(t, shared.address).Lock(ctx, name, option)
				if err != nil {
					t.Error(err)
					return
				}
				markGrant()
				_ = next.Unlock(ctx)
			}()
			await(t, isQueued, "the next client queued")

			failure.fail(first)
			await(t, inDoubt, "the holder in doubt")
			// Made while the session moves: waits for it, and is granted on the second endpoint.
			during := make(chan error, 1)
			go func() {
				lock, err := client.Lock(ctx, name+"/during")
				if err == nil {
					err = lock.Unlock(ctx)
				}
				during <- err
			}()
			await(t, confirmed, "the holder confirmed")
			if err := <-during; err != nil {
				t.Errorf("a Lock made during the failover: %v", err)
			}
			// Answered through the second endpoint: the first is still down.
			if err := holder.SetValue(ctx, []byte("after the failover")); err != nil {
				t.Fatal(err)
			}
			holders := describe(t, client, name).GetHolders()
			if len(holders) != 1 || holders[0].GetFencingToken() != holder.Token() || string(holders[0].GetValue()) != "after the failover" {
				t.Fatalf("holders %v, want the same token %d with the new value", holders, holder.Token())
			}
			select {
			case <-holder.Lost():
				t.Fatalf("lost across the failover: %v", holder.Err())
			case <-granted:
				t.Fatal("the next client was granted the lock during the failover")
			default:
			}
			if holder.InDoubt() {
				t.Fatal("still in doubt after the confirmation")
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			await(t, granted, "the next client's grant after the release")
		})
	}
}

// Both endpoints down past the grace: the lock is in doubt, then lost (0.9 of the grace after
// the last message heard), before the server grants it to the next client in line.
func TestLostWhenNoEndpointTakesTheSession(t *testing.T) {
	for _, failure := range endpointFailures {
		t.Run(failure.name, func(t *testing.T) {
			t.Parallel()
			ctx, name := testContext(t), lockName(t)
			first, second := startProxy(t, shared.address), startProxy(t, shared.address)
			markDoubt, inDoubt, doubtAt := stamp()
			client := dialEndpoints(t, []string{first.address(), second.address()})
			holder, err := client.Lock(ctx, name, lockstream.WithOnInDoubt(markDoubt))
			if err != nil {
				t.Fatal(err)
			}
			option, isQueued := queued()
			markGrant, granted, grantAt := stamp()
			go func() {
				next, err := dial(t, shared.address).Lock(ctx, name, option)
				if err != nil {
					t.Error(err)
					return
				}
				markGrant()
				_ = next.Unlock(ctx)
			}()
			await(t, isQueued, "the next client queued")

			downAt := time.Now()
			failure.fail(second)
			failure.fail(first)
			lost, lostAt := stampOf(holder.Lost())
			await(t, lost, "the holder's Lost")
			await(t, granted, "the next client's grant")
			await(t, inDoubt, "the holder in doubt")
			t.Logf("after both endpoints went down: in doubt %s, lost %s, granted elsewhere %s",
				doubtAt.Sub(downAt).Round(time.Millisecond), lostAt.Sub(downAt).Round(time.Millisecond), grantAt.Sub(downAt).Round(time.Millisecond))
			if !doubtAt.Before(*lostAt) || !lostAt.Before(*grantAt) {
				t.Errorf("in doubt at %s, lost at %s, granted elsewhere at %s: want them in that order", doubtAt, lostAt, grantAt)
			}
			if latest := lockstream.DefaultResumeGrace*9/10 + 500*time.Millisecond; lostAt.Sub(downAt) > latest {
				t.Errorf("lost %s after both endpoints went down, later than %s", lostAt.Sub(downAt), latest)
			}
			if err := holder.Err(); !errors.Is(err, lockstream.ErrLost) {
				t.Errorf("Err %v, want ErrLost", err)
			}
		})
	}
}

// A list whose first endpoint refuses connections, or is frozen: the first Lock is granted
// through the second.
func TestADeadFirstEndpointIsPassedOver(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		ctx, name := testContext(t), lockName(t)
		client := dialEndpoints(t, []string{refusedAddress(t), shared.address})
		lock, err := client.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if holders := describe(t, dial(t, shared.address), name).GetHolders(); len(holders) != 1 || holders[0].GetFencingToken() != lock.Token() {
			t.Fatalf("holders %v, want the lock's token %d", holders, lock.Token())
		}
		if err := lock.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("frozen", func(t *testing.T) {
		t.Parallel()
		ctx, name := testContext(t), lockName(t)
		frozen := startProxy(t, shared.address)
		frozen.freeze()
		client := dialEndpoints(t, []string{frozen.address(), shared.address})
		started := time.Now()
		lock, err := client.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		// The frozen endpoint is given 1s to answer the open.
		took := time.Since(started)
		t.Logf("granted %s after the Lock call", took.Round(time.Millisecond))
		if latest := 2 * time.Second; took > latest {
			t.Errorf("granted %s after the Lock call, later than %s", took, latest)
		}
		if err := lock.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("all", func(t *testing.T) {
		t.Parallel()
		ctx, name := testContext(t), lockName(t)
		first, second := refusedAddress(t), refusedAddress(t)
		_, err := dialEndpoints(t, []string{first, second}).Lock(ctx, name)
		failure := lockError(t, err, "no endpoint reachable")
		t.Logf("no endpoint reachable: %s", err)
		if !errors.Is(err, lockstream.ErrUnavailable) || !strings.Contains(failure.Message, first) || !strings.Contains(failure.Message, second) {
			t.Errorf("no endpoint reachable: %v, want ErrUnavailable naming both endpoints", err)
		}
	})
}

// Two instances that do not share sessions: the second answers the resume with NOT_FOUND, and
// the lock is lost at once, not at the end of the grace.
func TestLostWhenAnotherInstanceDoesNotKnowTheSession(t *testing.T) {
	t.Parallel()
	ctx, name := testContext(t), lockName(t)
	other := startServer(t)
	first := startProxy(t, shared.address)
	holder, err := dialEndpoints(t, []string{first.address(), other.address}).Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	first.stop()
	await(t, holder.Lost(), "the holder's Lost")
	took := time.Since(stoppedAt)
	t.Logf("lost %s after the endpoint stopped: %s", took.Round(time.Millisecond), holder.Err())
	if err := holder.Err(); !errors.Is(err, lockstream.ErrLost) || !strings.Contains(err.Error(), "does not know the session") {
		t.Errorf("Err %v, want ErrLost saying the other instance does not know the session", err)
	}
	if took >= lockstream.DefaultResumeGrace*9/10 {
		t.Errorf("lost %s after the endpoint stopped: the grace ran out instead of the NOT_FOUND", took)
	}
}

func TestDialEndpointsRejectsABadList(t *testing.T) {
	for _, bad := range []struct {
		endpoints []string
		problem   string
	}{
		{nil, "no endpoints"},
		{[]string{}, "no endpoints"},
		{[]string{"127.0.0.1:1", "localhost:99999"}, `endpoints[1]: address "localhost:99999": port`},
		{[]string{"127.0.0.1:1", "a:1,b:2"}, `endpoints[1]: address "a:1,b:2"`},
		{[]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:1"}, `endpoints[2]: address "127.0.0.1:1" is listed twice (endpoints[0])`},
		{[]string{"locks.internal:1", "LOCKS.internal:1"}, `endpoints[1]: address "LOCKS.internal:1" is listed twice (endpoints[0])`},
	} {
		client, err := lockstream.DialEndpoints(bad.endpoints)
		if !errors.Is(err, lockstream.ErrInvalidArgument) || !strings.Contains(err.Error(), bad.problem) {
			t.Errorf("DialEndpoints(%q): %v, want ErrInvalidArgument saying %q", bad.endpoints, err, bad.problem)
		}
		if client != nil {
			_ = client.Close()
		}
	}
	if _, err := lockstream.DialEndpoints([]string{"127.0.0.1:1"}, lockstream.WithResumeGrace(-time.Second)); !errors.Is(err, lockstream.ErrInvalidArgument) {
		t.Errorf("DialEndpoints with a negative resume grace: %v, want ErrInvalidArgument", err)
	}
	client, err := lockstream.DialEndpoints([]string{"127.0.0.1:1", "dns:///localhost:50051", "[::1]:50051"})
	if err != nil {
		t.Fatal(err)
	}
	_ = client.Close()
}
