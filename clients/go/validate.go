// What the client checks before it sends a request: lock names, record keys and values, owners,
// durations and endpoints, against the server's limits (limits.go), so that a bad request fails
// alone.

package lockstream

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/resolver"
)

// The limits the server enforces on a request are in limits.go, generated from the table
// proto/lockstream/v1/limits.json. The client checks them before sending, so that a bad request
// fails alone: the session and every other lock of the client are not touched.

// The client's own rule on top of them: heartbeats come at most a third of the grace apart (see
// clientOptions.heartbeat), and no more often than the server accepts, so a grace is either 0
// (off) or long enough for that.
const (
	heartbeatsPerGrace = 3
	minResumeGrace     = heartbeatsPerGrace * minHeartbeat
)

// checkName says what is wrong with a lock name, or "" (the server's rules, lock-name.ts: 1 to
// MaxNameBytes of UTF-8, no control character, no U+FFFD).
func checkName(name string) string {
	return checkText("invalid lock name", "name", name, MaxNameBytes)
}

// checkRecordKey says what is wrong with a guarded record's key, or "": a lock name's rule, to
// MaxRecordKeyBytes.
func checkRecordKey(key string) string {
	return checkText("invalid record key", "key", key, MaxRecordKeyBytes)
}

// checkRecordValue says what is wrong with a guarded record's value, or "".
func checkRecordValue(value []byte) string {
	if len(value) > MaxRecordValueBytes {
		return fmt.Sprintf("record value is %d bytes; the limit is %d", len(value), MaxRecordValueBytes)
	}
	return ""
}

// checkText applies a lock name's rule to text (what it is: "name", "key"), at most maxBytes.
func checkText(rule, what, text string, maxBytes int) string {
	switch {
	case text == "":
		return fmt.Sprintf("%s: %s is empty", rule, what)
	case len(text) > maxBytes:
		return fmt.Sprintf("%s: %s is %d bytes of UTF-8; the limit is %d", rule, what, len(text), maxBytes)
	}
	for i, r := range text {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(text[i:], "\uFFFD"):
			return fmt.Sprintf("%s: %s is not valid UTF-8 (byte %d)", rule, what, i)
		case r == utf8.RuneError:
			return fmt.Sprintf("%s: %s contains U+FFFD at byte %d", rule, what, i)
		case unicode.IsControl(r):
			return fmt.Sprintf("%s: %s contains control character U+%04X at byte %d", rule, what, r, i)
		}
	}
	return ""
}

// checkLabel says what is wrong with an owner, or "": at most MaxOwnerBytes of UTF-8, no control
// character.
func checkLabel(field, value string) string {
	if len(value) > MaxOwnerBytes {
		return fmt.Sprintf("%s is %d bytes of UTF-8; the limit is %d", field, len(value), MaxOwnerBytes)
	}
	if !utf8.ValidString(value) {
		return field + " is not valid UTF-8"
	}
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		return field + " contains a control character"
	}
	return ""
}

func checkValue(value []byte) string {
	if len(value) > MaxValueBytes {
		return fmt.Sprintf("value is %d bytes; the limit is %d", len(value), MaxValueBytes)
	}
	return ""
}

// validate checks a request before it is sent; the error names the lock and the problem.
func (o *lockOptions) validate(name string) *Error {
	if problem := checkLabel("owner", o.owner); problem != "" {
		return invalidArgument(name, "%s", problem)
	}
	if problem := checkValue(o.value); problem != "" {
		return invalidArgument(name, "%s", problem)
	}
	if o.waitTimeout != nil && (*o.waitTimeout < 0 || *o.waitTimeout > MaxWaitTimeout) {
		return invalidArgument(name, "wait timeout %s is out of range: expected 0 to %s", *o.waitTimeout, MaxWaitTimeout)
	}
	if o.targets == nil {
		if problem := checkName(name); problem != "" {
			return invalidArgument(name, "%s", problem)
		}
		if problem := checkShape(o.mode, int(o.limit), o.weight); problem != "" {
			return invalidArgument(name, "%s", problem)
		}
		return nil
	}
	if n := len(o.targets); n < minLocks || n > MaxLocks {
		return invalidArgument(name, "a multi-lock takes %d to %d locks, not %d", minLocks, MaxLocks, n)
	}
	seen := make(map[string]bool, len(o.targets))
	for i, target := range o.targets {
		if problem := checkName(target.Name); problem != "" {
			return invalidArgument(name, "locks[%d]: %s", i, problem)
		}
		var weight *int32
		if target.Weight != 0 {
			w := int32(target.Weight)
			weight = &w
		}
		if problem := checkShape(target.mode(), target.Limit, weight); problem != "" {
			return invalidArgument(name, "locks[%d]: %s", i, problem)
		}
		if seen[target.Name] {
			return invalidArgument(name, "locks[%d]: %s is named twice", i, quoteName(target.Name))
		}
		seen[target.Name] = true
	}
	return nil
}

// checkShape says what is wrong with a mode and a semaphore's limit and weight, or "".
func checkShape(mode Mode, limit int, weight *int32) string {
	if mode < Mutex || mode > Semaphore {
		return fmt.Sprintf("mode %v is not Mutex, Read, Write or Semaphore", mode)
	}
	if mode != Semaphore {
		if limit != 0 || weight != nil {
			return fmt.Sprintf("a limit and a weight apply to Semaphore mode only, not %v", mode)
		}
		return ""
	}
	if limit < 1 || limit > MaxLimit {
		return fmt.Sprintf("a semaphore's limit must be 1 to %d, not %d", MaxLimit, limit)
	}
	if weight != nil && (*weight < 1 || int(*weight) > limit) {
		return fmt.Sprintf("weight %d is out of range: expected 1 to the limit (%d)", *weight, limit)
	}
	return ""
}

// validate checks the client's options; Dial returns the error, New's client every call.
func (o *clientOptions) validate() *Error {
	if problem := checkLabel("default owner", o.owner); problem != "" {
		return invalidArgument("", "%s", problem)
	}
	if o.resumeGrace < 0 || o.resumeGrace > 0 && o.resumeGrace < minResumeGrace || o.resumeGrace > MaxWaitTimeout {
		return invalidArgument("", "resume grace %s is out of range: 0 (off) or %s to %s", o.resumeGrace, minResumeGrace, MaxWaitTimeout)
	}
	if o.heartbeatInterval < 0 || o.heartbeatInterval > 0 && (o.heartbeatInterval < minHeartbeat || o.heartbeatInterval > maxHeartbeat) {
		return invalidArgument("", "heartbeat interval %s is out of range: 0 (off) or %s to %s", o.heartbeatInterval, minHeartbeat, maxHeartbeat)
	}
	return nil
}

// checkTarget says what is wrong with a Dial target, or "": host:port, or a URI of a scheme
// gRPC resolves (dns:///host:port, unix:///path, ...).
func checkTarget(target string) string {
	if u, err := url.Parse(target); err == nil && u.Scheme != "" && resolver.Get(u.Scheme) != nil {
		return ""
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		var addrErr *net.AddrError
		why := err.Error()
		if errors.As(err, &addrErr) {
			why = addrErr.Err
		}
		return fmt.Sprintf("address %s is not host:port or a gRPC target URI (dns:///host:port, unix:///path): %s",
			strconv.Quote(target), why)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("address %s: port %s is not a number from 1 to 65535", strconv.Quote(target), strconv.Quote(port))
	}
	if host == "" || net.ParseIP(host) == nil && !isHostName(host) {
		return fmt.Sprintf("address %s: %s is not a host name or an IP address", strconv.Quote(target), strconv.Quote(host))
	}
	return ""
}

func isHostName(host string) bool {
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
