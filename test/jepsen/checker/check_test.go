package main

import (
	"strings"
	"testing"
)

// mutexHandoffs: n handoffs round-robin over clients; each next grant comes after the previous
// holder's release invoke, often before its release ok (the release was in flight).
func mutexHandoffs(n int, clients []string) *hist {
	b := &hist{}
	at := 1.0
	for i := 0; i < n; i++ {
		c := clients[i%len(clients)]
		grant := at + 0.002
		b.acquire(c, "L", "write", at-0.001-0.01*float64(i%3)/3, grant, uint64(100+i))
		stop := grant + 0.01
		b.release(c, "L", stop, stop+0.004, "ok")
		at = stop + 0.001 // next grant at stop+0.003: before this release's ok
	}
	return b
}

func TestMutexManyHandoffsPass(t *testing.T) {
	_, r := mutexHandoffs(300, []string{"c1", "c2", "c3", "c4", "c5"}).check(t)
	expect(t, r, "L", true, 0)
	if r.Grants != 300 || r.Operations != 600 {
		t.Errorf("grants %d operations %d, want 300 and 600", r.Grants, r.Operations)
	}
}

func TestWriteOverlapCaught(t *testing.T) {
	b := mutexHandoffs(20, []string{"c1", "c2", "c3"})
	// c9 is granted write while c1 holds (c1 granted at 1.002 until 1.012; the history begins
	// at 0.999, c1's invoke, so these are 0.003 s and 0.013 s in reports). Its token 50 is
	// below c1's 100, but both acquires were in flight together, so only the overlap counts.
	b.acquire("c9", "L", "write", 1.0, 1.005, 50)
	b.release("c9", "L", 1.006, 1.007, "ok")
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
	want := "lock L: c1 held write (token 100) until 0.013 s (released) but c9 was granted write (token 50) at 0.006 s"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}
}

func TestLossToldAfterGrantCaught(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.001, 5)
	b.acquire("c2", "L", "write", 1.0, 11.002, 6)
	b.event("c1", "L", "lost", 12.345)
	b.release("c2", "L", 13, 13.1, "ok")
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
	want := "lock L: c1 held write (token 5) until 12.345 s (lost) but c2 was granted write (token 6) at 11.002 s"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}
	if r.ExitCode() != 1 {
		t.Errorf("exit %d, want 1", r.ExitCode())
	}

	// Told before the grant: safe.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.001, 5)
	b.acquire("c2", "L", "write", 1.0, 11.002, 6)
	b.event("c1", "L", "lost", 10.9)
	_, r = b.check(t)
	expect(t, r, "L", true, 0)
}

func TestReadersThenWriterPass(t *testing.T) {
	b := &hist{}
	// Three readers wait behind a writer; they are granted concurrently, and their oks arrive
	// in another order than their tokens (r3's token 12 first, r1's token 10 last).
	b.acquire("w0", "L", "write", 0, 0.01, 9)
	b.acquire("r1", "L", "read", 0.02, 0.109, 10)
	b.acquire("r2", "L", "read", 0.03, 0.105, 11)
	b.acquire("r3", "L", "read", 0.04, 0.103, 12)
	b.release("w0", "L", 0.1, 0.2, "ok")
	b.release("r1", "L", 0.3, 0.31, "ok")
	b.release("r2", "L", 0.32, 0.33, "ok")
	b.release("r3", "L", 0.35, 0.36, "ok")
	b.acquire("w1", "L", "write", 0.2, 0.351, 13)
	b.release("w1", "L", 0.4, 0.41, "ok")
	_, r := b.check(t)
	expect(t, r, "L", true, 0)

	// The writer granted while r3 still reads.
	b = &hist{}
	b.acquire("r1", "L", "read", 0.02, 0.109, 10)
	b.acquire("r3", "L", "read", 0.04, 0.103, 12)
	b.release("r1", "L", 0.3, 0.31, "ok")
	b.acquire("w1", "L", "write", 0.2, 0.32, 13)
	b.release("r3", "L", 0.35, 0.36, "ok")
	_, r = b.check(t)
	expect(t, r, "L", false, 1)
}

func TestSemaphoreLimit(t *testing.T) {
	two := func() *hist {
		b := &hist{}
		b.acquireN("c1", "S", "semaphore", 2, 0, 0.01, 1)
		b.acquireN("c2", "S", "semaphore", 2, 0, 0.02, 2)
		b.release("c1", "S", 0.5, 0.51, "ok")
		b.acquireN("c3", "S", "semaphore", 2, 0.1, 0.5, 3) // after c1's release invoke
		b.release("c2", "S", 0.6, 0.61, "ok")
		b.release("c3", "S", 0.7, 0.71, "ok")
		return b
	}
	_, r := two().check(t)
	expect(t, r, "S", true, 0)

	b := two()
	b.acquireN("c4", "S", "semaphore", 2, 0.1, 0.3, 4) // a third holder beside c1 and c2
	b.release("c4", "S", 0.4, 0.41, "ok")
	_, r = b.check(t)
	expect(t, r, "S", false, 1)
	if m := r.Anomalies[0].Message; !strings.Contains(m, "c4 was granted semaphore (token 4, limit 2)") {
		t.Errorf("message %q", m)
	}
}

func TestInDoubtConfirmedIsContinuous(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 1)
	b.event("c1", "L", "confirmed", 2)
	b.release("c1", "L", 5, 5.1, "ok")
	b.acquire("c2", "L", "write", 0.5, 1.5, 2) // during the doubt, but c1's hold never ended
	b.release("c2", "L", 1.6, 1.7, "ok")
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
}

// inDoubtThenGrant: c1 in doubt at 4.0 s, c2 granted at 4.3 s, c1 told lost at 6.3 s (the
// overlap the ZooKeeper follower fault test found before lockstream's fix).
func inDoubtThenGrant() *hist {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 4.0)
	b.acquire("c2", "L", "write", 3.0, 4.3, 2)
	b.event("c1", "L", "lost", 6.3)
	b.release("c2", "L", 7, 7.1, "ok")
	return b
}

func TestInDoubtDoesNotEndHold(t *testing.T) {
	// By default (the strict loss rule) c1 holds until it is told lost: two holders for 2 s.
	h, r := checkText(t, inDoubtThenGrant().text())
	expect(t, r, "L", false, 1)
	want := "lock L: c1 held write (token 1) until 6.300 s (lost) but c2 was granted write (token 2) at 4.300 s"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}
	if d := h.Holds[0].Doubts; len(d) != 1 || d[0].From != ns(4) || d[0].To != ns(6.3) || d[0].Confirmed {
		t.Errorf("c1's doubts %+v, want one unconfirmed from 4.0 s to 6.3 s", d)
	}

	// With --doubt-ends-hold (a client that stops using the lock at in_doubt) it is fine, and
	// c1's hold ended at the in_doubt.
	h, r = checkTextOpt(t, inDoubtThenGrant().text(), Options{DoubtEndsHold: true})
	expect(t, r, "L", true, 0)
	if hd := h.Holds[0]; hd.Reason != EndLost || hd.Stop != ns(4) {
		t.Errorf("c1's hold ended %s at %d, want lost at the in_doubt", hd.Reason, hd.Stop)
	}

	// Even so, granted before the in_doubt is caught.
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 1)
	b.event("c1", "L", "lost", 3)
	b.acquire("c2", "L", "write", 0.5, 0.9, 2)
	_, r = checkTextOpt(t, b.text(), Options{DoubtEndsHold: true})
	expect(t, r, "L", false, 1)

	// Told lost before the grant: fine in both.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 1)
	b.event("c1", "L", "lost", 1.2)
	b.acquire("c2", "L", "write", 0.5, 1.5, 2)
	_, r = b.check(t)
	expect(t, r, "L", true, 0)
}

func TestTokenMustGrow(t *testing.T) {
	for _, tok := range []uint64{5, 4} {
		b := &hist{}
		b.acquire("c1", "L", "write", 0, 0.1, 5)
		b.release("c1", "L", 0.2, 0.3, "ok")
		b.acquire("c2", "L", "write", 0.4, 0.5, tok)
		_, r := b.check(t)
		expect(t, r, "L", false, 1)
		if r.Anomalies[0].Kind != "token" {
			t.Errorf("token %d: kind %s", tok, r.Anomalies[0].Kind)
		}
	}
	// Tokens past 2^53 keep every digit: 2^60+1 then 2^60 must be caught.
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1<<60+1)
	b.release("c1", "L", 0.2, 0.3, "ok")
	b.acquire("c2", "L", "write", 0.4, 0.5, 1<<60)
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
}

func TestInfoReleaseMayLinearizeEarly(t *testing.T) {
	// c1's release has no ok: c1 stays a possible holder forever, but its release was invoked
	// (at 5) before c2's grant returned (at 7), so it can linearize before c2's grant.
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 1, 1)
	b.release("c1", "L", 5, 6, "info")
	b.acquire("c2", "L", "write", 4, 7, 2)
	b.release("c2", "L", 8, 9, "ok")
	h, r := b.check(t)
	expect(t, r, "L", true, 0)
	if hd := h.Holds[0]; hd.Reason != EndUnknown || !hd.UpperInf {
		t.Errorf("c1's hold: %s, upper inf %v", hd.Reason, hd.UpperInf)
	}
	// c2's grant returned (4.5) before c1 invoked its release (5): no place for the release.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 1, 1)
	b.release("c1", "L", 5, 6, "info")
	b.acquire("c2", "L", "write", 4, 4.5, 2)
	_, r = b.check(t)
	expect(t, r, "L", false, 1)
	// A release that never completed, and one that failed, are the same.
	for _, typ := range []string{"", "fail"} {
		b = &hist{}
		b.acquire("c1", "L", "write", 0, 1, 1)
		b.release("c1", "L", 5, 6, typ)
		b.acquire("c2", "L", "write", 4, 7, 2)
		_, r = b.check(t)
		expect(t, r, "L", true, 0)
	}
}

func TestFailedAndUnknownAcquiresCounted(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.acquireNot("c2", "L", "write", 0.2, 0.3, "fail")
	b.acquireNot("c3", "L", "write", 0.2, 0.4, "info")
	b.acquireNot("c4", "L", "write", 0.2, 0, "")
	b.release("c1", "L", 1, 1.1, "ok")
	_, r := b.check(t)
	expect(t, r, "L", true, 0)
	if r.AcquiresFailed != 1 || r.AcquiresUnknown != 2 || r.Operations != 5 {
		t.Errorf("failed %d unknown %d operations %d, want 1, 2, 5", r.AcquiresFailed, r.AcquiresUnknown, r.Operations)
	}
}

func TestChecksOfACorrectHistoryPass(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 5)
	b.checkTok("c1", "L", 5, 0.02, 0.03, false) // asked before the grant returned: either answer
	b.checkTok("c3", "L", 5, 0.05, 0.08, true)  // (and another client may ask about c1's token)
	b.checkTok("c1", "L", 5, 0.5, 0.6, true)
	b.checkTok("c3", "L", 99, 0.5, 0.6, false) // a token never granted
	b.release("c1", "L", 1.0, 1.1, "ok")
	b.checkTok("c3", "L", 5, 1.01, 1.03, true) // while the release is in flight: either answer,
	b.checkTok("c1", "L", 5, 1.04, 1.06, false)
	b.acquire("c2", "L", "write", 1.0, 1.15, 6)
	b.checkTok("c1", "L", 5, 1.2, 1.3, false) // after the release returned
	b.checkTok("c2", "L", 6, 1.2, 1.25, true)
	b.event("c2", "L", "in_doubt", 1.3)
	b.checkTok("c2", "L", 6, 1.35, 1.4, true) // in doubt, not lost: still held
	b.event("c2", "L", "lost", 1.5)
	b.checkTok("c2", "L", 6, 1.6, 1.7, false)
	_, r := b.check(t)
	expect(t, r, "L", true, 0)
	if r.Checks != 10 || r.ChecksHeld != 5 || r.Operations != 15 {
		t.Errorf("checks %d (held %d), operations %d; want 10 (5), 15", r.Checks, r.ChecksHeld, r.Operations)
	}
}

func TestCheckHeldAfterReleaseCaught(t *testing.T) {
	// A server that answers `released` before the lock is free: c1's release returned at 3.1 s,
	// yet its check asked at 3.15 s says its token is still held.
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 5)
	b.release("c1", "L", 3.0, 3.1, "ok")
	b.checkTok("c1", "L", 5, 3.15, 3.2, true)
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
	want := "lock L: c1's token 5 was reported held at 3.200 s (asked 3.150 s), after its release returned at 3.100 s"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want || r.Anomalies[0].Kind != "check" {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}

	// Asked before the release returned: it may have been answered before the release took
	// effect.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 5)
	b.release("c1", "L", 3.0, 3.1, "ok")
	b.checkTok("c1", "L", 5, 3.05, 3.2, true)
	_, r = b.check(t)
	expect(t, r, "L", true, 0)

	// Held while another client certainly held the lock (c1's release never returned, so only
	// c2's grant bounds it).
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 5)
	b.release("c1", "L", 3.0, 3.1, "info")
	b.acquire("c2", "L", "write", 2.9, 3.2, 6)
	b.checkTok("c1", "L", 5, 3.3, 3.4, true)
	_, r = b.check(t)
	expect(t, r, "L", false, 1)
	want = "lock L: c1's token 5 was reported held at 3.400 s (asked 3.300 s), while c2 held write (token 6, granted 3.200 s, still held at the end)"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}

	// A token no acquire returned, and a check answered before the acquire was asked.
	b = &hist{}
	b.checkTok("c2", "L", 5, 0, 0.05, true)
	b.acquire("c1", "L", "write", 0.1, 0.2, 5)
	b.checkTok("c2", "L", 7, 0.3, 0.4, true)
	_, r = b.check(t)
	expect(t, r, "L", false, 2)
	for i, want := range []string{
		"lock L: c1's token 5 (checked by c2) was reported held at 0.050 s (asked 0.000 s), before c1 asked for it at 0.100 s",
		"lock L: token 7 was reported held to c2 at 0.400 s (asked 0.300 s), but no acquire of L returned that token",
	} {
		if len(r.Anomalies) != 2 || r.Anomalies[i].Message != want {
			t.Errorf("anomalies %v, want %q", messages(r), want)
		}
	}
}

func TestCheckNotHeldDuringHoldCaught(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 1.5, 5)
	b.checkTok("c1", "L", 5, 1.9, 2.0, false)
	b.release("c1", "L", 2.6, 2.7, "ok")
	_, r := b.check(t)
	expect(t, r, "L", false, 1)
	want := "lock L: token 5 of c1 reported not held at 2.000 s (asked 1.900 s) while c1 held it (granted 1.500 s, released 2.600 s)"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}

	// In doubt is still held by default; with --doubt-ends-hold the hold ended at the in_doubt.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 1.5, 5)
	b.event("c1", "L", "in_doubt", 1.8)
	b.checkTok("c2", "L", 5, 1.9, 2.0, false)
	b.event("c1", "L", "lost", 2.5)
	_, r = b.check(t)
	expect(t, r, "L", false, 1)
	want = "lock L: token 5 of c1 reported not held to c2 at 2.000 s (asked 1.900 s) while c1 held it (granted 1.500 s, lost 2.500 s)"
	if len(r.Anomalies) != 1 || r.Anomalies[0].Message != want {
		t.Errorf("anomalies %v, want %q", messages(r), want)
	}
	_, r = checkTextOpt(t, b.text(), Options{DoubtEndsHold: true})
	expect(t, r, "L", true, 0)

	// Asked before the grant returned, or after the release was asked: either answer is fine.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 1.5, 5)
	b.checkTok("c2", "L", 5, 1.4, 2.0, false)
	b.release("c1", "L", 2.6, 2.7, "ok")
	b.checkTok("c2", "L", 5, 2.61, 2.65, false)
	_, r = b.check(t)
	expect(t, r, "L", true, 0)
}
