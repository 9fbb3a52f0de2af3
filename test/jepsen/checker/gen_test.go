package main

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// genLine is one generated history line with its time, for sorting.
type genLine struct {
	t    int64
	text string
}

type generator struct {
	rng   *rand.Rand
	lines []genLine
	ops   map[string]int
}

func (g *generator) emit(t int64, client, typ, f, lock, extra string) int {
	g.ops[client]++
	return g.emitOp(t, client, g.ops[client], typ, f, lock, extra)
}

func (g *generator) emitOp(t int64, client string, op int, typ, f, lock, extra string) int {
	g.lines = append(g.lines, genLine{t, fmt.Sprintf(`{"t": %d, "client": %q, "op": %d, "type": %q, "f": %q, "lock": %q%s}`,
		t, client, op, typ, f, lock, extra)})
	return op
}

func (g *generator) dur(loMs, hiMs int) int64 {
	return int64(loMs)*1e6 + g.rng.Int63n(int64(hiMs-loMs)*1e6+1)
}

// check emits an answered check of token on lock by client over [inv, done].
func (g *generator) check(client, lock string, token uint64, inv, done int64, held bool) {
	tok := fmt.Sprintf(`, "token": "%d"`, token)
	op := g.emit(inv, client, "invoke", "check", lock, tok)
	g.emitOp(done, client, op, "ok", "check", lock, fmt.Sprintf(`%s, "held": %t`, tok, held))
}

type genLock struct {
	name  string
	kind  string // mutex | rw | sem
	limit int
}

// generate simulates a correct lock service: per lock, rounds of holds that may overlap only
// when their modes allow it (one writer, or up to 4 readers, or up to limit semaphore holders),
// each round granted after every hold of the round before stopped being believed. Holds end by
// release (often acknowledged after the next grant), info release, loss, in_doubt then lost
// (the hold lasting to the lost), or in_doubt then confirmed then release; some acquires fail
// or time out. Holders check their tokens while they hold them (held) and sometimes after
// (not held). Tokens start past 2^60.
func generate(seed int64, clients, holdsPerClient int, locks []genLock) string {
	g := &generator{rng: rand.New(rand.NewSource(seed)), ops: map[string]int{}}
	names := make([]string, clients)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i+1)
	}
	const start = int64(5_000_000_000_000)
	for li, lk := range locks {
		quota := map[string]int{}
		free := map[string]int64{}
		for _, c := range names {
			quota[c] = holdsPerClient / len(locks)
			if li < holdsPerClient%len(locks) {
				quota[c]++
			}
			free[c] = start
		}
		token := uint64(1)<<60 + uint64(li)<<40
		now := start + g.dur(0, 20)
		for {
			var ready []string
			left := 0
			for _, c := range names {
				left += quota[c]
				if quota[c] > 0 && free[c] < now {
					ready = append(ready, c)
				}
			}
			if left == 0 {
				break
			}
			if len(ready) == 0 {
				now += g.dur(1, 5)
				continue
			}
			g.rng.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
			mode, size := "write", 1
			switch {
			case lk.kind == "rw" && g.rng.Intn(3) > 0:
				mode, size = "read", 1+g.rng.Intn(4)
			case lk.kind == "sem":
				mode, size = "semaphore", 1+g.rng.Intn(lk.limit)
			}
			size = min(size, len(ready))
			extra := fmt.Sprintf(`, "mode": %q`, mode)
			if mode == "semaphore" {
				extra += fmt.Sprintf(`, "limit": %d`, lk.limit)
			}
			// A client that is not in this round may try and fail, or time out.
			if len(ready) > size && g.rng.Intn(10) == 0 {
				c := ready[size]
				inv := max(free[c]+1, now-g.dur(0, 30))
				op := g.emit(inv, c, "invoke", "acquire", lk.name, extra)
				typ := []string{"fail", "info"}[g.rng.Intn(2)]
				done := now + g.dur(1, 20)
				g.emitOp(done, c, op, typ, "acquire", lk.name, extra+`, "error": "UNAVAILABLE: generated"`)
				free[c] = done
			}
			// Every member's window contains now, so their tokens may come in any order.
			toks := make([]uint64, size)
			for i := range toks {
				token += 1 + uint64(g.rng.Intn(3))
				toks[i] = token
			}
			g.rng.Shuffle(size, func(i, j int) { toks[i], toks[j] = toks[j], toks[i] })
			roundEnd := now
			for i, c := range ready[:size] {
				quota[c]--
				inv := max(free[c]+1, now-g.dur(0, 40))
				op := g.emit(inv, c, "invoke", "acquire", lk.name, extra)
				grant := now + g.dur(0, 3)
				g.emitOp(grant, c, op, "ok", "acquire", lk.name, extra+fmt.Sprintf(`, "token": "%d"`, toks[i]))
				d := g.dur(20, 300)
				stop, last := grant+d, grant+d
				tok := toks[i]
				// The holder checks its own token while it holds it: held.
				if g.rng.Intn(2) == 0 {
					g.check(c, lk.name, tok, grant+1+g.dur(0, 5), grant+d/4+1, true)
				}
				held := true // what a check after the hold's end may answer; set below
				switch p := g.rng.Intn(100); {
				case p < 80:
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(0, 8)
					g.emitOp(last, c, rel, "ok", "release", lk.name, "")
					held = false
				case p < 84:
					// No ok: the release may take effect at any time after it was asked; a check
					// after it may say not held (held could be fine too, but only until the next
					// conflicting grant).
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(100, 500)
					g.emitOp(last, c, rel, "info", "release", lk.name, `, "error": "DEADLINE_EXCEEDED: generated"`)
					held = false
				case p < 89:
					g.emit(stop, c, "event", "lost", lk.name, `, "error": "ABORTED: session expired"`)
					held = false
				case p < 94:
					// In doubt, then lost: the hold lasts until the lost (the strict loss rule), so
					// the round ends there; the holder's check in between says held.
					g.emit(stop, c, "event", "in_doubt", lk.name, "")
					last = stop + g.dur(100, 2000)
					if g.rng.Intn(2) == 0 {
						g.check(c, lk.name, tok, stop+1, stop+(last-stop)/2, true)
					}
					g.emit(last, c, "event", "lost", lk.name, `, "error": "ABORTED: session expired"`)
					stop, held = last, false
				default:
					g.emit(grant+d/3, c, "event", "in_doubt", lk.name, "")
					g.emit(grant+d/2, c, "event", "confirmed", lk.name, "")
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(0, 8)
					g.emitOp(last, c, rel, "ok", "release", lk.name, "")
					held = false
				}
				// Now and then it checks the token again after the hold ended.
				if g.rng.Intn(4) == 0 {
					inv := last + 1 + g.dur(0, 5)
					last = inv + g.dur(0, 5)
					g.check(c, lk.name, tok, inv, last, held)
				}
				free[c] = last
				roundEnd = max(roundEnd, stop)
			}
			now = roundEnd + g.dur(0, 3) + 1
		}
	}
	sort.SliceStable(g.lines, func(i, j int) bool { return g.lines[i].t < g.lines[j].t })
	var b strings.Builder
	for _, l := range g.lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

var largeLocks = []genLock{{"mutex", "mutex", 1}, {"rw", "rw", 1}, {"sem", "sem", 3}}
