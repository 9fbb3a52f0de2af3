package main

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// lockInput is one Porcupine operation on one lock: a grant (acquire), the end of a hold, or a
// check of a token (a read: it changes nothing).
type lockInput struct {
	Lock   string
	End    bool // false: acquire, true: end of hold
	Check  bool // a check of Token, answered Held (Hold is the TokenCheck.ID)
	Held   bool
	Hold   int // Hold.ID
	Client string
	Mode   string
	Limit  int
	Token  uint64
	Reason string // for ends, how it ended (description only)
}

type holder struct {
	hold   int
	client string
	mode   string
	token  uint64
}

// lockState is the state of one lock: who holds it, and the largest token granted so far.
// Values are never mutated after Step returns them.
type lockState struct {
	holders  []holder // sorted by hold id
	maxToken uint64
	granted  bool // whether any token was granted (tokens may start at 0)
}

func compatible(s *lockState, in lockInput) bool {
	switch in.Mode {
	case "write":
		return len(s.holders) == 0
	case "read":
		for _, h := range s.holders {
			if h.mode != "read" {
				return false
			}
		}
		return true
	case "semaphore":
		for _, h := range s.holders {
			if h.mode != "semaphore" {
				return false
			}
		}
		return len(s.holders) < in.Limit
	}
	return false
}

func lockStep(state, input, _ any) (bool, any) {
	s := state.(*lockState)
	in := input.(lockInput)
	if in.Check {
		held := false
		for _, h := range s.holders {
			if h.token == in.Token {
				held = true
				break
			}
		}
		return held == in.Held, s
	}
	if !in.End {
		if s.granted && in.Token <= s.maxToken {
			return false, s // fencing tokens strictly grow in linearization order
		}
		if !compatible(s, in) {
			return false, s
		}
		next := &lockState{maxToken: in.Token, granted: true, holders: make([]holder, 0, len(s.holders)+1)}
		i := sort.Search(len(s.holders), func(i int) bool { return s.holders[i].hold > in.Hold })
		next.holders = append(next.holders, s.holders[:i]...)
		next.holders = append(next.holders, holder{in.Hold, in.Client, in.Mode, in.Token})
		next.holders = append(next.holders, s.holders[i:]...)
		return true, next
	}
	for i, h := range s.holders {
		if h.hold == in.Hold {
			next := &lockState{maxToken: s.maxToken, granted: s.granted, holders: make([]holder, 0, len(s.holders)-1)}
			next.holders = append(next.holders, s.holders[:i]...)
			next.holders = append(next.holders, s.holders[i+1:]...)
			return true, next
		}
	}
	return false, s // its acquire is not linearized yet
}

func lockEqual(a, b any) bool {
	x, y := a.(*lockState), b.(*lockState)
	if x.maxToken != y.maxToken || x.granted != y.granted || len(x.holders) != len(y.holders) {
		return false
	}
	for i := range x.holders {
		if x.holders[i].hold != y.holders[i].hold {
			return false
		}
	}
	return true
}

func lockHash(a any) uint64 {
	s := a.(*lockState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%t", s.maxToken, s.granted)
	for _, x := range s.holders {
		fmt.Fprintf(h, ",%d", x.hold)
	}
	return h.Sum64()
}

// LockModel is the sequential specification of a set of locks, partitioned by lock.
func LockModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byLock := map[string][]porcupine.Operation{}
			var names []string
			for _, op := range history {
				l := op.Input.(lockInput).Lock
				if _, ok := byLock[l]; !ok {
					names = append(names, l)
				}
				byLock[l] = append(byLock[l], op)
			}
			out := make([][]porcupine.Operation, 0, len(names))
			for _, n := range names {
				out = append(out, byLock[n])
			}
			return out
		},
		Init:  func() any { return &lockState{} },
		Step:  lockStep,
		Equal: lockEqual,
		Hash:  lockHash,
		DescribeOperation: func(input, _ any) string {
			in := input.(lockInput)
			if in.Check {
				answer := "held"
				if !in.Held {
					answer = "not held"
				}
				return fmt.Sprintf("%s %s: check token %d: %s", in.Lock, in.Client, in.Token, answer)
			}
			if in.End {
				return fmt.Sprintf("%s %s: %s ends hold (token %d, %s)", in.Lock, in.Client, in.Client, in.Token, in.Reason)
			}
			return fmt.Sprintf("%s %s: granted %s token %d", in.Lock, in.Client, in.Mode, in.Token)
		},
		DescribeState: func(state any) string {
			s := state.(*lockState)
			var hs []string
			for _, h := range s.holders {
				hs = append(hs, fmt.Sprintf("%s %s #%d", h.client, h.mode, h.token))
			}
			max := "none"
			if s.granted {
				max = fmt.Sprint(s.maxToken)
			}
			return fmt.Sprintf("holders [%s], max token %s", strings.Join(hs, ", "), max)
		},
	}
}

// Operations turns believed holds into Porcupine operations: a grant over [invoke, ok] and an
// end over [stop believing, release ok] or [stop believing, inf), with inf = TMax + 1; and each
// answered check over [invoke, ok]. clientIDs numbers the clients for Porcupine's visualization.
func Operations(h *History, holds []*Hold, checks []*TokenCheck, clientIDs map[string]int) []porcupine.Operation {
	inf := h.TMax + 1
	ops := make([]porcupine.Operation, 0, 2*len(holds)+len(checks))
	for _, c := range checks {
		in := lockInput{Lock: c.Lock, Check: true, Held: c.Held, Hold: c.ID, Client: c.Client, Token: c.Token}
		ops = append(ops, porcupine.Operation{ClientId: clientIDs[c.Client], Input: in, Call: c.Invoke, Return: c.Done})
	}
	for _, hd := range holds {
		in := lockInput{Lock: hd.Lock, Hold: hd.ID, Client: hd.Client, Mode: hd.Mode, Limit: hd.Limit, Token: hd.Token}
		ops = append(ops, porcupine.Operation{ClientId: clientIDs[hd.Client], Input: in, Call: hd.Invoke, Return: hd.Grant})
		if !hd.Ended {
			continue // believed to the end: it never leaves the model's state
		}
		in.End, in.Reason = true, hd.Reason
		ret := inf
		if !hd.UpperInf {
			ret = hd.Upper
		}
		ops = append(ops, porcupine.Operation{ClientId: clientIDs[hd.Client], Input: in, Call: hd.Stop, Return: ret})
	}
	return ops
}
