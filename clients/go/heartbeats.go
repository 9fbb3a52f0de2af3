// Heartbeats: the client's, sent on an idle stream, and a link's watchdog on the server's, which
// applies the two rules of silence (in doubt and a new stream, then lost).

package lockstream

import (
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Held locks are in doubt, and the stream is replaced, after this many heartbeat intervals
// without a message from the server (it sends one every interval).
const suspectAfterIntervals = 2

// heartbeats are the session's sense of the server's voice: the interval at which both sides
// speak, and when the server was last heard from, on the session's monotonic clock.
type heartbeats struct {
	interval time.Duration // asked of the server, and kept by the client; 0: none
	born     time.Time     // the monotonic base of heard and of the session's times
	// When the server was last heard from (since born), for the watchdog.
	heard atomic.Int64
	// Wakes the watchdog when its deadlines change.
	wake chan struct{}
}

func newHeartbeats(interval time.Duration) *heartbeats {
	return &heartbeats{interval: interval, born: time.Now(), wake: make(chan struct{}, 1)}
}

// now is the time since the session was made (monotonic).
func (h *heartbeats) now() time.Duration { return time.Since(h.born) }

// hear notes that a message came from the server now.
func (h *heartbeats) hear() { h.heard.Store(int64(h.now())) }

// lastHeard is when the server was last heard from (since born).
func (h *heartbeats) lastHeard() time.Duration { return time.Duration(h.heard.Load()) }

// suspectAfter is the silence after which held locks are in doubt and the stream is replaced.
func (h *heartbeats) suspectAfter() time.Duration { return suspectAfterIntervals * h.interval }

// poke wakes the watchdog, for its deadlines changed.
func (h *heartbeats) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// beat calls send every interval until done is closed (the stream ends), so that the server
// hears from a quiet client (and idle-timeout proxies leave the stream alone). The watchdog
// listens for the server's.
func (h *heartbeats) beat(done <-chan struct{}, send func() error) {
	if h.interval <= 0 {
		return
	}
	ticker := time.NewTicker(h.interval)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		_ = send()
	}
}

// silenceRule is what the rules of silence say of a stream now.
type silenceRule int

const (
	silenceOK      silenceRule = iota
	silenceSuspect             // the stream is silent: in doubt, replace it
	silenceLost                // silent for nearly the grace: the server may free what it keeps
)

// judge applies the two rules of silence now: lost once the server has been silent for a tenth
// of the grace (counted from the last word) short of the grace (grace 0: not told one, or none);
// suspect once the current stream, taken into use at since (streaming: there is one), has been
// silent for two heartbeat intervals. Without heartbeats a quiet stream says nothing about the
// path: the loss rule applies only while resuming. silent is the silence that broke a rule;
// next, when to judge again.
func (h *heartbeats) judge(grace time.Duration, resuming, streaming bool, since time.Duration) (rule silenceRule, silent, next time.Duration) {
	now, heard := h.now(), h.lastHeard()
	next = time.Hour
	if grace > 0 && (h.interval > 0 || resuming) {
		lossAfter, silent := grace-grace/10, now-heard
		if silent >= lossAfter {
			return silenceLost, silent, next
		}
		next = lossAfter - silent
	}
	if h.interval > 0 && streaming {
		suspectAfter, silent := h.suspectAfter(), now-max(heard, since)
		if silent >= suspectAfter {
			return silenceSuspect, silent, next
		}
		next = min(next, suspectAfter-silent)
	}
	return silenceOK, 0, next
}

// watch applies the two rules of silence until the link's owner ends: the path is in doubt,
// and the stream is replaced, after two heartbeat intervals without a word from the server; the
// owner ends (its locks or leadership lost) a tenth of the resume grace before the grace,
// counted from the last word, is over.
func (l *link[Req, Resp]) watch() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(l.check())
		select {
		case <-l.done:
			return
		case <-timer.C:
		case <-l.heartbeats.wake:
		}
	}
}

// check applies the rules of silence now, and says when to check again.
func (l *link[Req, Resp]) check() time.Duration {
	l.mu.Lock()
	stream, since, grace, resuming, ended := l.stream, l.streamSince, l.resumeGrace, l.resuming, l.ended
	l.mu.Unlock()
	if ended {
		return time.Hour
	}
	rule, silent, next := l.heartbeats.judge(grace, resuming, stream != nil, since)
	switch rule {
	case silenceLost:
		l.owner.finish(l.owner.transportError(fmt.Sprintf(
			"no message from the server for %s; it may %s once its resume grace (%s) is over",
			silent.Round(time.Millisecond), l.stake, grace), nil))
	case silenceSuspect:
		l.cut(stream, l.owner.transportError(fmt.Sprintf(
			"no message from the server for %s (%d heartbeat intervals)", silent.Round(time.Millisecond), suspectAfterIntervals), nil))
	}
	return next
}

// cut ends a stream the server has gone silent on: the path is in doubt at once, and the link
// is resumed on a new stream (see broken) or, if it cannot be, its owner ends.
func (l *link[Req, Resp]) cut(stream grpc.BidiStreamingClient[Req, Resp], why *Error) {
	l.mu.Lock()
	if l.stream != stream {
		l.mu.Unlock()
		return
	}
	l.cutCause = why
	inDoubt := l.owner.doubtPath(true)
	cancel := l.streamCancel
	l.mu.Unlock()
	if inDoubt != nil {
		inDoubt()
	}
	cancel()
}
