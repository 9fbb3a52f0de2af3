// Elections: the driver's election commands (campaign, resign, proclaim, leader, the terms'
// proclaim and resign, observe) and the observations they make.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

// elections performs the election commands.
func (d *driver) elections(c command) {
	id := map[string]any{"id": c.ID}
	switch c.Op {
	case "campaign":
		// A context is how a Go caller gives up a wait.
		ctx, cancel := context.WithCancel(context.Background())
		d.mu.Lock()
		d.waits[c.ID] = cancel
		d.mu.Unlock()
		leadership, err := d.client.Election(c.Name).Campaign(ctx, []byte(*c.Value),
			lockstream.WithOnCampaignQueued(func(ahead int) { say("queued", map[string]any{"id": c.ID, "ahead": ahead}) }),
			lockstream.WithOnCampaignInDoubt(func() { say("in-doubt", id) }),
			lockstream.WithOnCampaignConfirmed(func() { say("confirmed", id) }))
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		d.mu.Lock()
		d.leaderships[c.ID] = leadership
		d.mu.Unlock()
		say("elected", map[string]any{"id": c.ID, "term": strconv.FormatUint(leadership.Term(), 10)})
		go func() {
			<-leadership.Done()
			// Done is closed by a resignation too (Err nil): only a loss is told.
			if err := leadership.Err(); err != nil {
				sayFailure("lost", c.ID, err)
			}
		}()
	case "resign", "proclaim":
		d.mu.Lock()
		leadership := d.leaderships[c.ID]
		d.mu.Unlock()
		if c.Op == "resign" {
			if err := leadership.Resign(context.Background()); err != nil {
				sayFailure("error", c.ID, err)
				return
			}
			say("resigned", id)
			return
		}
		if err := leadership.Proclaim(context.Background(), []byte(*c.Value)); err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("proclaimed", id)
	case "leader":
		leader, err := d.client.Election(c.Name).Leader(context.Background())
		switch {
		case errors.Is(err, lockstream.ErrNoLeader):
			// Nobody leads: the answer, as etcd's ErrElectionNoLeader.
			say("no-leader", id)
		case err != nil:
			sayFailure("error", c.ID, err)
		default:
			say("leader", map[string]any{"id": c.ID, "term": strconv.FormatUint(leader.Term, 10), "value": string(leader.Value)})
		}
	case "proclaim-term", "resign-term":
		term, err := strconv.ParseUint(c.Term, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "driver: bad term:", err)
			os.Exit(2)
		}
		election := d.client.Election(c.Name)
		if c.Op == "proclaim-term" {
			if err := election.Proclaim(context.Background(), term, []byte(*c.Value)); err != nil {
				sayFailure("error", c.ID, err)
				return
			}
			say("proclaimed", id)
			return
		}
		if err := election.Resign(context.Background(), term); err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("resigned", id)
	case "observe":
		var options []lockstream.ObserveOption
		if c.FromTerm != nil {
			from, err := strconv.ParseUint(*c.FromTerm, 10, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, "driver: bad fromTerm:", err)
				os.Exit(2)
			}
			options = append(options, lockstream.FromTerm(from))
		}
		// Cancelling the context stops observing.
		ctx, cancel := context.WithCancel(context.Background())
		d.mu.Lock()
		d.observers[c.ID] = cancel
		d.mu.Unlock()
		for event := range d.client.Election(c.Name).Observe(ctx, options...) {
			if event.Kind == lockstream.EventFailed {
				f := failureOf(event.Err())
				say("observe-ended", map[string]any{"id": c.ID, "error": f})
				return
			}
			say("observed", observed(c.ID, event))
		}
		say("observe-ended", map[string]any{"id": c.ID, "error": nil})
	case "stop-observe":
		d.mu.Lock()
		cancel := d.observers[c.ID]
		d.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

// observed is an election event as the protocol's `observed` says it.
func observed(id string, event lockstream.ElectionEvent) map[string]any {
	fields := map[string]any{"id": id}
	decimal := func(term uint64) string { return strconv.FormatUint(term, 10) }
	switch event.Kind {
	case lockstream.EventTerm:
		fields["what"], fields["term"], fields["value"] = "term", decimal(event.Term), string(event.Value)
	case lockstream.EventProclaimed:
		fields["what"], fields["term"], fields["value"] = "proclaimed", decimal(event.Term), string(event.Value)
	case lockstream.EventVacant:
		fields["what"], fields["term"] = "vacant", decimal(event.AfterTerm)
	case lockstream.EventHistoryGone:
		fields["what"], fields["term"] = "history-gone", decimal(event.FirstTerm)
	case lockstream.EventSkipped:
		fields["what"], fields["term"] = "skipped", decimal(event.FirstTerm)
	default:
		fields["what"] = event.Kind.String()
	}
	return fields
}
