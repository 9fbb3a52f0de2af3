package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

// hist builds a history by hand. Times are seconds; the first event is normally at 0.
type hist struct {
	lines []string
	op    map[string]int
	store string // records: the counters' store (default "records")
}

func ns(s float64) int64 { return int64(math.Round(s * 1e9)) }

func (b *hist) next(client string) int {
	if b.op == nil {
		b.op = map[string]int{}
	}
	b.op[client]++
	return b.op[client]
}

func (b *hist) line(t float64, client string, op int, typ, f, lock, extra string) {
	b.lines = append(b.lines, fmt.Sprintf(`{"t": %d, "client": %q, "op": %d, "type": %q, "f": %q, "lock": %q%s}`,
		ns(t), client, op, typ, f, lock, extra))
}

// acquire records an acquire invoked at inv that returned ok at ok with token tok.
func (b *hist) acquire(client, lock, mode string, inv, ok float64, tok uint64) *hist {
	return b.acquireN(client, lock, mode, 0, inv, ok, tok)
}

func (b *hist) acquireN(client, lock, mode string, limit int, inv, ok float64, tok uint64) *hist {
	op := b.next(client)
	extra := fmt.Sprintf(`, "mode": %q`, mode)
	if limit > 0 {
		extra += fmt.Sprintf(`, "limit": %d`, limit)
	}
	b.line(inv, client, op, "invoke", "acquire", lock, extra)
	b.line(ok, client, op, "ok", "acquire", lock, extra+fmt.Sprintf(`, "token": "%d"`, tok))
	return b
}

// acquireNot records an acquire that completed with typ (fail or info), or never (typ "").
func (b *hist) acquireNot(client, lock, mode string, inv, done float64, typ string) *hist {
	op := b.next(client)
	extra := fmt.Sprintf(`, "mode": %q`, mode)
	b.line(inv, client, op, "invoke", "acquire", lock, extra)
	if typ != "" {
		b.line(done, client, op, typ, "acquire", lock, extra+`, "error": "UNAVAILABLE: test"`)
	}
	return b
}

// release records a release invoked at inv completing with typ at done (typ "" never completes).
func (b *hist) release(client, lock string, inv, done float64, typ string) *hist {
	op := b.next(client)
	b.line(inv, client, op, "invoke", "release", lock, "")
	if typ != "" {
		b.line(done, client, op, typ, "release", lock, "")
	}
	return b
}

// checkTok records a check of tok on lock invoked at inv and answered held at done.
func (b *hist) checkTok(client, lock string, tok uint64, inv, done float64, held bool) *hist {
	op := b.next(client)
	extra := fmt.Sprintf(`, "token": "%d"`, tok)
	b.line(inv, client, op, "invoke", "check", lock, extra)
	b.line(done, client, op, "ok", "check", lock, fmt.Sprintf(`%s, "held": %t`, extra, held))
	return b
}

func (b *hist) event(client, lock, f string, t float64) *hist {
	b.line(t, client, b.next(client), "event", f, lock, "")
	return b
}

func (b *hist) text() string { return strings.Join(b.lines, "\n") + "\n" }

func (b *hist) check(t *testing.T) (*History, *Result) {
	t.Helper()
	return checkText(t, b.text())
}

func checkText(t *testing.T, text string) (*History, *Result) {
	t.Helper()
	return checkTextOpt(t, text, Options{})
}

func checkTextOpt(t *testing.T, text string, opt Options) (*History, *Result) {
	t.Helper()
	events, err := ParseHistory(strings.NewReader(text), "test")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	h, err := BuildHistory(events, "test", opt)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	r := Check(h, 30*time.Second)
	if r.TimedOut {
		t.Fatalf("porcupine timed out")
	}
	return h, r
}

// expect asserts Porcupine's verdict on lock and the number of direct-check anomalies there.
func expect(t *testing.T, r *Result, lock string, linearizable bool, direct int) {
	t.Helper()
	for _, l := range r.Locks {
		if l.Lock != lock {
			continue
		}
		if got := l.Porcupine == "linearizable"; got != linearizable {
			t.Errorf("lock %s: porcupine %q, want linearizable=%v", lock, l.Porcupine, linearizable)
		}
		n := 0
		for _, a := range r.Anomalies {
			if a.Lock == lock && a.Kind != "porcupine" {
				n++
			}
		}
		if n != direct {
			t.Errorf("lock %s: direct check found %d anomalies, want %d: %v", lock, n, direct, messages(r))
		}
		if len(r.Disagreements) > 0 {
			t.Errorf("porcupine and the direct check disagree: %v", r.Disagreements)
		}
		return
	}
	t.Fatalf("no lock %s in result", lock)
}

func messages(r *Result) []string {
	var out []string
	for _, a := range r.Anomalies {
		out = append(out, a.Message)
	}
	sort.Strings(out)
	return out
}
