// Campaigning: Election.Campaign and its options, the Leadership it returns (the term, its end,
// stepping down), and the Client's record of its candidates for Close.

package lockstream

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

type campaignOptions struct {
	owner       string
	waitTimeout *time.Duration
	onQueued    func(ahead int)
	onInDoubt   func()
	onConfirmed func()
}

// CampaignOption configures one Campaign call.
type CampaignOption func(*campaignOptions)

// WithCampaignOwner names the candidate, for operators' eyes and observers (Leader.Owner; at
// most 256 bytes of UTF-8, no control characters). Default: the client's default owner.
func WithCampaignOwner(owner string) CampaignOption {
	return func(o *campaignOptions) { o.owner = owner }
}

// WithCampaignWaitTimeout gives up after waiting this long to lead, with an error matching
// ErrTimeout (the server counts it; the context passed to Campaign still applies). 0: lead now
// or not at all. Negative: ErrInvalidArgument.
func WithCampaignWaitTimeout(d time.Duration) CampaignOption {
	return func(o *campaignOptions) { o.waitTimeout = &d }
}

// WithOnCampaignQueued is called while the candidate waits, with how many candidates are ahead
// of it (the leader included), each time the number changes. It must not block.
func WithOnCampaignQueued(f func(ahead int)) CampaignOption {
	return func(o *campaignOptions) { o.onQueued = f }
}

// WithOnCampaignInDoubt is called when the leadership becomes in doubt (see
// Leadership.InDoubt), WithOnCampaignConfirmed when it is confirmed again, as WithOnInDoubt and
// WithOnConfirmed are for a lock. Called one at a time, in order, only while it leads (neither
// once its term is over); they must not block.
func WithOnCampaignInDoubt(f func()) CampaignOption {
	return func(o *campaignOptions) { o.onInDoubt = f }
}

// WithOnCampaignConfirmed: see WithOnCampaignInDoubt.
func WithOnCampaignConfirmed(f func()) CampaignOption {
	return func(o *campaignOptions) { o.onConfirmed = f }
}

func (o *campaignOptions) check(value []byte) string {
	if problem := checkLabel("owner", o.owner); problem != "" {
		return problem
	}
	if problem := checkValue(value); problem != "" {
		return problem
	}
	if o.waitTimeout != nil && (*o.waitTimeout < 0 || *o.waitTimeout > MaxWaitTimeout) {
		return "wait timeout " + o.waitTimeout.String() + " is out of range: expected 0 to " + MaxWaitTimeout.String()
	}
	return ""
}

// Campaign joins the election with value (what observers should know of this candidate once
// it leads, e.g. its address; at most 1 KiB) and waits until it leads, as etcd's
// Election.Campaign does; candidates are elected in the order they joined. It returns the
// Leadership, whose Term is the leader's fencing token.
//
// The candidate has a Campaign stream of its own, which keeps it leader for as long as it
// lasts: it is resumed after a break within the client's resume grace, on the next endpoint in
// turn, with the same term (WithResumeGrace, WithHeartbeatInterval and DialEndpoints apply as
// to locks). When ctx ends first, the candidate withdraws and Campaign returns an error
// matching ErrCanceled or ErrTimeout. Every error is an *Error: ErrTimeout after
// WithCampaignWaitTimeout, ErrInvalidArgument for a request the server would refuse (checked
// before sending), ErrFailed when the name is a lock's, ErrUnavailable when the server cannot be
// reached, ErrClosed after Close.
func (e *Election) Campaign(ctx context.Context, value []byte, opts ...CampaignOption) (*Leadership, error) {
	c := e.client
	options := campaignOptions{owner: c.options.owner}
	for _, opt := range opts {
		opt(&options)
	}
	if problem := options.check(value); problem != "" {
		return nil, e.invalid(problem)
	}
	if err := e.check(ctx); err != nil {
		return nil, err
	}
	cand := newCandidate(e, c.options, value, options)
	if !c.enlist(cand) {
		return nil, e.closed()
	}
	go cand.connect()
	go cand.watch()
	select {
	case <-cand.elected:
		return &Leadership{c: cand}, nil
	case <-cand.done:
		select {
		case <-cand.elected:
			return &Leadership{c: cand}, nil // elected, and over since: Done says so
		default:
		}
		return nil, cand.failure()
	case <-ctx.Done():
		// Withdraw (or step down, had it been elected meanwhile) before returning.
		err := e.contextError(ctx.Err())
		cand.withdraw(err)
		return nil, err
	}
}

// Leadership is a term of an election led by this client, from Campaign until it resigns or
// the term is lost. Its methods are safe for concurrent use.
type Leadership struct {
	c *candidate
}

// Name is the election's name.
func (l *Leadership) Name() string { return l.c.election.name }

// Term is the leader's term: its fencing token, greater than every earlier leader's. Pass it
// to what the leader acts on, so that a resource can refuse a deposed leader.
func (l *Leadership) Term() uint64 {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.term
}

// Done is closed when the term is over: lost or taken away (Err says why; the next candidate
// may be elected once the server sees it), resigned (Resign; Err is nil), or ended by the
// Client's Close. A leader cut off from the server for nearly the resume grace (counted from
// the last message heard) is Done before the server can elect another candidate; one deposed
// through the server (Election.Resign, RevokeLock's deadline) is Done before the next candidate
// is told it leads.
func (l *Leadership) Done() <-chan struct{} { return l.c.done }

// Err says why Done was closed: an error matching ErrLost when the term was lost or taken away,
// ErrClosed when the client was closed; nil while it leads, and after Resign.
func (l *Leadership) Err() error {
	select {
	case <-l.c.done:
		return l.c.err
	default:
		return nil
	}
}

// Context is cancelled when the term is over (context.Cause is Err, or an error matching
// ErrNotLeader after Resign) or when someone asks the leader to step down (RevokeLock on the
// election; context.Cause matches ErrRevoked): do the leader's work under it.
func (l *Leadership) Context() context.Context { return l.c.leadCtx }

// ResignRequested is closed at the first request to step down (RevokeLock on the election's
// name); with a deadline, the term is taken away when it passes (Done).
func (l *Leadership) ResignRequested() <-chan struct{} { return l.c.revoke }

// InDoubt reports whether the leadership cannot be vouched for right now: the server's contact
// with its back end is interrupted (nobody else is elected meanwhile), or this client has not
// heard from the server for two heartbeat intervals or its stream broke (the candidate is being
// resumed; it is confirmed again, or lost, within the resume grace). WithOnCampaignInDoubt and
// WithOnCampaignConfirmed tell the changes.
func (l *Leadership) InDoubt() bool {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.serverDoubt || l.c.pathDoubt
}

// Proclaim replaces the leader's value (Election.Proclaim with this term). Once the term was
// lost it returns the loss (Err: ErrLost, or ErrClosed), as Resign does, with nothing sent; once
// the term is over otherwise (it resigned), an error matching ErrNotLeader.
func (l *Leadership) Proclaim(ctx context.Context, value []byte) error {
	if err := l.Err(); err != nil {
		return err
	}
	return l.c.election.Proclaim(ctx, l.Term(), value)
}

// Resign steps down and waits for the server to confirm: the next candidate is elected. It
// returns the loss if the term was lost first (errors.Is(err, ErrLost)), an error matching
// ErrNotLeader if it resigned already, ErrClosed if Close ended it.
func (l *Leadership) Resign(ctx context.Context) error {
	c := l.c
	select {
	case <-c.done:
		if c.err != nil {
			return c.err
		}
		return c.election.notLeader("it resigned already")
	default:
	}
	c.stepDown()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return c.election.contextError(ctx.Err())
	}
}

// enlist records a candidate for Close; false once the client is closed.
func (c *Client) enlist(cand *candidate) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.candidates == nil {
		c.candidates = map[*candidate]struct{}{}
	}
	c.candidates[cand] = struct{}{}
	return true
}

// discharge forgets a candidate whose candidacy is over.
func (c *Client) discharge(cand *candidate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.candidates, cand)
}

// candidatesNow are the client's candidates. Called with mu held.
func (c *Client) candidatesNow() []*candidate { return slices.Collect(maps.Keys(c.candidates)) }

// closeCandidates is Close's for each candidate, all at once: each resigns (at most 5s).
func closeCandidates(candidates []*candidate) {
	var wg sync.WaitGroup
	for _, cand := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cand.close()
		}()
	}
	wg.Wait()
}
