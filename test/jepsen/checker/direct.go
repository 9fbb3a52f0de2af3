package main

import (
	"fmt"
	"sort"
	"strings"
)

// An Anomaly is one distinct violation found on one lock.
type Anomaly struct {
	Lock    string `json:"lock"`
	Kind    string `json:"kind"` // overlap | semaphore | token | check | porcupine | observer | elected | stale
	T       int64  `json:"t"`    // when it happened (the offending grant, or the check's answer)
	Message string `json:"message"`
	Holds   []int  `json:"holds,omitempty"`  // Hold.IDs involved
	Checks  []int  `json:"checks,omitempty"` // TokenCheck.IDs involved
	// The span of the conflict, for the report's red highlight (overlap and semaphore).
	From int64 `json:"from_t,omitempty"`
	To   int64 `json:"to_t,omitempty"`
	// Elections: the client whose line it is (observer and stale: the report's anchor lane).
	Client string `json:"client,omitempty"`
}

// secs formats a monotonic time as seconds since the first event of the history.
func (h *History) secs(t int64) string {
	return fmt.Sprintf("%.3f s", float64(t-h.T0)/1e9)
}

func (h *History) until(hd *Hold) string {
	if !hd.Ended {
		return "the end of the history (still held)"
	}
	return fmt.Sprintf("%s (%s)", h.secs(hd.Stop), hd.Reason)
}

func describe(hd *Hold) string {
	return fmt.Sprintf("%s %s (token %d)", hd.Client, hd.Mode, hd.Token)
}

// conflicts says whether two holds may not overlap at all (semaphores are counted instead).
func conflicts(a, b *Hold) bool {
	if a.Mode == "semaphore" && b.Mode == "semaphore" {
		return false
	}
	return a.Mode == "write" || b.Mode == "write" || a.Mode != b.Mode
}

// DirectCheck finds, per lock, believed holds that overlap in time though their modes conflict,
// semaphore grants past the limit, and grants whose tokens do not grow. It works on the
// believed intervals [grant, stop] alone, so its messages read as what the clients saw.
func DirectCheck(h *History) []Anomaly {
	byLock := map[string][]*Hold{}
	for _, hd := range h.Holds {
		byLock[hd.Lock] = append(byLock[hd.Lock], hd)
	}
	checksByLock := map[string][]*TokenCheck{}
	for _, c := range h.Checks {
		checksByLock[c.Lock] = append(checksByLock[c.Lock], c)
	}
	var out []Anomaly
	for _, l := range h.Locks {
		out = append(out, overlaps(h, byLock[l])...)
		out = append(out, tokens(h, byLock[l])...)
		out = append(out, checks(h, byLock[l], checksByLock[l])...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Lock != out[j].Lock {
			return out[i].Lock < out[j].Lock
		}
		return out[i].T < out[j].T
	})
	return out
}

func overlaps(h *History, holds []*Hold) []Anomaly {
	sorted := append([]*Hold(nil), holds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Grant < sorted[j].Grant })
	var out []Anomaly
	var active []*Hold // granted no later than the current grant, not yet ended at it
	for _, k := range sorted {
		kept := active[:0]
		for _, a := range active {
			if a.End() > k.Grant {
				kept = append(kept, a)
			}
		}
		active = kept
		var sems []*Hold
		for _, a := range active {
			if a.Grant >= k.End() { // zero-length k at a's grant time: no overlap
				continue
			}
			if conflicts(a, k) {
				out = append(out, Anomaly{Lock: k.Lock, Kind: "overlap", T: k.Grant, Holds: []int{a.ID, k.ID},
					From: k.Grant, To: min(a.End(), k.End(), h.TMax),
					Message: fmt.Sprintf("lock %s: %s held %s (token %d) until %s but %s was granted %s (token %d) at %s",
						k.Lock, a.Client, a.Mode, a.Token, h.until(a), k.Client, k.Mode, k.Token, h.secs(k.Grant))})
			} else if k.Mode == "semaphore" {
				sems = append(sems, a)
			}
		}
		if k.Mode == "semaphore" && len(sems)+1 > k.Limit {
			var others []string
			ids := []int{k.ID}
			to := min(k.End(), h.TMax)
			for _, a := range sems {
				others = append(others, fmt.Sprintf("%s (token %d) until %s", a.Client, a.Token, h.until(a)))
				ids = append(ids, a.ID)
				to = min(to, a.End())
			}
			out = append(out, Anomaly{Lock: k.Lock, Kind: "semaphore", T: k.Grant, Holds: ids, From: k.Grant, To: to,
				Message: fmt.Sprintf("lock %s: %s was granted semaphore (token %d, limit %d) at %s while %d others held it: %s",
					k.Lock, k.Client, k.Token, k.Limit, h.secs(k.Grant), len(sems), strings.Join(others, ", "))})
		}
		active = append(active, k)
	}
	return out
}

// tokens finds grants that asked after another grant had completed yet got a token no larger
// (the linearization must order them so, and tokens strictly grow), and equal tokens.
func tokens(h *History, holds []*Hold) []Anomaly {
	byOK := append([]*Hold(nil), holds...)
	sort.SliceStable(byOK, func(i, j int) bool { return byOK[i].Grant < byOK[j].Grant })
	// best[i]: the hold with the largest token among byOK[:i+1].
	best := make([]*Hold, len(byOK))
	for i, hd := range byOK {
		best[i] = hd
		if i > 0 && best[i-1].Token >= hd.Token {
			best[i] = best[i-1]
		}
	}
	var out []Anomaly
	reported := map[[2]int]bool{}
	for _, b := range holds {
		n := sort.Search(len(byOK), func(i int) bool { return byOK[i].Grant >= b.Invoke })
		if n == 0 {
			continue
		}
		a := best[n-1]
		if a.Token < b.Token {
			continue
		}
		reported[[2]int{min(a.ID, b.ID), max(a.ID, b.ID)}] = true
		out = append(out, Anomaly{Lock: b.Lock, Kind: "token", T: b.Grant, Holds: []int{a.ID, b.ID},
			Message: fmt.Sprintf("lock %s: %s was granted %s (token %d) at %s, but %s had been granted %s (token %d) at %s, "+
				"before %s asked at %s: fencing tokens must grow", b.Lock, b.Client, b.Mode, b.Token, h.secs(b.Grant),
				a.Client, a.Mode, a.Token, h.secs(a.Grant), b.Client, h.secs(b.Invoke))})
	}
	byToken := map[uint64][]*Hold{}
	for _, hd := range byOK {
		byToken[hd.Token] = append(byToken[hd.Token], hd)
	}
	for _, hd := range byOK {
		same := byToken[hd.Token]
		for _, a := range same {
			if a == hd {
				break
			}
			if reported[[2]int{min(a.ID, hd.ID), max(a.ID, hd.ID)}] {
				continue
			}
			out = append(out, Anomaly{Lock: hd.Lock, Kind: "token", T: hd.Grant, Holds: []int{a.ID, hd.ID},
				Message: fmt.Sprintf("lock %s: %s was granted %s (token %d) at %s, the same token as %s's %s grant at %s: "+
					"fencing tokens must grow", hd.Lock, hd.Client, hd.Mode, hd.Token, h.secs(hd.Grant),
					a.Client, a.Mode, h.secs(a.Grant))})
		}
	}
	return out
}

// ended says how a hold's believed interval ended, for check messages.
func (h *History) ended(hd *Hold) string {
	switch {
	case !hd.Ended:
		return "still held at the end"
	case hd.Reason == EndReleased:
		return "released " + h.secs(hd.Stop)
	case hd.Reason == EndUnknown:
		return "release asked " + h.secs(hd.Stop)
	}
	return hd.Reason + " " + h.secs(hd.Stop)
}

// checks judges each answered check against the holds of its lock, using only what is certain
// in every linearization (strict inequalities: an operation that returns at the very nanosecond
// another is invoked may still be ordered after it):
//
//   - held: false, while a hold with that token was certainly in the lock's state for the whole
//     check: granted (ok) before the check was asked, and not stopped believed before it answered;
//   - held: true, when no hold with that token could have been in the state during the check: no
//     acquire of the lock returned that token, or the check answered before its acquire was asked,
//     or was asked after its release returned ok, or while a conflicting hold was certainly in
//     the state for the whole check.
//
// Porcupine judges the same checks together with everything else, so it can find more (two
// checks that only conflict with each other through one hold's uncertain grant or end).
func checks(h *History, holds []*Hold, cs []*TokenCheck) []Anomaly {
	byToken := map[uint64][]*Hold{}
	for _, hd := range holds {
		byToken[hd.Token] = append(byToken[hd.Token], hd)
	}
	// certain: hd is in the state through the whole of [from, to] in every linearization.
	certain := func(hd *Hold, from, to int64) bool {
		return hd.Grant < from && (!hd.Ended || to < hd.Stop)
	}
	who := func(c *TokenCheck, hd *Hold) string { // "c1's token 5", or "c1's token 5 (checked by c2)"
		s := fmt.Sprintf("%s's token %d", hd.Client, hd.Token)
		if c.Client != hd.Client {
			s += " (checked by " + c.Client + ")"
		}
		return s
	}
	var out []Anomaly
	for _, c := range cs {
		mine := byToken[c.Token]
		asked := fmt.Sprintf("(asked %s)", h.secs(c.Invoke))
		if !c.Held {
			for _, hd := range mine {
				if !certain(hd, c.Invoke, c.Done) {
					continue
				}
				by := ""
				if c.Client != hd.Client {
					by = " to " + c.Client
				}
				out = append(out, Anomaly{Lock: c.Lock, Kind: "check", T: c.Done, Holds: []int{hd.ID}, Checks: []int{c.ID},
					Message: fmt.Sprintf("lock %s: token %d of %s reported not held%s at %s %s while %s held it (granted %s, %s)",
						c.Lock, c.Token, hd.Client, by, h.secs(c.Done), asked, hd.Client, h.secs(hd.Grant), h.ended(hd))})
				break
			}
			continue
		}
		if len(mine) == 0 {
			out = append(out, Anomaly{Lock: c.Lock, Kind: "check", T: c.Done, Checks: []int{c.ID},
				Message: fmt.Sprintf("lock %s: token %d was reported held to %s at %s %s, but no acquire of %s returned that token",
					c.Lock, c.Token, c.Client, h.secs(c.Done), asked, c.Lock)})
			continue
		}
		// The anomaly stands only if every hold with the token is ruled out; the first says why.
		var first *Anomaly
		for _, hd := range mine {
			var why string
			ids := []int{hd.ID}
			switch {
			case c.Done < hd.Invoke:
				why = fmt.Sprintf("before %s asked for it at %s", hd.Client, h.secs(hd.Invoke))
			case hd.Ended && !hd.UpperInf && hd.Upper < c.Invoke:
				why = fmt.Sprintf("after its release returned at %s", h.secs(hd.Upper))
			default:
				for _, o := range holds {
					if o != hd && conflicts(o, hd) && certain(o, c.Invoke, c.Done) {
						why = fmt.Sprintf("while %s held %s (token %d, granted %s, %s)", o.Client, o.Mode, o.Token,
							h.secs(o.Grant), h.ended(o))
						ids = append(ids, o.ID)
						break
					}
				}
			}
			if why == "" {
				first = nil
				break
			}
			if first == nil {
				first = &Anomaly{Lock: c.Lock, Kind: "check", T: c.Done, Holds: ids, Checks: []int{c.ID},
					Message: fmt.Sprintf("lock %s: %s was reported held at %s %s, %s", c.Lock, who(c, hd),
						h.secs(c.Done), asked, why)}
			}
		}
		if first != nil {
			out = append(out, *first)
		}
	}
	return out
}
