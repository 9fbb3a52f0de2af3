package main

// Records (README: "Records"): the lost-update check of the records workload. Incrementers
// append their increments' ids to counters (a counter: one key of one lock in one store, whose
// value is the list of the ids applied, in order), each told ok, fail or info; at the end every
// counter is read. The stores (lockstream's guarded records, a PostgreSQL table written through
// fenced transactions, ...) are judged alike, each counter on its own, and their figures are
// added up per store (records_figures.go). What is judged, per counter, against the latest final
// read:
//
//   - every acknowledged (ok) increment's id is in the final value (else: lost);
//   - no id is in it twice (applied twice), none that is no increment of that counter (unknown),
//     none of an increment that definitely failed (failed applied); an unknown one (info, or
//     never completed) may be in it once or not at all;
//   - an acknowledged increment comes before every increment invoked after its ok (order);
//   - no write was acknowledged that was read after another client had been granted the lock
//     since the writer's grant (unfenced: the write of a holder whose hold had ended).
//
// "Late" in the figures: an increment answered (refused by the guard: guardRefusals, or
// acknowledged) after another client had been granted its lock since the writer's grant. A late
// refusal is the guard at work; a late
// acknowledgement is no anomaly by itself (the write may have committed before the hold ended,
// its answer arriving after the next grant's), but it is how the planted unguarded-records
// shows, beside the updates it loses.
//
// So "no update lost or applied twice" is: final length = acknowledged + unknown applied, with
// no anomaly.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// recordsF are the history's records lines (the rest are the lock model's or the elections').
var recordsF = map[string]bool{"increment": true, "read": true, "final": true}

// An Increment is one read-modify-write that appends ID to a counter, as the holder of Token.
type Increment struct {
	ID      string `json:"id"`
	Store   string `json:"store"`
	Counter string `json:"counter"`
	Lock    string `json:"lock"`
	Client  string `json:"client"`
	Op      int64  `json:"op"`
	Token   uint64 `json:"token,string"`
	Invoke  int64  `json:"invoke_t"`
	Read    int64  `json:"read_t"`  // its read event, just before its write was sent; 0: never sent
	Done    int64  `json:"done_t"`  // its completion; the invoke time when it never completed
	Outcome string `json:"outcome"` // ok | fail | info | open
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
	Line    int    `json:"line"`
}

// A FinalRead is one answered read of a counter at the end.
type FinalRead struct {
	Store    string   `json:"store"`
	Counter  string   `json:"counter"`
	Server   string   `json:"server,omitempty"`
	Revision uint64   `json:"revision,string"`
	Values   []string `json:"-"`
	T        int64    `json:"t"`
	Line     int      `json:"line"`
}

func counterName(e *Event) string { return fmt.Sprintf("%s %s/%s", e.Store, e.Lock, e.Key) }

// parseRecords reads the fields of the records lines (README: "Records").
func parseRecords(e *Event, raw *rawEvent) error {
	if !recordsF[e.F] {
		return nil
	}
	e.Store = "records"
	if raw.Store != nil && *raw.Store != "" {
		e.Store = *raw.Store
	}
	if raw.Key == nil || *raw.Key == "" {
		return fmt.Errorf(`%s without "key"`, e.F)
	}
	e.Key = *raw.Key
	if raw.Server != nil {
		e.Server = *raw.Server
	}
	switch {
	case e.F == "read" && !e.HasOp:
		return fmt.Errorf(`read event without "op" (the increment it belongs to)`)
	case e.F == "increment" && e.Type == "invoke":
		if raw.ID == nil || *raw.ID == "" {
			return fmt.Errorf(`increment invoke without "id"`)
		}
		if !e.HasTok {
			return fmt.Errorf(`increment invoke without "token"`)
		}
		e.IncID = *raw.ID
	case e.F == "final" && e.Type == "ok":
		if !present(raw.Value) || !present(raw.Revision) {
			return fmt.Errorf(`final ok without "value" and "revision"`)
		}
		dec := json.NewDecoder(bytes.NewReader(raw.Value))
		if err := dec.Decode(&e.Value); err != nil {
			return fmt.Errorf(`"value" is not a list of strings: %v`, err)
		}
		var err error
		if e.Revision, err = parseToken(raw.Revision); err != nil {
			return fmt.Errorf(`"revision": %v`, err)
		}
	}
	return nil
}

// buildRecords collects the increments (each with its read and its completion) and the final reads.
func buildRecords(h *History, order []*Event, ops map[string]*pairedOp, key func(*Event) string,
	fail func(*Event, string, ...any) error) error {
	increments := map[string]*Increment{}
	ids := map[string]*Increment{}
	for _, e := range order {
		switch {
		case !recordsF[e.F] || (e.Type != "invoke" && e.Type != "event"):
		case e.F == "increment":
			if first := ids[e.IncID]; first != nil {
				return fail(e, "increment id %s already used on line %d", e.IncID, first.Line)
			}
			inc := &Increment{ID: e.IncID, Store: e.Store, Counter: counterName(e), Lock: e.Lock, Client: e.Client, Op: e.Op,
				Token: e.Token, Invoke: e.T, Done: e.T, Outcome: "open", Line: e.Line}
			if p := ops[key(e)]; p.done != nil {
				inc.Done, inc.Outcome, inc.Code, inc.Error = p.done.T, p.done.Type, p.done.Code, p.done.Error
			}
			ids[e.IncID], increments[key(e)] = inc, inc
			h.Increments = append(h.Increments, inc)
		case e.F == "read":
			inc := increments[key(e)]
			if inc == nil || inc.Counter != counterName(e) || inc.Read != 0 {
				return fail(e, "read event of op %d of client %s, which is no increment of %s invoked before it "+
					"(or was read already)", e.Op, e.Client, counterName(e))
			}
			if inc.Outcome != "open" && e.T > inc.Done {
				return fail(e, "read event of op %d of client %s after that increment completed (line %d)", e.Op, e.Client, inc.Line)
			}
			inc.Read = e.T
		case e.F == "final":
			if p := ops[key(e)]; p.done != nil && p.done.Type == "ok" {
				h.Finals = append(h.Finals, &FinalRead{Store: e.Store, Counter: counterName(e), Server: e.Server,
					Revision: p.done.Revision, Values: p.done.Value, T: p.done.T, Line: p.done.Line})
			}
		}
	}
	return nil
}

// RecordsVerdict is what CheckRecords found: the anomalies, the figures per counter, per store
// and over all, and the counters with increments but no final read.
type RecordsVerdict struct {
	Anomalies []Anomaly
	Counters  []RecordFigures
	Stores    []RecordFigures
	Total     *RecordFigures
	Undecided []string
}

// CheckRecords judges every counter of the history (nil when it has none).
func CheckRecords(h *History) *RecordsVerdict {
	if len(h.Increments) == 0 && len(h.Finals) == 0 {
		return nil
	}
	byCounter := map[string][]*Increment{}
	ids := map[string]*Increment{}
	stores := map[string]string{}
	for _, inc := range h.Increments {
		byCounter[inc.Counter] = append(byCounter[inc.Counter], inc)
		ids[inc.ID] = inc
		stores[inc.Counter] = inc.Store
	}
	finals := map[string][]*FinalRead{}
	for _, f := range h.Finals {
		finals[f.Counter] = append(finals[f.Counter], f)
		stores[f.Counter] = f.Store
	}
	var names []string
	for n := range stores {
		names = append(names, n)
	}
	sort.Strings(names)
	g := newGrants(h)
	v := &RecordsVerdict{Total: &RecordFigures{}}
	perStore := map[string]*RecordFigures{}
	for _, name := range names {
		found, f := checkCounter(h, g, name, byCounter[name], finals[name], ids)
		f.Store = stores[name]
		if finals[name] == nil {
			v.Undecided = append(v.Undecided, fmt.Sprintf("counter %s: no final read: its value was not judged", name))
		}
		v.Anomalies = append(v.Anomalies, found...)
		v.Counters = append(v.Counters, f)
		v.Total.add(f)
		if perStore[f.Store] == nil {
			perStore[f.Store] = &RecordFigures{Store: f.Store}
		}
		perStore[f.Store].add(f)
	}
	for _, f := range perStore {
		v.Stores = append(v.Stores, *f)
	}
	sort.Slice(v.Stores, func(i, j int) bool { return v.Stores[i].Store < v.Stores[j].Store })
	return v
}

// grants finds, per lock, the holds granted after a given one.
type grants struct {
	byLock map[string][]*Hold // by grant time
	hold   map[string]*Hold   // lock, client, token -> the hold
}

func newGrants(h *History) *grants {
	g := &grants{byLock: map[string][]*Hold{}, hold: map[string]*Hold{}}
	for _, hd := range h.Holds {
		g.byLock[hd.Lock] = append(g.byLock[hd.Lock], hd)
		g.hold[fmt.Sprintf("%s\x00%s\x00%d", hd.Lock, hd.Client, hd.Token)] = hd
	}
	for _, hs := range g.byLock {
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Grant < hs[j].Grant })
	}
	return g
}

// after is the increment's hold, and the first hold of its lock granted to another client after
// it (nil, nil when the history has no such hold).
func (g *grants) after(inc *Increment) (*Hold, *Hold) {
	own := g.hold[fmt.Sprintf("%s\x00%s\x00%d", inc.Lock, inc.Client, inc.Token)]
	if own == nil {
		return nil, nil
	}
	hs := g.byLock[inc.Lock]
	for i := sort.Search(len(hs), func(i int) bool { return hs[i].Grant > own.Grant }); i < len(hs); i++ {
		if hs[i].Client != inc.Client {
			return own, hs[i]
		}
	}
	return own, nil
}

// checkCounter judges one counter: its increments against its latest final read.
func checkCounter(h *History, g *grants, name string, incs []*Increment, reads []*FinalRead,
	ids map[string]*Increment) ([]Anomaly, RecordFigures) {
	f := RecordFigures{Counter: name, Increments: len(incs)}
	var out []Anomaly
	add := func(kind string, lock string, t int64, holds []int, format string, a ...any) {
		out = append(out, Anomaly{Lock: lock, Kind: kind, T: t, Holds: holds, Message: "counter " + name + ": " + fmt.Sprintf(format, a...)})
	}
	for _, inc := range incs {
		switch inc.Outcome {
		case "ok":
			f.Acknowledged++
		case "fail":
			f.Failed++
		default:
			f.Unknown++
		}
		own, next := g.after(inc)
		if next == nil {
			continue
		}
		if inc.Outcome == "fail" && guardRefusals[inc.Code] && next.Grant < inc.Done {
			f.LateRefused++
		}
		if inc.Outcome == "ok" && next.Grant < inc.Done {
			f.LateAccepted++
		}
		if inc.Outcome == "ok" && inc.Read != 0 && next.Grant < inc.Read {
			add("unfenced", inc.Lock, inc.Read, []int{own.ID, next.ID},
				"%s's write of %s (token %d, sent after its read at %s) was acknowledged at %s, though %s had been granted %s "+
					"(token %d) at %s, after %s's grant at %s", inc.Client, inc.ID, inc.Token, h.secs(inc.Read), h.secs(inc.Done),
				next.Client, inc.Lock, next.Token, h.secs(next.Grant), inc.Client, h.secs(own.Grant))
		}
	}
	for _, inc := range incs {
		if inc.Outcome == "fail" && guardRefusals[inc.Code] {
			f.Refused++
		}
	}
	if len(reads) == 0 {
		f.Anomalies = len(out)
		return out, f
	}
	final := reads[0]
	for _, r := range reads[1:] {
		if r.Revision > final.Revision {
			final = r
		}
	}
	lock := lockOf(incs, name)
	for _, r := range reads {
		if r.Revision == final.Revision && !slices.Equal(r.Values, final.Values) {
			add("final", lock, r.T, nil, "two final reads at revision %d differ (%d ids through %s on line %d, %d through %s on line %d)",
				r.Revision, len(final.Values), orNone(final.Server), final.Line, len(r.Values), orNone(r.Server), r.Line)
		}
	}
	f.Final, f.Revision = len(final.Values), final.Revision
	at := map[string][]int{}
	for i, id := range final.Values {
		at[id] = append(at[id], i)
	}
	for i, id := range final.Values {
		if at[id][0] != i {
			continue // judged at its first place
		}
		inc := ids[id]
		if inc == nil || inc.Counter != name {
			add("unknown", lock, final.T, nil, "%s (at %d of %d) is no increment of this counter", id, i, len(final.Values))
			continue
		}
		if n := len(at[id]); n > 1 {
			f.Duplicated++
			add("duplicate", lock, inc.Done, nil, "%s (%s) was applied %d times (at %v)", id, inc.Outcome, n, at[id])
		}
	}
	for _, inc := range incs {
		places := at[inc.ID]
		switch {
		case inc.Outcome == "ok" && len(places) == 0:
			f.Lost++
			add("lost", lock, inc.Done, nil, "%s's increment %s (token %d), acknowledged at %s, is not in the final value (%d ids, revision %d)",
				inc.Client, inc.ID, inc.Token, h.secs(inc.Done), len(final.Values), final.Revision)
		case inc.Outcome == "fail" && len(places) > 0:
			f.FailedApplied++
			add("failed-applied", lock, inc.Done, nil, "%s's increment %s failed at %s (%s) but is in the final value (at %d)",
				inc.Client, inc.ID, h.secs(inc.Done), inc.Error, places[0])
		case inc.Outcome != "ok" && inc.Outcome != "fail" && len(places) > 0:
			f.UnknownApplied++
		}
	}
	out = append(out, orderAnomalies(h, name, lock, incs, at)...)
	f.Anomalies = len(out)
	return out, f
}

// orderAnomalies finds increments placed before an acknowledged one whose ok came before they
// were invoked: a write that overtook one it must have read.
func orderAnomalies(h *History, name, lock string, incs []*Increment, at map[string][]int) []Anomaly {
	var oks, placed []*Increment
	for _, inc := range incs {
		if len(at[inc.ID]) == 0 {
			continue
		}
		placed = append(placed, inc)
		if inc.Outcome == "ok" {
			oks = append(oks, inc)
		}
	}
	sort.SliceStable(oks, func(i, j int) bool { return oks[i].Done < oks[j].Done })
	sort.SliceStable(placed, func(i, j int) bool { return placed[i].Invoke < placed[j].Invoke })
	var out []Anomaly
	var latest *Increment // of the oks acknowledged so far, the one placed last
	j := 0
	for _, b := range placed {
		for ; j < len(oks) && oks[j].Done < b.Invoke; j++ {
			if latest == nil || at[oks[j].ID][0] > at[latest.ID][0] {
				latest = oks[j]
			}
		}
		if latest != nil && at[latest.ID][0] > at[b.ID][0] {
			out = append(out, Anomaly{Lock: lock, Kind: "order", T: b.Invoke, Message: fmt.Sprintf(
				"counter %s: %s (invoked %s) is at %d, before %s (at %d), which was acknowledged before it, at %s",
				name, b.ID, h.secs(b.Invoke), at[b.ID][0], latest.ID, at[latest.ID][0], h.secs(latest.Done))})
		}
	}
	return out
}

func lockOf(incs []*Increment, name string) string {
	if len(incs) > 0 {
		return incs[0].Lock
	}
	return name
}
