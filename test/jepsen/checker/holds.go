package main

import (
	"fmt"
	"sort"
)

// Reasons a believed hold ended.
const (
	EndReleased = "released"   // release invoked and acknowledged
	EndLost     = "lost"       // a lost event (with --doubt-ends-hold, also an in_doubt that ended in lost)
	EndInDoubt  = "in doubt"   // --doubt-ends-hold only: an in_doubt never followed by confirmed
	EndUnknown  = "unknown"    // release invoked, no ok (fail, info or never completed)
	EndHeld     = "still held" // believed until the end of the history
)

// A Hold is one believed hold: from the acquire's ok until the client stopped believing.
type Hold struct {
	ID        int     `json:"id"`
	Lock      string  `json:"lock"`
	Client    string  `json:"client"`
	Mode      string  `json:"mode"`
	Limit     int     `json:"limit,omitempty"`
	Token     uint64  `json:"token,string"`
	Invoke    int64   `json:"invoke_t"` // acquire invoke
	Grant     int64   `json:"grant_t"`  // acquire ok: the client believes from here
	Ended     bool    `json:"ended"`    // false: still believed when the history ends
	Stop      int64   `json:"stop_t"`   // the client stopped believing (if Ended)
	Upper     int64   `json:"upper_t"`  // the hold ended in the model no later than this (if !UpperInf)
	UpperInf  bool    `json:"upper_inf"`
	Reason    string  `json:"reason"`
	GrantLine int     `json:"grant_line"`
	StopLine  int     `json:"stop_line,omitempty"`
	Doubts    []Doubt `json:"doubts,omitempty"` // in_doubt spans inside the hold
}

// A Doubt is an in_doubt inside a believed hold: until its confirmed, or, never confirmed,
// until the hold ended (or the history did). It does not end the hold unless --doubt-ends-hold.
type Doubt struct {
	From      int64 `json:"from_t"`
	To        int64 `json:"to_t"`
	Confirmed bool  `json:"confirmed"`
}

// Options are the model's choices.
type Options struct {
	// DoubtEndsHold: an in_doubt not followed by confirmed ends the hold at the in_doubt (a
	// careful client that stops using the lock when in doubt). By default a hold is believed
	// until the client releases it or is told lost: the strict loss rule.
	DoubtEndsHold bool
}

// A TokenCheck is an answered check of a fencing token: at some point inside [Invoke, Done], was
// the lock held with Token? Checks that failed, were info, or never completed are dropped.
type TokenCheck struct {
	ID     int    `json:"id"`
	Lock   string `json:"lock"`
	Client string `json:"client"`
	Token  uint64 `json:"token,string"`
	Invoke int64  `json:"invoke_t"`
	Done   int64  `json:"done_t"`
	Held   bool   `json:"held"`
	Line   int    `json:"line"`
}

// End is when the client stopped believing, or never (math.MaxInt64) for a hold still believed.
func (h *Hold) End() int64 {
	if !h.Ended {
		return 1<<63 - 1
	}
	return h.Stop
}

// An Attempt is an acquire that made no one a believer: failed, unknown, or never completed.
type Attempt struct {
	Lock    string `json:"lock"`
	Client  string `json:"client"`
	Mode    string `json:"mode"`
	Invoke  int64  `json:"invoke_t"`
	Done    int64  `json:"done_t"`  // completion time; the invoke time when it never completed
	Outcome string `json:"outcome"` // fail | info | open
	Error   string `json:"error,omitempty"`
}

// History is a parsed, paired history turned into believed holds.
type History struct {
	Events     []Event
	T0, TMax   int64
	Holds      []*Hold
	Attempts   []Attempt
	Checks     []*TokenCheck
	Dropped    int // checks that failed, were info, or never completed
	Locks      []string
	Clients    []string
	Operations int // every invoke plus every event
	Stray      int // events and releases that applied to no believed hold
	Options    Options
	// Elections: Observe streams and Proclaim/Resign calls (election.go), in time order.
	Streams   []*ObserveStream
	TermCalls []*TermCall
	// Records: increments and final reads of counters (records.go), in time order.
	Increments []*Increment
	Finals     []*FinalRead
}

type pairedOp struct {
	invoke *Event
	done   *Event
}

type clientLock struct {
	hold      *Hold
	inDoubt   bool
	doubt     int64
	doubtLine int
}

// BuildHistory pairs invokes with completions and derives the believed holds per (client, lock).
func BuildHistory(events []Event, name string, opt Options) (*History, error) {
	h := &History{Events: events, T0: events[0].T, TMax: events[0].T, Options: opt}
	order := make([]*Event, len(events))
	for i := range events {
		order[i] = &events[i]
		h.T0 = min(h.T0, events[i].T)
		h.TMax = max(h.TMax, events[i].T)
	}
	// Time order; lines written at the same nanosecond keep their order in the file.
	sort.SliceStable(order, func(i, j int) bool { return order[i].T < order[j].T })

	fail := func(e *Event, format string, a ...any) error {
		return &InputError{File: name, Line: e.Line, Msg: fmt.Sprintf(format, a...)}
	}
	ops := map[string]*pairedOp{}
	key := func(e *Event) string { return fmt.Sprintf("%s\x00%d", e.Client, e.Op) }
	for _, e := range order {
		switch e.Type {
		case "invoke":
			h.Operations++
			if p, dup := ops[key(e)]; dup {
				return nil, fail(e, "client %s reuses op %d (first invoked on line %d)", e.Client, e.Op, p.invoke.Line)
			}
			ops[key(e)] = &pairedOp{invoke: e}
		case "event":
			h.Operations++
		default:
			p := ops[key(e)]
			if p == nil {
				return nil, fail(e, "%s of op %d of client %s with no earlier invoke", e.Type, e.Op, e.Client)
			}
			if p.done != nil {
				return nil, fail(e, "op %d of client %s already completed on line %d", e.Op, e.Client, p.done.Line)
			}
			if p.invoke.F != e.F || p.invoke.Lock != e.Lock {
				return nil, fail(e, "completion (%s %s) does not match its invoke on line %d (%s %s)",
					e.F, e.Lock, p.invoke.Line, p.invoke.F, p.invoke.Lock)
			}
			if e.Mode != "" && e.Mode != p.invoke.Mode && p.invoke.F == "acquire" {
				return nil, fail(e, "mode %s does not match its invoke on line %d (%s)", e.Mode, p.invoke.Line, p.invoke.Mode)
			}
			if p.invoke.F == "check" && e.HasTok && e.Token != p.invoke.Token {
				return nil, fail(e, "token %d does not match its check invoke on line %d (%d)", e.Token, p.invoke.Line, p.invoke.Token)
			}
			p.done = e
		}
	}

	states := map[[2]string]*clientLock{}
	locks, clients := map[string]bool{}, map[string]bool{}
	// endHold ends the believed hold; an in_doubt still open is closed at the stop.
	endHold := func(st *clientLock, stop int64, line int, reason string, upper int64, upperInf bool) {
		hd := st.hold
		if st.inDoubt && !opt.DoubtEndsHold {
			hd.Doubts = append(hd.Doubts, Doubt{From: st.doubt, To: stop})
		}
		hd.Ended, hd.Stop, hd.StopLine, hd.Reason = true, stop, line, reason
		hd.Upper, hd.UpperInf = upper, upperInf
		st.hold, st.inDoubt = nil, false
	}
	// A client holds at most one hold of a lock. With --doubt-ends-hold, an acquire while the
	// previous hold is in doubt means the client gave that hold up.
	giveUp := func(st *clientLock, e *Event) error {
		if st.hold == nil {
			return nil
		}
		if !st.inDoubt || !opt.DoubtEndsHold {
			doing := map[string]string{"invoke": "invokes", "ok": "is granted"}[e.Type]
			if st.inDoubt {
				return fail(e, "client %s %s acquire of %s while it still holds it (granted on line %d, in doubt since line %d "+
					"but never told lost): a hold lasts until it is released or lost, unless --doubt-ends-hold",
					e.Client, doing, e.Lock, st.hold.GrantLine, st.doubtLine)
			}
			return fail(e, "client %s %s acquire of %s while it still holds it (granted on line %d): "+
				"a client holds at most one hold of a lock", e.Client, doing, e.Lock, st.hold.GrantLine)
		}
		endHold(st, st.doubt, st.doubtLine, EndInDoubt, 0, true)
		return nil
	}
	for _, e := range order {
		locks[e.Lock], clients[e.Client] = true, true
		if electionF[e.F] || recordsF[e.F] {
			continue // buildElections and buildRecords, below
		}
		if e.F == "check" {
			if e.Type == "invoke" {
				if p := ops[key(e)]; p.done == nil {
					h.Dropped++
				}
			} else if e.Type == "ok" {
				inv := ops[key(e)].invoke
				h.Checks = append(h.Checks, &TokenCheck{ID: len(h.Checks), Lock: e.Lock, Client: e.Client, Token: inv.Token,
					Invoke: inv.T, Done: e.T, Held: e.Held, Line: e.Line})
			} else {
				h.Dropped++
			}
			continue
		}
		k := [2]string{e.Client, e.Lock}
		st := states[k]
		if st == nil {
			st = &clientLock{}
			states[k] = st
		}
		switch {
		case e.F == "acquire" && e.Type == "invoke":
			if err := giveUp(st, e); err != nil {
				return nil, err
			}
			if p := ops[key(e)]; p.done == nil {
				h.Attempts = append(h.Attempts, Attempt{Lock: e.Lock, Client: e.Client, Mode: e.Mode,
					Invoke: e.T, Done: e.T, Outcome: "open"})
			}
		case e.F == "acquire":
			inv := ops[key(e)].invoke
			if e.Type != "ok" {
				h.Attempts = append(h.Attempts, Attempt{Lock: e.Lock, Client: e.Client, Mode: inv.Mode,
					Invoke: inv.T, Done: e.T, Outcome: e.Type, Error: e.Error})
				continue
			}
			if err := giveUp(st, e); err != nil {
				return nil, err
			}
			limit := inv.Limit
			if limit == 0 {
				limit = e.Limit
			}
			st.hold = &Hold{ID: len(h.Holds), Lock: e.Lock, Client: e.Client, Mode: inv.Mode, Limit: limit,
				Token: e.Token, Invoke: inv.T, Grant: e.T, GrantLine: e.Line}
			h.Holds = append(h.Holds, st.hold)
		case e.F == "release" && e.Type == "invoke":
			if st.hold == nil {
				h.Stray++
				continue
			}
			stop, line := e.T, e.Line
			lenientDoubt := st.inDoubt && opt.DoubtEndsHold
			if lenientDoubt {
				stop, line = st.doubt, st.doubtLine
			}
			done := ops[key(e)].done
			switch {
			case done != nil && done.Type == "ok":
				endHold(st, stop, line, EndReleased, done.T, false)
			case lenientDoubt:
				endHold(st, stop, line, EndInDoubt, 0, true)
			default:
				endHold(st, stop, line, EndUnknown, 0, true)
			}
		case e.F == "release":
			// Completions were read with their invoke.
		case e.F == "in_doubt":
			if st.hold == nil || st.inDoubt {
				h.Stray++
				continue
			}
			st.inDoubt, st.doubt, st.doubtLine = true, e.T, e.Line
		case e.F == "confirmed":
			if st.hold == nil || !st.inDoubt {
				h.Stray++
				continue
			}
			st.hold.Doubts = append(st.hold.Doubts, Doubt{From: st.doubt, To: e.T, Confirmed: true})
			st.inDoubt = false
		case e.F == "lost":
			if st.hold == nil {
				h.Stray++
				continue
			}
			stop, line := e.T, e.Line
			if st.inDoubt && opt.DoubtEndsHold {
				stop, line = st.doubt, st.doubtLine
			}
			endHold(st, stop, line, EndLost, 0, true)
		}
	}
	for _, st := range states {
		switch {
		case st.hold == nil:
		case st.inDoubt && opt.DoubtEndsHold:
			endHold(st, st.doubt, st.doubtLine, EndInDoubt, 0, true)
		default:
			if st.inDoubt {
				st.hold.Doubts = append(st.hold.Doubts, Doubt{From: st.doubt, To: h.TMax})
			}
			st.hold.Reason = EndHeld
			st.hold = nil
		}
	}
	if err := buildElections(h, order, ops, key, fail); err != nil {
		return nil, err
	}
	if err := buildRecords(h, order, ops, key, fail); err != nil {
		return nil, err
	}
	for l := range locks {
		h.Locks = append(h.Locks, l)
	}
	for c := range clients {
		h.Clients = append(h.Clients, c)
	}
	sort.Strings(h.Locks)
	sort.Strings(h.Clients)
	return h, nil
}
