package main

// Elections (README: "Elections"). A candidate's terms are holds of the election's name as a
// write lock, with the term as the token, so the lock model and the direct check judge them
// like any mutex. What is judged here:
//
//   - every Observe stream's sequence against the reference (one stream that replayed the
//     whole history at the end): terms strictly increasing, none of the history's terms left
//     out between two told (or between a stream's from_term and its first term), none told that
//     the history does not have, `vacant {after_term: T}` only right after term T, `proclaimed`
//     only for the term last told, and `history_gone`/`skipped` only where the history was pruned;
//   - every term a candidate was told it leads (`elected`, an acquire ok) is in the history;
//   - every Proclaim and Resign that named a term the history shows was over when it was asked
//     was refused with FAILED_PRECONDITION.

import (
	"fmt"
	"sort"
	"strings"
)

// electionF are the history's election lines (the rest are the lock model's).
var electionF = map[string]bool{"observe": true, "proclaim": true, "resign": true,
	"term": true, "proclaimed": true, "vacant": true, "history_gone": true, "skipped": true}

// An ObserveStream is one Observe call and what it was told, in order.
type ObserveStream struct {
	ID        int    `json:"id"`
	Lock      string `json:"election"`
	Client    string `json:"client"`
	Op        int64  `json:"op"`
	FromTerm  uint64 `json:"from_term,string,omitempty"`
	HasFrom   bool   `json:"has_from_term"`
	Reference bool   `json:"reference,omitempty"`
	Invoke    int64  `json:"invoke_t"`
	Done      int64  `json:"done_t"`  // its completion; the invoke time when it never completed
	Outcome   string `json:"outcome"` // ok (cancelled by its client) | fail | info | open
	Error     string `json:"error,omitempty"`
	Told      []Told `json:"told"`
	Line      int    `json:"line"`
}

// Told is one event of an Observe stream, at the time its client received it.
type Told struct {
	T    int64  `json:"t"`
	Kind string `json:"kind"`        // term | proclaimed | vacant | history_gone | skipped
	Term uint64 `json:"term,string"` // the term; a vacant's after_term; a history_gone's or skipped's first_term
	Line int    `json:"line"`
}

// A TermCall is one Proclaim or Resign naming a term.
type TermCall struct {
	ID      int    `json:"id"`
	Lock    string `json:"election"`
	Client  string `json:"client"`
	F       string `json:"f"` // proclaim | resign
	Term    uint64 `json:"term,string"`
	Stale   bool   `json:"stale"` // the client believed the term over
	Invoke  int64  `json:"invoke_t"`
	Done    int64  `json:"done_t"`
	Outcome string `json:"outcome"` // ok | fail | info | open
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
	Line    int    `json:"line"`
}

// buildElections collects the Observe streams (each event with the observe it was told on)
// and the Proclaim and Resign calls.
func buildElections(h *History, order []*Event, ops map[string]*pairedOp, key func(*Event) string,
	fail func(*Event, string, ...any) error) error {
	streams := map[string]*ObserveStream{}
	for _, e := range order {
		if !electionF[e.F] {
			continue
		}
		switch {
		case e.F == "observe" && e.Type == "invoke":
			s := &ObserveStream{ID: len(h.Streams), Lock: e.Lock, Client: e.Client, Op: e.Op, FromTerm: e.FromTerm,
				HasFrom: e.HasFrom, Reference: e.Reference, Invoke: e.T, Done: e.T, Outcome: "open", Line: e.Line}
			if p := ops[key(e)]; p.done != nil {
				s.Done, s.Outcome, s.Error = p.done.T, p.done.Type, p.done.Error
			}
			streams[key(e)] = s
			h.Streams = append(h.Streams, s)
		case e.F == "proclaim" || e.F == "resign":
			if e.Type != "invoke" {
				continue // read with its invoke
			}
			c := &TermCall{ID: len(h.TermCalls), Lock: e.Lock, Client: e.Client, F: e.F, Term: e.Term, Stale: e.Stale,
				Invoke: e.T, Done: e.T, Outcome: "open", Line: e.Line}
			if p := ops[key(e)]; p.done != nil {
				c.Done, c.Outcome, c.Code, c.Error = p.done.T, p.done.Type, p.done.Code, p.done.Error
				if p.done.HasTerm && p.done.Term != e.Term {
					return fail(p.done, "term %d does not match its %s invoke on line %d (%d)", p.done.Term, e.F, e.Line, e.Term)
				}
			}
			h.TermCalls = append(h.TermCalls, c)
		case e.Type == "event":
			s := streams[key(e)]
			if s == nil || s.Lock != e.Lock {
				return fail(e, "%s event of op %d of client %s, which is no observe of %s invoked before it", e.F, e.Op, e.Client, e.Lock)
			}
			if s.Outcome != "open" && e.T > s.Done {
				return fail(e, "%s event of op %d of client %s after that observe completed (line %d)", e.F, e.Op, e.Client, s.Line)
			}
			s.Told = append(s.Told, Told{T: e.T, Kind: e.F, Term: e.Term, Line: e.Line})
		}
	}
	return nil
}

// ElectionFigures are the per-election figures of a run.
type ElectionFigures struct {
	Election string `json:"election"`
	// The reference: the whole history replayed at the end.
	Reference    bool   `json:"reference"`
	HistoryTerms int    `json:"history_terms"`
	FirstTerm    uint64 `json:"first_term,string"`
	LastTerm     uint64 `json:"last_term,string"`
	Pruned       bool   `json:"history_pruned"`
	Complete     bool   `json:"history_complete"` // ended with vacant after its last term
	// Candidates: terms told elected (holds), and how many of them the history could vouch for.
	Candidates     int `json:"candidates"`
	Elected        int `json:"elected"`
	ElectedChecked int `json:"elected_checked"`
	// Observers (the reference aside).
	Observers     int `json:"observers"`
	Streams       int `json:"streams"`
	TermsTold     int `json:"terms_told"`
	Vacancies     int `json:"vacancies"`
	Proclamations int `json:"proclamations"`
	Gaps          int `json:"history_gone_or_skipped"`
	// Proclaim and Resign calls.
	StaleProven    int `json:"stale_proven"`
	StaleRefused   int `json:"stale_refused"`
	StaleAccepted  int `json:"stale_accepted"`
	StaleWrongCode int `json:"stale_refused_otherwise"`
	StaleUnknown   int `json:"stale_unknown"`
	StaleUnproven  int `json:"stale_claimed_unproven"`
	CurrentCalls   int `json:"current_term_calls"`
	Anomalies      int `json:"anomalies"`
}

// reference is an election's history as replayed at the end: every term from lo on, in order.
type reference struct {
	s        *ObserveStream
	terms    []uint64
	lo       uint64 // every recorded term >= lo is in terms (up to the last, or beyond if complete)
	complete bool   // it ended with vacant after its last term: no later term was recorded by then
	pruned   bool   // it said history_gone
	exact    bool   // replayed from term 1: whether anything was ever pruned is known
}

func newReference(s *ObserveStream) *reference {
	ref := &reference{s: s, lo: s.FromTerm, exact: s.FromTerm <= 1}
	for i, ev := range s.Told {
		switch ev.Kind {
		case "history_gone":
			if i == 0 {
				ref.pruned = true
				ref.lo = max(ref.lo, ev.Term)
				if ev.Term == 0 {
					ref.lo = 1<<64 - 1
				}
			}
		case "term":
			if n := len(ref.terms); n == 0 || ev.Term > ref.terms[n-1] {
				ref.terms = append(ref.terms, ev.Term)
			}
			ref.complete = false
		case "vacant":
			ref.complete = len(ref.terms) == 0 || ev.Term == ref.terms[len(ref.terms)-1]
		}
	}
	return ref
}

func (r *reference) last() uint64 {
	if len(r.terms) == 0 {
		return 0
	}
	return r.terms[len(r.terms)-1]
}

// inRange: whether the reference can say if term t was recorded.
func (r *reference) inRange(t uint64) bool {
	return t >= r.lo && (r.complete || (len(r.terms) > 0 && t <= r.last()))
}

func (r *reference) has(t uint64) bool {
	i := sort.Search(len(r.terms), func(i int) bool { return r.terms[i] >= t })
	return i < len(r.terms) && r.terms[i] == t
}

// between: the recorded terms strictly between a and b (b == 0: every one after a).
func (r *reference) between(a, b uint64) []uint64 {
	var out []uint64
	for _, t := range r.terms {
		if t > a && (b == 0 || t < b) {
			out = append(out, t)
		}
	}
	return out
}

func (r *reference) describe() string {
	if len(r.terms) == 0 {
		return "no terms"
	}
	from := "replayed from term 1"
	if r.pruned {
		from = fmt.Sprintf("pruned: history_gone, first term %d", r.lo)
	} else if !r.exact {
		from = fmt.Sprintf("replayed from term %d", r.s.FromTerm)
	}
	end := "complete (ended vacant)"
	if !r.complete {
		end = "not known complete (no vacant after its last term)"
	}
	return fmt.Sprintf("%d..%d, %s, %s", r.terms[0], r.last(), from, end)
}

func terms(ts []uint64) string {
	var s []string
	for i, t := range ts {
		if i == 5 {
			s = append(s, fmt.Sprintf("and %d more", len(ts)-5))
			break
		}
		s = append(s, fmt.Sprint(t))
	}
	return strings.Join(s, ", ")
}

// CheckElections judges every election of the history (every name with an observe, proclaim
// or resign); undecided lists what could not be judged (no reference).
func CheckElections(h *History) (out []Anomaly, figures []ElectionFigures, undecided []string) {
	names := map[string]bool{}
	for _, s := range h.Streams {
		names[s.Lock] = true
	}
	for _, c := range h.TermCalls {
		names[c.Lock] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		found, f := checkElection(h, name)
		if !f.Reference {
			undecided = append(undecided, fmt.Sprintf("election %s: no reference (an observe with \"reference\": true "+
				"replaying the history): its observers and elected terms were checked for order only", name))
		}
		f.Anomalies = len(found)
		out = append(out, found...)
		figures = append(figures, f)
	}
	return out, figures, undecided
}

func checkElection(h *History, name string) ([]Anomaly, ElectionFigures) {
	f := ElectionFigures{Election: name}
	var out []Anomaly
	add := func(kind string, t int64, client string, holds []int, format string, a ...any) {
		out = append(out, Anomaly{Lock: name, Kind: kind, T: t, Holds: holds, Client: client,
			Message: fmt.Sprintf("election %s: ", name) + fmt.Sprintf(format, a...)})
	}
	var streams []*ObserveStream
	var ref *reference
	for _, s := range h.Streams {
		if s.Lock != name {
			continue
		}
		streams = append(streams, s)
		if s.Reference && s.HasFrom && ref == nil {
			ref = newReference(s)
		}
	}
	if ref != nil {
		f.Reference, f.HistoryTerms, f.Pruned, f.Complete = true, len(ref.terms), ref.pruned, ref.complete
		if len(ref.terms) > 0 {
			f.FirstTerm, f.LastTerm = ref.terms[0], ref.last()
		}
	}

	observers := map[string]bool{}
	for _, s := range streams {
		if s != ref.stream() {
			observers[s.Client] = true
			f.Streams++
			for _, ev := range s.Told {
				switch ev.Kind {
				case "term":
					f.TermsTold++
				case "vacant":
					f.Vacancies++
				case "proclaimed":
					f.Proclamations++
				default:
					f.Gaps++
				}
			}
		}
		checkStream(h, s, ref, add)
	}
	f.Observers = len(observers)

	// Every term told elected is in the history.
	candidates := map[string]bool{}
	for _, a := range h.Attempts {
		if a.Lock == name {
			candidates[a.Client] = true
		}
	}
	for _, hd := range h.Holds {
		if hd.Lock != name {
			continue
		}
		candidates[hd.Client] = true
		f.Elected++
		if ref == nil || !ref.inRange(hd.Token) {
			continue
		}
		f.ElectedChecked++
		if !ref.has(hd.Token) {
			add("elected", hd.Grant, hd.Client, []int{hd.ID}, "%s was told elected with term %d at %s, but the election's history "+
				"(%s) has no term %d: a term told to its leader was never recorded", hd.Client, hd.Token, h.secs(hd.Grant),
				ref.describe(), hd.Token)
		}
	}
	f.Candidates = len(candidates)

	// Proclaim and Resign of a term that was over.
	for _, c := range h.TermCalls {
		if c.Lock != name {
			continue
		}
		at, why := overAt(h, name, streams, c.Term)
		if why == "" || at >= c.Invoke {
			if c.Stale {
				f.StaleUnproven++
			} else {
				f.CurrentCalls++
			}
			continue
		}
		f.StaleProven++
		what := fmt.Sprintf("%s's %s of term %d asked at %s", c.Client, c.F, c.Term, h.secs(c.Invoke))
		switch {
		case c.Outcome == "ok":
			f.StaleAccepted++
			add("stale", c.Done, c.Client, nil, "%s was accepted (ok at %s), though term %d was over by %s (%s): "+
				"only the current term may proclaim or resign", what, h.secs(c.Done), c.Term, h.secs(at), why)
		case c.Outcome == "fail" && c.Code == "FAILED_PRECONDITION":
			f.StaleRefused++
		case c.Outcome == "fail":
			f.StaleWrongCode++
			add("stale", c.Done, c.Client, nil, "%s was refused with %s (%s), not FAILED_PRECONDITION, though term %d was over by %s (%s)",
				what, orNone(c.Code), c.Error, c.Term, h.secs(at), why)
		default:
			f.StaleUnknown++
		}
	}
	return out, f
}

func orNone(s string) string {
	if s == "" {
		return "no code"
	}
	return s
}

func (r *reference) stream() *ObserveStream {
	if r == nil {
		return nil
	}
	return r.s
}

// overAt is the first time the history proves term t of the election over, and how: a later
// term told elected to its leader or told to an observer (a term begins only once the one
// before has ended), a vacancy after t or a later term, or t's own resignation returned.
func overAt(h *History, name string, streams []*ObserveStream, t uint64) (int64, string) {
	best, why := int64(1<<63-1), ""
	for _, hd := range h.Holds {
		if hd.Lock != name {
			continue
		}
		if hd.Token > t && hd.Grant < best {
			best, why = hd.Grant, fmt.Sprintf("%s was told elected with term %d at %s", hd.Client, hd.Token, h.secs(hd.Grant))
		}
		if hd.Token == t && hd.Reason == EndReleased && !hd.UpperInf && hd.Upper < best {
			best, why = hd.Upper, fmt.Sprintf("%s's resignation of it returned at %s", hd.Client, h.secs(hd.Upper))
		}
	}
	for _, s := range streams {
		for _, ev := range s.Told {
			if ev.T >= best {
				break
			}
			switch {
			case ev.Kind == "term" && ev.Term > t:
				best, why = ev.T, fmt.Sprintf("%s was told term %d at %s", s.Client, ev.Term, h.secs(ev.T))
			case ev.Kind == "vacant" && ev.Term >= t:
				best, why = ev.T, fmt.Sprintf("%s was told vacant after term %d at %s", s.Client, ev.Term, h.secs(ev.T))
			}
		}
	}
	return best, why
}

// checkStream judges one Observe stream's sequence, against the reference when there is one.
func checkStream(h *History, s *ObserveStream, ref *reference, add func(string, int64, string, []int, string, ...any)) {
	where := func(ev Told) string {
		from := "the current state"
		if s.HasFrom {
			from = fmt.Sprintf("from term %d", s.FromTerm)
		}
		return fmt.Sprintf("%s was told %s at %s (its observe %d, %s, asked %s)", s.Client, tellText(ev), h.secs(ev.T),
			s.Op, from, h.secs(s.Invoke))
	}
	known := s.HasFrom // c is the last term accounted for: told, or before from_term
	c := s.FromTerm - 1
	if !s.HasFrom {
		c = 0
	}
	last := func() string {
		if !known {
			return "nothing yet"
		}
		if s.HasFrom && c == s.FromTerm-1 {
			return fmt.Sprintf("nothing since its from_term %d", s.FromTerm)
		}
		return fmt.Sprintf("term %d last", c)
	}
	expecting, expect := false, uint64(0) // after history_gone or skipped: the term it named comes next
	toldTerm := false                     // c was told as a term on this stream (proclamations follow it)
	for i, ev := range s.Told {
		switch ev.Kind {
		case "history_gone", "skipped":
			switch {
			case ev.Kind == "history_gone" && (i != 0 || !s.HasFrom):
				add("observer", ev.T, s.Client, nil, "%s: history_gone comes only first, on a stream with a from_term", where(ev))
			case ev.Kind == "skipped" && !known:
				add("observer", ev.T, s.Client, nil, "%s before any term: skipped follows the terms it was told", where(ev))
			case ref != nil && ref.exact && !ref.pruned:
				add("observer", ev.T, s.Client, nil, "%s, but the history was never pruned (the reference replay from term 1 "+
					"said no history_gone): no term can have left it", where(ev))
			case ref != nil:
				if still := ref.between(c, ev.Term); len(still) > 0 {
					add("observer", ev.T, s.Client, nil, "%s, but the terms after %d and before %d did not all leave the history: "+
						"it still has %s", where(ev), c, ev.Term, terms(still))
				}
			}
			expecting, expect, toldTerm = ev.Term != 0, ev.Term, false
			if ev.Term != 0 {
				c, known = ev.Term-1, true
			}
		case "term":
			t := ev.Term
			switch {
			case expecting && t != expect:
				add("observer", ev.T, s.Client, nil, "%s, but the %s before it named term %d as the next", where(ev), s.Told[i-1].Kind, expect)
			case known && t <= c:
				add("observer", ev.T, s.Client, nil, "%s after %s: terms must strictly increase", where(ev), last())
			case known && !expecting && ref != nil:
				if missing := ref.between(c, t); len(missing) > 0 {
					add("observer", ev.T, s.Client, nil, "%s right after %s, but the history has %s between them: "+
						"the observer was not told every term", where(ev), last(), terms(missing))
				}
			}
			if ref != nil && ref.inRange(t) && !ref.has(t) {
				add("observer", ev.T, s.Client, nil, "%s, but the election's history (%s) has no term %d", where(ev), ref.describe(), t)
			}
			c, known, expecting, toldTerm = t, true, false, true
		case "vacant":
			x := ev.Term
			switch {
			case !known:
				// The current state of a stream without from_term: nobody leads after term x.
				if ref != nil && x != 0 && ref.inRange(x) && !ref.has(x) {
					add("observer", ev.T, s.Client, nil, "%s, but the election's history (%s) has no term %d", where(ev), ref.describe(), x)
				}
				c, known = x, true
			case expecting || x != c:
				add("observer", ev.T, s.Client, nil, "%s after %s: a vacancy comes after the term it names and before any later one",
					where(ev), last())
			}
		case "proclaimed":
			if !known || !toldTerm || ev.Term != c {
				add("observer", ev.T, s.Client, nil, "%s after %s: a proclamation comes after its term and before any later one",
					where(ev), last())
			}
		}
	}
}

func tellText(ev Told) string {
	switch ev.Kind {
	case "term":
		return fmt.Sprintf("term %d", ev.Term)
	case "proclaimed":
		return fmt.Sprintf("proclaimed (term %d)", ev.Term)
	case "vacant":
		return fmt.Sprintf("vacant after term %d", ev.Term)
	}
	return fmt.Sprintf("%s (first term %d)", ev.Kind, ev.Term)
}

// Lines are the election's figures for a person.
func (f ElectionFigures) Lines() []string {
	history := "NO REFERENCE"
	if f.Reference {
		history = fmt.Sprintf("%d terms in the history", f.HistoryTerms)
		if f.HistoryTerms > 0 {
			history += fmt.Sprintf(" (%d..%d", f.FirstTerm, f.LastTerm)
			if f.Pruned {
				history += ", pruned"
			}
			if f.Complete {
				history += ", complete)"
			} else {
				history += ", not known complete)"
			}
		}
	}
	return []string{
		fmt.Sprintf("election %s: %s; %d told elected to %d candidates (%d within the history's range); "+
			"%d observers: %d streams, %d terms, %d vacancies, %d proclamations, %d history_gone/skipped told; %d anomalies",
			f.Election, history, f.Elected, f.Candidates, f.ElectedChecked, f.Observers, f.Streams, f.TermsTold,
			f.Vacancies, f.Proclamations, f.Gaps, f.Anomalies),
		fmt.Sprintf("election %s: proclaim/resign of a term the history shows over: %d (%d refused FAILED_PRECONDITION, "+
			"%d accepted, %d refused otherwise, %d unknown); %d believed stale but not provably; %d on a term not shown over",
			f.Election, f.StaleProven, f.StaleRefused, f.StaleAccepted, f.StaleWrongCode, f.StaleUnknown,
			f.StaleUnproven, f.CurrentCalls),
	}
}
