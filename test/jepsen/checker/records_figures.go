package main

// The records workload's figures (README: "Records"): per counter, added up per store and over
// all stores, and the lines that print them.

import "fmt"

// guardRefusals are the codes of a write refused by its store's guard as a stale holder's:
// lockstream's guarded records answer FAILED_PRECONDITION (not the holder's token), a fenced
// PostgreSQL transaction STALE_TOKEN (the token below the resource's high-water mark).
var guardRefusals = map[string]bool{"FAILED_PRECONDITION": true, "STALE_TOKEN": true}

// RecordFigures are one counter's figures, or (Counter "") one store's, or (Store "" too) all
// counters'.
type RecordFigures struct {
	Store          string `json:"store,omitempty"`
	Counter        string `json:"counter,omitempty"`
	Increments     int    `json:"increments"`
	Acknowledged   int    `json:"acknowledged"`
	LateAccepted   int    `json:"acknowledged_late"` // ok after another client was granted the lock since
	Failed         int    `json:"failed"`
	Refused        int    `json:"refused_by_guard"` // failed with one of guardRefusals
	LateRefused    int    `json:"late_refused"`     // ... after another client was granted the lock since
	Unknown        int    `json:"unknown"`          // info or never completed
	UnknownApplied int    `json:"unknown_applied"`
	Final          int    `json:"final_ids"`
	Revision       uint64 `json:"final_revision,string"`
	Lost           int    `json:"lost"`
	Duplicated     int    `json:"duplicated"`
	FailedApplied  int    `json:"failed_applied"`
	Anomalies      int    `json:"anomalies"`
}

// counts are the figures that add up over counters.
func (f *RecordFigures) counts() []*int {
	return []*int{&f.Increments, &f.Acknowledged, &f.LateAccepted, &f.Failed, &f.Refused, &f.LateRefused, &f.Unknown,
		&f.UnknownApplied, &f.Final, &f.Lost, &f.Duplicated, &f.FailedApplied, &f.Anomalies}
}

func (f *RecordFigures) add(g RecordFigures) {
	sums := f.counts()
	for i, n := range g.counts() {
		*sums[i] += *n
	}
}

// Line is the figures for a person: `counter <store> <lock>/<key>: ...`, `store <store>: ...`,
// and the total over every store, `records: ...`.
func (f RecordFigures) Line() string {
	expected := f.Acknowledged + f.UnknownApplied
	sign := "="
	if f.Final != expected {
		sign = "≠"
	}
	what := "records"
	switch {
	case f.Counter != "":
		what = "counter " + f.Counter
	case f.Store != "":
		what = "store " + f.Store
	}
	return fmt.Sprintf("%s: %d increments: %d acknowledged (%d late), %d failed (%d refused by the guard, %d late), "+
		"%d unknown (%d applied); final values: %d ids %s %d acknowledged + %d unknown applied; "+
		"%d lost, %d duplicated, %d failed applied; %d anomalies",
		what, f.Increments, f.Acknowledged, f.LateAccepted, f.Failed, f.Refused, f.LateRefused, f.Unknown, f.UnknownApplied,
		f.Final, sign, f.Acknowledged, f.UnknownApplied, f.Lost, f.Duplicated, f.FailedApplied, f.Anomalies)
}
