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

func TestInDoubtThenLostEndsAtInDoubt(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 1)
	b.event("c1", "L", "lost", 3)
	b.acquire("c2", "L", "write", 0.5, 1.5, 2) // after the in_doubt, before the lost: fine
	b.release("c2", "L", 1.6, 1.7, "ok")
	h, r := b.check(t)
	expect(t, r, "L", true, 0)
	if hd := h.Holds[0]; hd.Reason != EndLost || hd.Stop != ns(1) {
		t.Errorf("c1's hold ended %s at %d, want lost at the in_doubt", hd.Reason, hd.Stop)
	}

	// Granted before the in_doubt: caught.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 1)
	b.event("c1", "L", "lost", 3)
	b.acquire("c2", "L", "write", 0.5, 0.9, 2)
	_, r = b.check(t)
	expect(t, r, "L", false, 1)
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
