package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// LockFigures are the per-lock figures of a run.
type LockFigures struct {
	Lock      string         `json:"lock"`
	Grants    int            `json:"grants"`
	ByMode    map[string]int `json:"grants_by_mode"`
	Checks    int            `json:"checks"`
	Porcupine string         `json:"porcupine"` // linearizable | NOT linearizable | unknown (timed out)
	Anomalies int            `json:"anomalies"`
}

// HoldRef names one hold in the figures.
type HoldRef struct {
	Lock    string  `json:"lock"`
	Client  string  `json:"client"`
	Token   uint64  `json:"token,string"`
	From    float64 `json:"from_s"`
	To      float64 `json:"to_s"`
	Seconds float64 `json:"seconds"`
	Reason  string  `json:"reason"`
	HoldID  int     `json:"hold"`
}

// Result is everything a run found; the text, JSON and HTML outputs all come from it.
type Result struct {
	History         string         `json:"history"`
	Operations      int            `json:"operations"`
	Seconds         float64        `json:"history_seconds"`
	Clients         int            `json:"clients"`
	Locks           []LockFigures  `json:"locks"`
	Grants          int            `json:"grants"`
	AcquiresFailed  int            `json:"acquires_failed"`
	AcquiresUnknown int            `json:"acquires_unknown"`
	HoldsEnded      map[string]int `json:"holds_by_end"`
	HoldsLost       int            `json:"holds_ended_by_loss"`
	HoldsDoubted    int            `json:"holds_with_in_doubt"`
	DoubtsConfirmed int            `json:"in_doubt_confirmed"`
	Longest         *HoldRef       `json:"longest_hold,omitempty"`
	Stray           int            `json:"stray_events"`
	DoubtEndsHold   bool           `json:"doubt_ends_hold"`
	Checks          int            `json:"checks"`
	ChecksHeld      int            `json:"checks_held"`
	ChecksDropped   int            `json:"checks_dropped"`
	Porcupine       string         `json:"porcupine"`
	PorcupineTime   float64        `json:"porcupine_seconds"`
	TimedOut        bool           `json:"porcupine_timed_out"`
	Anomalies       []Anomaly      `json:"anomalies"`
	Disagreements   []string       `json:"disagreements"`
	CheckTime       float64        `json:"check_seconds"`
	// Elections (election.go); Undecided: what could not be judged (exit 2 unless anomalies).
	Elections []ElectionFigures `json:"elections,omitempty"`
	Undecided []string          `json:"undecided,omitempty"`
	// Records (records.go): per counter, per store, and over all of them.
	Records        []RecordFigures `json:"records,omitempty"`
	RecordsByStore []RecordFigures `json:"records_by_store,omitempty"`
	RecordsTotal   *RecordFigures  `json:"records_total,omitempty"`

	illegal map[string]bool // locks Porcupine found not linearizable
}

// Check runs Porcupine per lock (within timeout in all) and the direct check, and combines them.
func Check(h *History, timeout time.Duration) *Result {
	start := time.Now()
	r := &Result{Operations: h.Operations, Seconds: float64(h.TMax-h.T0) / 1e9, Clients: len(h.Clients),
		HoldsEnded: map[string]int{}, illegal: map[string]bool{}, Anomalies: []Anomaly{}, Disagreements: []string{}}
	byLock := map[string][]*Hold{}
	for _, hd := range h.Holds {
		byLock[hd.Lock] = append(byLock[hd.Lock], hd)
		r.HoldsEnded[hd.Reason]++
		if len(hd.Doubts) > 0 {
			r.HoldsDoubted++
		}
		for _, d := range hd.Doubts {
			if d.Confirmed {
				r.DoubtsConfirmed++
			}
		}
		end := hd.End()
		if !hd.Ended {
			end = h.TMax
		}
		if r.Longest == nil || end-hd.Grant > int64(r.Longest.Seconds*1e9) {
			r.Longest = &HoldRef{Lock: hd.Lock, Client: hd.Client, Token: hd.Token, From: float64(hd.Grant-h.T0) / 1e9,
				To: float64(end-h.T0) / 1e9, Seconds: float64(end-hd.Grant) / 1e9, Reason: hd.Reason, HoldID: hd.ID}
		}
	}
	checksByLock := map[string][]*TokenCheck{}
	for _, c := range h.Checks {
		checksByLock[c.Lock] = append(checksByLock[c.Lock], c)
		if c.Held {
			r.ChecksHeld++
		}
	}
	r.Checks, r.ChecksDropped, r.DoubtEndsHold = len(h.Checks), h.Dropped, h.Options.DoubtEndsHold
	r.Grants = len(h.Holds)
	r.HoldsLost = r.HoldsEnded[EndLost]
	r.Stray = h.Stray
	for _, a := range h.Attempts {
		if a.Outcome == "fail" {
			r.AcquiresFailed++
		} else {
			r.AcquiresUnknown++
		}
	}

	direct := DirectCheck(h)
	directPerLock := map[string]int{}
	for _, a := range direct {
		directPerLock[a.Lock]++
	}

	ids := clientIDs(h)
	model := LockModel()
	pstart := time.Now()
	deadline := pstart.Add(timeout)
	r.Porcupine = "linearizable"
	for _, l := range h.Locks {
		lf := LockFigures{Lock: l, Grants: len(byLock[l]), ByMode: map[string]int{}, Checks: len(checksByLock[l])}
		for _, hd := range byLock[l] {
			lf.ByMode[hd.Mode]++
		}
		left := time.Until(deadline)
		res := porcupine.Unknown
		if left > 0 {
			res = porcupine.CheckOperationsTimeout(model, Operations(h, byLock[l], checksByLock[l], ids), left)
		}
		switch res {
		case porcupine.Ok:
			lf.Porcupine = "linearizable"
		case porcupine.Illegal:
			lf.Porcupine = "NOT linearizable"
			r.illegal[l] = true
			if r.Porcupine != "unknown" {
				r.Porcupine = "NOT linearizable"
			}
		default:
			lf.Porcupine = "unknown (timed out)"
			r.TimedOut = true
			r.Porcupine = "unknown"
		}
		switch {
		case res == porcupine.Illegal && directPerLock[l] == 0:
			r.Disagreements = append(r.Disagreements, fmt.Sprintf(
				"lock %s: Porcupine found no linearization, the direct check found nothing", l))
			r.Anomalies = append(r.Anomalies, Anomaly{Lock: l, Kind: "porcupine", T: h.TMax, Message: fmt.Sprintf(
				"lock %s: Porcupine found no linearization of the grants, hold ends and checks (see its visualization)", l)})
		case res == porcupine.Ok && directPerLock[l] > 0:
			r.Disagreements = append(r.Disagreements, fmt.Sprintf(
				"lock %s: Porcupine found a linearization, the direct check found %d anomalies", l, directPerLock[l]))
		}
		lf.Anomalies = directPerLock[l]
		if res == porcupine.Illegal && directPerLock[l] == 0 {
			lf.Anomalies = 1
		}
		r.Locks = append(r.Locks, lf)
	}
	r.PorcupineTime = time.Since(pstart).Seconds()
	r.Anomalies = append(r.Anomalies, direct...)
	elections, figures, undecided := CheckElections(h)
	r.Anomalies = append(r.Anomalies, elections...)
	r.Elections, r.Undecided = figures, undecided
	if v := CheckRecords(h); v != nil {
		r.Anomalies = append(r.Anomalies, v.Anomalies...)
		r.Records, r.RecordsByStore, r.RecordsTotal = v.Counters, v.Stores, v.Total
		r.Undecided = append(r.Undecided, v.Undecided...)
	}
	sort.SliceStable(r.Anomalies, func(i, j int) bool {
		if r.Anomalies[i].Lock != r.Anomalies[j].Lock {
			return r.Anomalies[i].Lock < r.Anomalies[j].Lock
		}
		return r.Anomalies[i].T < r.Anomalies[j].T
	})
	r.CheckTime = time.Since(start).Seconds()
	return r
}

func clientIDs(h *History) map[string]int {
	ids := map[string]int{}
	for i, c := range h.Clients {
		ids[c] = i
	}
	return ids
}

// ExitCode is 1 when anomalies were found, else 2 when Porcupine timed out or an election had
// no reference (unknown is not success), else 0.
func (r *Result) ExitCode() int {
	switch {
	case len(r.Anomalies) > 0:
		return 1
	case r.TimedOut || len(r.Undecided) > 0:
		return 2
	}
	return 0
}

// WriteText prints the figures, the anomalies one per line, and last `<n> operations, <k> anomalies`.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "history: %s, %.3f s, %d clients, %d locks\n", r.History, r.Seconds, r.Clients, len(r.Locks))
	if r.DoubtEndsHold {
		fmt.Fprintln(w, "model: --doubt-ends-hold (an in_doubt not followed by confirmed ends the hold)")
	} else {
		fmt.Fprintln(w, "model: strict loss rule (a hold lasts until its release is asked or lost is told; in_doubt does not end it)")
	}
	for _, l := range r.Locks {
		modes := ""
		for _, m := range []string{"write", "read", "semaphore"} {
			if l.ByMode[m] > 0 {
				modes += fmt.Sprintf(", %s %d", m, l.ByMode[m])
			}
		}
		fmt.Fprintf(w, "lock %s: %d grants%s; %d checks; porcupine: %s; %d anomalies\n", l.Lock, l.Grants, modes, l.Checks, l.Porcupine, l.Anomalies)
	}
	fmt.Fprintf(w, "acquires: %d granted, %d failed, %d unknown (info or never completed)\n",
		r.Grants, r.AcquiresFailed, r.AcquiresUnknown)
	fmt.Fprintf(w, "checks: %d answered (%d held, %d not held), %d dropped (failed, info or never completed)\n",
		r.Checks, r.ChecksHeld, r.Checks-r.ChecksHeld, r.ChecksDropped)
	inDoubt := ""
	if r.DoubtEndsHold {
		inDoubt = fmt.Sprintf(", %d in doubt", r.HoldsEnded[EndInDoubt])
	}
	fmt.Fprintf(w, "holds ended: %d released, %d lost%s, %d release unknown, %d still held at the end\n",
		r.HoldsEnded[EndReleased], r.HoldsLost, inDoubt, r.HoldsEnded[EndUnknown], r.HoldsEnded[EndHeld])
	if r.HoldsDoubted > 0 {
		fmt.Fprintf(w, "holds with an in_doubt: %d (%d in_doubt confirmed)\n", r.HoldsDoubted, r.DoubtsConfirmed)
	}
	if r.Longest != nil {
		fmt.Fprintf(w, "longest hold: lock %s, %s token %d, %.3f s (%.3f s to %.3f s, %s)\n", r.Longest.Lock,
			r.Longest.Client, r.Longest.Token, r.Longest.Seconds, r.Longest.From, r.Longest.To, r.Longest.Reason)
	}
	if r.Stray > 0 {
		fmt.Fprintf(w, "events that applied to no believed hold (ignored): %d\n", r.Stray)
	}
	for _, e := range r.Elections {
		for _, line := range e.Lines() {
			fmt.Fprintln(w, line)
		}
	}
	for _, c := range r.Records {
		fmt.Fprintln(w, c.Line())
	}
	for _, s := range r.RecordsByStore {
		fmt.Fprintln(w, s.Line())
	}
	if r.RecordsTotal != nil {
		fmt.Fprintln(w, r.RecordsTotal.Line())
	}
	fmt.Fprintf(w, "porcupine: %s (%.3f s); check took %.3f s\n", r.Porcupine, r.PorcupineTime, r.CheckTime)
	if r.TimedOut {
		fmt.Fprintln(w, "PORCUPINE TIMED OUT: linearizability is unknown, which is not success")
	}
	for _, u := range r.Undecided {
		fmt.Fprintln(w, "UNDECIDED "+u)
	}
	for _, d := range r.Disagreements {
		fmt.Fprintln(w, "DISAGREEMENT "+d)
	}
	for _, a := range r.Anomalies {
		fmt.Fprintln(w, "ANOMALY "+a.Message)
	}
	fmt.Fprintf(w, "%d operations, %d anomalies\n", r.Operations, len(r.Anomalies))
}
