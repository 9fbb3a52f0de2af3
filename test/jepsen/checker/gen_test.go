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

type genLock struct {
	name  string
	kind  string // mutex | rw | sem
	limit int
}

// generate simulates a correct lock service: per lock, rounds of holds that may overlap only
// when their modes allow it (one writer, or up to 4 readers, or up to limit semaphore holders),
// each round granted after every hold of the round before stopped being believed. Holds end by
// release (often acknowledged after the next grant), info release, loss, in_doubt then lost, or
// in_doubt then confirmed then release; some acquires fail or time out. Tokens start past 2^60.
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
				switch p := g.rng.Intn(100); {
				case p < 80:
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(0, 8)
					g.emitOp(last, c, rel, "ok", "release", lk.name, "")
				case p < 84:
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(100, 500)
					g.emitOp(last, c, rel, "info", "release", lk.name, `, "error": "DEADLINE_EXCEEDED: generated"`)
				case p < 89:
					g.emit(stop, c, "event", "lost", lk.name, `, "error": "ABORTED: session expired"`)
				case p < 94:
					g.emit(stop, c, "event", "in_doubt", lk.name, "")
					last = stop + g.dur(100, 2000)
					g.emit(last, c, "event", "lost", lk.name, `, "error": "ABORTED: session expired"`)
				default:
					g.emit(grant+d/3, c, "event", "in_doubt", lk.name, "")
					g.emit(grant+d/2, c, "event", "confirmed", lk.name, "")
					rel := g.emit(stop, c, "invoke", "release", lk.name, "")
					last = stop + g.dur(0, 8)
					g.emitOp(last, c, rel, "ok", "release", lk.name, "")
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
