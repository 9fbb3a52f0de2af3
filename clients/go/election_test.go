// Elections against a real server: Campaign elects in order with growing terms, a deposed
// leader is Done before the next is elected, Observe tells every term in order (live and
// replayed), Leader, Proclaim and Resign act on the current term only, a cancelled wait
// withdraws and Close resigns.

package lockstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
)

func campaign(t *testing.T, e *lockstream.Election, value string, opts ...lockstream.CampaignOption) *lockstream.Leadership {
	t.Helper()
	leadership, err := e.Campaign(testContext(t), []byte(value), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return leadership
}

// campaignInBackground starts a Campaign that waits, and returns once the candidate is queued;
// the outcome comes on the channel.
func campaignInBackground(t *testing.T, e *lockstream.Election, value string) <-chan campaignOutcome {
	t.Helper()
	isQueued := make(chan struct{})
	var once sync.Once
	outcome := make(chan campaignOutcome, 1)
	go func() {
		leadership, err := e.Campaign(testContext(t), []byte(value),
			lockstream.WithOnCampaignQueued(func(int) { once.Do(func() { close(isQueued) }) }))
		outcome <- campaignOutcome{leadership, err}
	}()
	select {
	case <-isQueued:
	case result := <-outcome:
		t.Fatalf("the campaign ended without waiting: %v", result.err)
	case <-time.After(patience):
		t.Fatal("the candidate was not queued")
	}
	return outcome
}

type campaignOutcome struct {
	leadership *lockstream.Leadership
	err        error
}

func elected(t *testing.T, outcome <-chan campaignOutcome) *lockstream.Leadership {
	t.Helper()
	select {
	case result := <-outcome:
		if result.err != nil {
			t.Fatal(result.err)
		}
		return result.leadership
	case <-time.After(patience):
		t.Fatal("the candidate was not elected")
	}
	return nil
}

// next is the next event of an Observe, failing the test if none comes.
func next(t *testing.T, events <-chan lockstream.ElectionEvent) lockstream.ElectionEvent {
	t.Helper()
	select {
	case event, open := <-events:
		if !open {
			t.Fatal("the observation ended")
		}
		return event
	case <-time.After(patience):
		t.Fatal("no event")
	}
	return lockstream.ElectionEvent{}
}

// show is an event as the tests compare them: its kind and the fields it sets.
func show(event lockstream.ElectionEvent) string {
	switch event.Kind {
	case lockstream.EventTerm:
		return fmt.Sprintf("term %d %q by %q", event.Term, event.Value, event.Owner)
	case lockstream.EventProclaimed:
		return fmt.Sprintf("proclaimed %d %q", event.Term, event.Value)
	case lockstream.EventVacant:
		return fmt.Sprintf("vacant after %d", event.AfterTerm)
	case lockstream.EventHistoryGone, lockstream.EventSkipped:
		return fmt.Sprintf("%s from %d", event.Kind, event.FirstTerm)
	}
	return fmt.Sprintf("%s: %v", event.Kind, event.Err())
}

func TestCampaignElectsAndReturnsTheTerm(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	client := dial(t, shared.address, lockstream.WithDefaultOwner("node-1"))
	e := client.Election(name)
	leadership := campaign(t, e, "10.0.0.1:8080")
	if leadership.Term() == 0 || leadership.Name() != name {
		t.Fatalf("term %d of %q", leadership.Term(), leadership.Name())
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if leader.Term != leadership.Term() || string(leader.Value) != "10.0.0.1:8080" || leader.Owner != "node-1" ||
		time.Since(leader.ElectedAt) > time.Minute {
		t.Fatalf("Leader %+v, want term %d", leader, leadership.Term())
	}
	// The term is the election's fencing token, as a lock's token is.
	valid, err := client.RPC().CheckToken(ctx, &pb.CheckTokenRequest{Name: name, FencingToken: leadership.Term()})
	if err != nil || !valid.GetHeld() {
		t.Fatalf("CheckToken of the term: %v, %v", valid, err)
	}
	if err := leadership.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	await(t, leadership.Done(), "Done after Resign")
	if leadership.Err() != nil {
		t.Fatalf("Err after Resign: %v", leadership.Err())
	}
	if cause := context.Cause(leadership.Context()); !errors.Is(cause, lockstream.ErrNotLeader) {
		t.Fatalf("the leadership's context after Resign: %v", cause)
	}
	if err := leadership.Resign(ctx); !errors.Is(err, lockstream.ErrNotLeader) {
		t.Fatalf("a second Resign: %v, want ErrNotLeader", err)
	}
}

func TestNextCandidateIsElectedAfterTheLeaderResigns(t *testing.T) {
	name := lockName(t)
	first := campaign(t, dial(t, shared.address).Election(name), "first")
	secondOutcome := campaignInBackground(t, dial(t, shared.address).Election(name), "second")
	thirdOutcome := campaignInBackground(t, dial(t, shared.address).Election(name), "third")
	if err := first.Resign(testContext(t)); err != nil {
		t.Fatal(err)
	}
	second := elected(t, secondOutcome)
	if err := second.Resign(testContext(t)); err != nil {
		t.Fatal(err)
	}
	third := elected(t, thirdOutcome)
	if !(first.Term() < second.Term() && second.Term() < third.Term()) {
		t.Fatalf("terms %d, %d, %d: want them growing", first.Term(), second.Term(), third.Term())
	}
	if err := third.Resign(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// Resign through another client deposes the leader, which hears the end of its stream before
// the next candidate's Campaign returns: the two candidates share the client's connection, so
// the end (a trailer, noted by the connection's reader as it arrives) comes before the next
// candidate's `elected` exactly when the server sent it first. Done is closed then, with the
// server's verdict (ErrLost, ABORTED by Resign: not a silence running out), and the stale term
// is refused from then on. (Done itself is closed by the leader's own goroutine, which the
// scheduler may run a fraction of a millisecond after the next candidate's.)
func TestResignByAnotherClientDeposesTheLeaderFirst(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	ends := &campaignEnds{}
	candidates := dial(t, shared.address, lockstream.WithDialOptions(grpc.WithStatsHandler(ends)))
	leadership := campaign(t, candidates.Election(name), "deposed")
	nextOutcome := campaignInBackground(t, candidates.Election(name), "next")
	operator := dial(t, shared.address).Election(name)
	if err := operator.Resign(ctx, leadership.Term()); err != nil {
		t.Fatal(err)
	}
	successor := elected(t, nextOutcome)
	if ended := ends.count.Load(); ended != 1 {
		t.Fatalf("%d Campaign streams had ended when the next candidate's Campaign returned, want the deposed leader's", ended)
	}
	await(t, leadership.Done(), "the deposed leader's Done")
	if err := leadership.Err(); !errors.Is(err, lockstream.ErrLost) || codeOf(err) != codes.Aborted || !strings.Contains(err.Error(), "Resign") {
		t.Fatalf("Err of the deposed leader: %v, want ErrLost (ABORTED, by Resign)", err)
	}
	// Resign is a revocation with no time to comply: the leader hears the request first.
	if !errors.Is(context.Cause(leadership.Context()), lockstream.ErrRevoked) {
		t.Fatalf("the deposed leadership's context: %v, want ErrRevoked", context.Cause(leadership.Context()))
	}
	if successor.Term() <= leadership.Term() {
		t.Fatalf("the next term %d is not after %d", successor.Term(), leadership.Term())
	}
	if err := leadership.Resign(ctx); !errors.Is(err, lockstream.ErrLost) {
		t.Fatalf("Resign of a deposed leader: %v, want its loss", err)
	}
	if err := leadership.Proclaim(ctx, []byte("late")); !errors.Is(err, lockstream.ErrLost) {
		t.Fatalf("Proclaim of a deposed leader: %v, want its loss", err)
	}
	if err := successor.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// campaignEnds counts the Campaign streams whose end (trailer) the connection's reader has
// received: a stats.Handler, called on the reader's goroutine before it reads any later frame.
type campaignEnds struct{ count atomic.Int32 }

type methodKey struct{}

func (h *campaignEnds) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (h *campaignEnds) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ended := s.(*stats.InTrailer); ended && ctx.Value(methodKey{}) == pb.ElectionService_Campaign_FullMethodName {
		h.count.Add(1)
	}
}

func (h *campaignEnds) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h *campaignEnds) HandleConn(context.Context, stats.ConnStats) {}

func codeOf(err error) codes.Code {
	var failure *lockstream.Error
	if errors.As(err, &failure) {
		return failure.Code
	}
	return codes.Unknown
}

func TestObserveTellsEveryTermInOrder(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	e := dial(t, shared.address).Election(name)
	events := e.Observe(ctx)
	var seen []string
	seen = append(seen, show(next(t, events)))
	a := campaign(t, e, "a", lockstream.WithCampaignOwner("A"))
	seen = append(seen, show(next(t, events)))
	if err := a.Proclaim(ctx, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, show(next(t, events)))
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, show(next(t, events)))
	b := campaign(t, e, "b")
	seen = append(seen, show(next(t, events)))
	want := []string{
		"vacant after 0",
		fmt.Sprintf("term %d %q by %q", a.Term(), "a", "A"),
		fmt.Sprintf("proclaimed %d %q", a.Term(), "a2"),
		fmt.Sprintf("vacant after %d", a.Term()),
		fmt.Sprintf("term %d %q by %q", b.Term(), "b", ""),
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	_ = b.Resign(ctx)
}

func TestObserveFromTermReplaysTheHistory(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	e := dial(t, shared.address).Election(name)
	var terms []uint64
	for i := range 4 {
		leadership := campaign(t, e, fmt.Sprintf("c%d", i))
		if i == 2 {
			if err := leadership.Proclaim(ctx, []byte("c2 again")); err != nil {
				t.Fatal(err)
			}
		}
		terms = append(terms, leadership.Term())
		if err := leadership.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	observeCtx, stop := context.WithCancel(ctx)
	events := e.Observe(observeCtx, lockstream.FromTerm(terms[1]))
	var seen []string
	for range 5 {
		seen = append(seen, show(next(t, events)))
	}
	want := []string{
		fmt.Sprintf("term %d %q by %q", terms[1], "c1", ""),
		fmt.Sprintf("term %d %q by %q", terms[2], "c2", ""),
		fmt.Sprintf("proclaimed %d %q", terms[2], "c2 again"),
		fmt.Sprintf("term %d %q by %q", terms[3], "c3", ""),
		fmt.Sprintf("vacant after %d", terms[3]),
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// Cancelling ends the observation: the channel is closed, with no failure.
	stop()
	for event := range events {
		t.Fatalf("an event after the context ended: %s", show(event))
	}
}

func TestLeaderOfAVacantElection(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	e := dial(t, shared.address).Election(name)
	_, err := e.Leader(ctx)
	var failure *lockstream.Error
	if !errors.Is(err, lockstream.ErrNoLeader) || !errors.As(err, &failure) || failure.Code != codes.NotFound || failure.Lock != name {
		t.Fatalf("Leader of an election nobody campaigned in: %v, want ErrNoLeader (NOT_FOUND)", err)
	}
	if want := fmt.Sprintf("lockstream: election %q: nobody leads", name); err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	leadership := campaign(t, e, "")
	if err := leadership.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, lockstream.ErrNoLeader) {
		t.Fatalf("Leader after the leader resigned: %v, want ErrNoLeader", err)
	}
}

func TestStaleTermsAreRefused(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	e := dial(t, shared.address).Election(name)
	leadership := campaign(t, e, "current")
	term := leadership.Term()
	for _, stale := range []uint64{term - 1, term + 1, 0} {
		err := e.Proclaim(ctx, stale, []byte("stale"))
		if !errors.Is(err, lockstream.ErrNotLeader) || codeOf(err) != codes.FailedPrecondition {
			t.Fatalf("Proclaim with term %d: %v, want ErrNotLeader", stale, err)
		}
		// The name once, and the server's later mention of it as "the election".
		if want := fmt.Sprintf("lockstream: election %q: term %d is not the current leader's in the election: it ended, or was never granted there", name, stale); err.Error() != want {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
		if err := e.Resign(ctx, stale); !errors.Is(err, lockstream.ErrNotLeader) {
			t.Fatalf("Resign with term %d: %v, want ErrNotLeader", stale, err)
		}
	}
	if leader, err := e.Leader(ctx); err != nil || string(leader.Value) != "current" {
		t.Fatalf("Leader after stale calls: %+v, %v", leader, err)
	}
	if err := leadership.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leadership.Proclaim(ctx, []byte("late")); !errors.Is(err, lockstream.ErrNotLeader) {
		t.Fatalf("Proclaim after Resign: %v, want ErrNotLeader", err)
	}
	if err := e.Resign(ctx, term); !errors.Is(err, lockstream.ErrNotLeader) {
		t.Fatalf("Resign of an ended term: %v, want ErrNotLeader", err)
	}
	if err := e.Proclaim(ctx, term, make([]byte, lockstream.MaxValueBytes+1)); !errors.Is(err, lockstream.ErrInvalidArgument) {
		t.Fatalf("Proclaim of a value over the limit: %v, want ErrInvalidArgument", err)
	}
}

// What the server refuses, and what the client refuses before sending.
func TestCampaignRefusals(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	client := dial(t, shared.address)
	e := client.Election(name)
	leadership := campaign(t, e, "")
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		if _, err := e.Campaign(ctx, nil, lockstream.WithCampaignWaitTimeout(wait)); !errors.Is(err, lockstream.ErrTimeout) || codeOf(err) != codes.DeadlineExceeded {
			t.Fatalf("a candidate that waits %s: %v, want ErrTimeout", wait, err)
		}
	}
	_ = leadership.Resign(ctx)

	lock, err := client.Lock(ctx, name+"/lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Election(name+"/lock").Campaign(ctx, nil); !errors.Is(err, lockstream.ErrFailed) || codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("a campaign for a lock's name: %v, want ErrFailed (FAILED_PRECONDITION)", err)
	}
	_ = lock.Unlock(ctx)

	for _, bad := range []struct {
		name  string
		value []byte
		opts  []lockstream.CampaignOption
	}{
		{"", nil, nil},
		{name, make([]byte, lockstream.MaxValueBytes+1), nil},
		{name, nil, []lockstream.CampaignOption{lockstream.WithCampaignWaitTimeout(-time.Second)}},
		{name, nil, []lockstream.CampaignOption{lockstream.WithCampaignOwner("bad\nowner")}},
	} {
		if _, err := client.Election(bad.name).Campaign(ctx, bad.value, bad.opts...); !errors.Is(err, lockstream.ErrInvalidArgument) {
			t.Fatalf("campaign %q: %v, want ErrInvalidArgument", bad.name, err)
		}
	}
}

// A waiting candidate whose context ends withdraws before Campaign returns.
func TestCancelledCampaignWithdraws(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	leadership := campaign(t, dial(t, shared.address).Election(name), "")
	client := dial(t, shared.address)
	waitCtx, cancel := context.WithCancel(ctx)
	isQueued := make(chan struct{})
	go func() { <-isQueued; cancel() }()
	_, err := client.Election(name).Campaign(waitCtx, nil, lockstream.WithOnCampaignQueued(func(int) { close(isQueued) }))
	if !errors.Is(err, lockstream.ErrCanceled) {
		t.Fatalf("a cancelled campaign: %v, want ErrCanceled", err)
	}
	if waiters := describe(t, client, name).GetWaiters(); len(waiters) != 0 {
		t.Fatalf("waiters after the withdrawal: %v", waiters)
	}
	_ = leadership.Resign(ctx)
}

// Close resigns: the leadership ends with ErrClosed, the next candidate is elected, and later
// calls fail with ErrClosed.
func TestCloseResigns(t *testing.T) {
	ctx, name := testContext(t), lockName(t)
	client, err := lockstream.Dial(shared.address)
	if err != nil {
		t.Fatal(err)
	}
	leadership := campaign(t, client.Election(name), "")
	nextOutcome := campaignInBackground(t, dial(t, shared.address).Election(name), "")
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	await(t, leadership.Done(), "Done after Close")
	if !errors.Is(leadership.Err(), lockstream.ErrClosed) {
		t.Fatalf("Err after Close: %v", leadership.Err())
	}
	successor := elected(t, nextOutcome)
	_ = successor.Resign(ctx)
	if _, err := client.Election(name).Campaign(ctx, nil); !errors.Is(err, lockstream.ErrClosed) {
		t.Fatalf("Campaign after Close: %v", err)
	}
	if _, err := client.Election(name).Leader(ctx); !errors.Is(err, lockstream.ErrClosed) {
		t.Fatalf("Leader after Close: %v", err)
	}
	event := next(t, client.Election(name).Observe(ctx))
	if event.Kind != lockstream.EventFailed || !errors.Is(event.Err(), lockstream.ErrClosed) {
		t.Fatalf("Observe after Close: %s", show(event))
	}
}
