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
	t.Logf("20 clients x 500 holds on 3 locks: %d operations, %.0f s of history, %d grants, %d checks, checked in %.2f s (porcupine %.2f s)",
		r.Operations, r.Seconds, r.Grants, r.Checks, took.Seconds(), r.PorcupineTime)
	for _, l := range largeLocks {
		expect(t, r, l.name, true, 0)
	}
	if r.Grants != 10000 {
		t.Errorf("grants %d, want 10000", r.Grants)
	}
	if r.HoldsLost == 0 || r.HoldsEnded[EndInDoubt] != 0 || r.HoldsEnded[EndUnknown] == 0 || r.AcquiresFailed == 0 {
		t.Errorf("the generator should exercise losses, unknown releases and failed acquires: %+v", r.HoldsEnded)
	}
	if r.Checks < 5000 || r.ChecksHeld == 0 || r.ChecksHeld == r.Checks {
		t.Errorf("the generator should check tokens, held and not: %d checks, %d held", r.Checks, r.ChecksHeld)
	}
	if took > 10*time.Second {
		t.Errorf("checking took %s, want a few seconds", took)
	}

	// A history safe under the strict loss rule is safe when in_doubt ends holds, too.
	start = time.Now()
	_, r = checkTextOpt(t, text, Options{DoubtEndsHold: true})
	t.Logf("the same with --doubt-ends-hold: checked in %.2f s", time.Since(start).Seconds())
	for _, l := range largeLocks {
		expect(t, r, l.name, true, 0)
	}
}

// TestGeneratedLargeHistoryCheckMutated breaks the large history once more: a check on the
// read/write lock that said held while its holder held the lock now says not held.
func TestGeneratedLargeHistoryCheckMutated(t *testing.T) {
	text := generate(1, 20, 500, largeLocks)
	h, _ := checkText(t, text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var hit *TokenCheck
	for _, c := range h.Checks[len(h.Checks)/2:] {
		if c.Lock == "rw" && c.Held {
			hit = c
			lines[c.Line-1] = strings.Replace(lines[c.Line-1], `"held": true`, `"held": false`, 1)
			break
		}
	}
	if hit == nil {
		t.Fatal("no check to mutate")
	}
	_, r := checkText(t, strings.Join(lines, "\n"))
	expect(t, r, "rw", false, 1)
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "check" {
		t.Fatalf("a check answered not held during its hold was not caught: %v", messages(r))
	}
	t.Logf("check mutated: %s", r.Anomalies[0].Message)
}

// TestGeneratedLargeHistoryMutated breaks the large history once: a loss on the mutex, told
// straight from holding, is told 2 s later, after the next grant, which the strict loss rule
// must catch.
func TestGeneratedLargeHistoryMutated(t *testing.T) {
	text := generate(1, 20, 500, largeLocks)
	h, _ := checkText(t, text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	mutated := false
	next := map[int]*Hold{} // a hold -> the same client's next hold of the same lock
	last := map[[2]string]*Hold{}
	for _, hd := range h.Holds {
		if p := last[[2]string{hd.Client, hd.Lock}]; p != nil {
			next[p.ID] = hd
		}
		last[[2]string{hd.Client, hd.Lock}] = hd
	}
	for _, hd := range h.Holds[len(h.Holds)/2:] {
		l := lines[hd.StopLine-1]
		if hd.Lock != "mutex" || hd.Reason != EndLost || len(hd.Doubts) > 0 || !strings.Contains(l, `"lost"`) {
			continue
		}
		if n := next[hd.ID]; n != nil && n.Invoke <= hd.Stop+3e9 {
			continue // the client asks again within 2 s: moving its lost would be an input error
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
