package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGeneratedLargeHistoryPasses(t *testing.T) {
	text := generate(1, 20, 500, largeLocks)
	if p := os.Getenv("LOCKSTREAM_CHECK_SAMPLE"); p != "" {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, r := checkText(t, text)
	took := time.Since(start)
	t.Logf("20 clients x 500 holds on 3 locks: %d operations, %.0f s of history, %d grants, checked in %.2f s (porcupine %.2f s)",
		r.Operations, r.Seconds, r.Grants, took.Seconds(), r.PorcupineTime)
	for _, l := range largeLocks {
		expect(t, r, l.name, true, 0)
	}
	if r.Grants != 10000 {
		t.Errorf("grants %d, want 10000", r.Grants)
	}
	if r.HoldsLost == 0 || r.HoldsEnded[EndInDoubt] != 0 || r.HoldsEnded[EndUnknown] == 0 || r.AcquiresFailed == 0 {
		t.Errorf("the generator should exercise losses, unknown releases and failed acquires: %+v", r.HoldsEnded)
	}
	if took > 20*time.Second {
		t.Errorf("checking took %s, want a few seconds", took)
	}
}

// TestGeneratedLargeHistoryMutated breaks the large history once: a loss on the mutex, told
// straight from holding, is told 2 s later, after the next grant, which the strict loss rule
// must catch.
func TestGeneratedLargeHistoryMutated(t *testing.T) {
	text := generate(1, 20, 500, largeLocks)
	h, _ := checkText(t, text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	mutated := false
	for _, hd := range h.Holds[len(h.Holds)/2:] {
		l := lines[hd.StopLine-1]
		if hd.Lock != "mutex" || hd.Reason != EndLost || !strings.Contains(l, `"lost"`) {
			continue
		}
		t0 := `"t": ` + strconv.FormatInt(hd.Stop, 10)
		lines[hd.StopLine-1] = strings.Replace(l, t0, `"t": `+strconv.FormatInt(hd.Stop+2e9, 10), 1)
		mutated = true
		break
	}
	if !mutated {
		t.Fatal("no loss to mutate")
	}
	_, r := checkText(t, strings.Join(lines, "\n"))
	if len(r.Anomalies) == 0 || r.Locks[0].Lock != "mutex" || r.Locks[0].Porcupine == "linearizable" {
		t.Fatalf("a loss told 2 s late was not caught: %v", messages(r))
	}
	if len(r.Disagreements) > 0 {
		t.Errorf("disagreements: %v", r.Disagreements)
	}
	t.Logf("mutated: %d anomalies, first: %s", len(r.Anomalies), r.Anomalies[0].Message)
}
