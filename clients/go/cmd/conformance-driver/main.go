// Command conformance-driver is the Go client's driver for the client conformance suite
// (test/clients/README.md in the repository): it reads commands as JSON lines on stdin, performs
// them with the Go client, and writes what the client reports as JSON lines on stdout, each
// stamped with the wall clock in milliseconds.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// illFormed is a byte that is not UTF-8: a Go string may hold any bytes.
const illFormed = "\xff"

type command struct {
	Op          string   `json:"op"`
	Address     string   `json:"address"`
	Addresses   []string `json:"addresses"`
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Names       []string `json:"names"`
	Mode        string   `json:"mode"`
	Limit       *int     `json:"limit"`
	Owner       *string  `json:"owner"`
	TimeoutMs   *int64   `json:"timeoutMs"`
	Value       *string  `json:"value"`
	InvalidUTF8 bool     `json:"invalidUtf8"`
	// Elections: a term (decimal), and where an observer starts (decimal, inclusive).
	Term     string  `json:"term"`
	FromTerm *string `json:"fromTerm"`
	// Client options of connect.
	HeartbeatIntervalMs *int64 `json:"heartbeatIntervalMs"`
	ResumeGraceMs       *int64 `json:"resumeGraceMs"`
}

func milliseconds(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

type failure struct {
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Class   string `json:"class,omitempty"`
	Message string `json:"message,omitempty"`
}

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

// say writes one observation, stamped with the wall clock.
func say(event string, fields map[string]any) {
	observation := map[string]any{"event": event, "at": time.Now().UnixMilli()}
	for key, value := range fields {
		observation[key] = value
	}
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(observation); err != nil {
		fmt.Fprintln(os.Stderr, "driver: cannot write:", err)
		os.Exit(2)
	}
}

func sayFailure(event, id string, err error) {
	f := failureOf(err)
	say(event, map[string]any{"id": id, "kind": f.Kind, "code": f.Code, "class": f.Class, "message": f.Message})
}

// failureOf names an error of the client in the common vocabulary: its sentinels first, then
// the gRPC code of its *Error, then the code of any status it carries.
func failureOf(err error) failure {
	f := failure{Message: err.Error(), Class: fmt.Sprintf("%T", err)}
	var lockErr *lockstream.Error
	if errors.As(err, &lockErr) {
		f.Code = codeName(lockErr.Code)
	} else if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		f.Code = codeName(s.Code())
	}
	sentinels := []struct {
		target error
		kind   string
		class  string
	}{
		{lockstream.ErrClosed, "closed", "ErrClosed"},
		{lockstream.ErrLost, "lost", "ErrLost"},
		{lockstream.ErrTimeout, "timeout", "ErrTimeout"},
		{lockstream.ErrInvalidArgument, "invalid-argument", "ErrInvalidArgument"},
		{lockstream.ErrUnavailable, "unavailable", "ErrUnavailable"},
		{lockstream.ErrCanceled, "cancelled", "ErrCanceled"},
		{lockstream.ErrNotHeld, "not-held", "ErrNotHeld"},
		// The term named is not the leader's: the election's not-held.
		{lockstream.ErrNotLeader, "not-held", "ErrNotLeader"},
		{lockstream.ErrNoLeader, "not-found", "ErrNoLeader"},
		{lockstream.ErrPermissionDenied, "permission-denied", "ErrPermissionDenied"},
		{context.Canceled, "cancelled", "context.Canceled"},
	}
	for _, sentinel := range sentinels {
		if errors.Is(err, sentinel.target) {
			f.Kind, f.Class = sentinel.kind, sentinel.class
			return f
		}
	}
	if lockErr != nil {
		f.Kind = kindOfCode(lockErr.Code)
	} else {
		// Not the client's own error: a raw gRPC status, or another error, escaped it.
		f.Kind = "foreign"
	}
	return f
}

var kindOfStatus = map[string]string{
	"INVALID_ARGUMENT":    "invalid-argument",
	"DEADLINE_EXCEEDED":   "timeout",
	"ABORTED":             "lost",
	"UNAVAILABLE":         "unavailable",
	"CANCELLED":           "cancelled",
	"PERMISSION_DENIED":   "permission-denied",
	"RESOURCE_EXHAUSTED":  "resource-exhausted",
	"FAILED_PRECONDITION": "failed-precondition",
	"NOT_FOUND":           "not-found",
}

func kindOfCode(code codes.Code) string {
	if kind, ok := kindOfStatus[codeName(code)]; ok {
		return kind
	}
	return "other"
}

// codeName is the gRPC status name as the other languages spell it (DEADLINE_EXCEEDED).
func codeName(code codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[code]; ok {
		return name
	}
	return strconv.Itoa(int(code))
}

var modes = map[string]lockstream.Mode{
	"": lockstream.Mutex, "mutex": lockstream.Mutex, "read": lockstream.Read, "write": lockstream.Write,
	"semaphore": lockstream.Semaphore,
}

type driver struct {
	client      *lockstream.Client
	mu          sync.Mutex
	locks       map[string]*lockstream.Lock
	waits       map[string]context.CancelFunc
	leaderships map[string]*lockstream.Leadership
	observers   map[string]context.CancelFunc
}

func (d *driver) lockOptions(c command) []lockstream.LockOption {
	options := []lockstream.LockOption{
		lockstream.WithMode(modes[c.Mode]),
		lockstream.WithOnQueued(func(ahead int) { say("queued", map[string]any{"id": c.ID, "ahead": ahead}) }),
		lockstream.WithOnInDoubt(func() { say("in-doubt", map[string]any{"id": c.ID}) }),
		lockstream.WithOnConfirmed(func() { say("confirmed", map[string]any{"id": c.ID}) }),
		lockstream.WithOnRevokeRequested(func(reason string, deadline time.Time) {
			var forceAt any
			if !deadline.IsZero() {
				forceAt = deadline.UnixMilli()
			}
			say("revoke-requested", map[string]any{"id": c.ID, "reason": reason, "forceAt": forceAt})
		}),
	}
	if c.Limit != nil {
		options = append(options, lockstream.WithLimit(*c.Limit))
	}
	if c.Owner != nil {
		options = append(options, lockstream.WithOwner(*c.Owner))
	}
	if c.TimeoutMs != nil {
		options = append(options, lockstream.WithWaitTimeout(milliseconds(*c.TimeoutMs)))
	}
	if c.Value != nil {
		options = append(options, lockstream.WithValue([]byte(*c.Value)))
	}
	return options
}

// held reports the grant, then follows the lock: doubt and confirmation, revocation, loss.
func (d *driver) held(id string, lock *lockstream.Lock) {
	d.mu.Lock()
	d.locks[id] = lock
	d.mu.Unlock()
	fields := map[string]any{"id": id, "token": strconv.FormatUint(lock.Token(), 10)}
	if tokens := lock.Tokens(); tokens != nil {
		all := make([]string, len(tokens))
		for i, token := range tokens {
			all[i] = strconv.FormatUint(token.Token, 10)
		}
		fields["tokens"] = all
	}
	say("acquired", fields)
	go follow(id, lock)
}

// follow reports the lock's loss (doubt, confirmation and revocation are reported by the
// lock's callbacks, which the client calls before it closes Lost()).
func follow(id string, lock *lockstream.Lock) {
	<-lock.Lost()
	sayFailure("lost", id, lock.Err())
}

func (d *driver) perform(c command) {
	switch c.Op {
	case "connect":
		// Several endpoints (`addresses`), or one (`address`).
		var client *lockstream.Client
		var err error
		var options []lockstream.ClientOption
		if c.HeartbeatIntervalMs != nil {
			options = append(options, lockstream.WithHeartbeatInterval(milliseconds(*c.HeartbeatIntervalMs)))
		}
		if c.ResumeGraceMs != nil {
			options = append(options, lockstream.WithResumeGrace(milliseconds(*c.ResumeGraceMs)))
		}
		if c.Addresses != nil {
			client, err = lockstream.DialEndpoints(c.Addresses, options...)
		} else {
			client, err = lockstream.Dial(c.Address, options...)
		}
		if err != nil {
			sayFailure("error", "", err)
			return
		}
		d.client = client
		say("connected", nil)
	case "acquire":
		name := c.Name
		if c.InvalidUTF8 {
			name += illFormed
		}
		// A context is how a Go caller gives up a wait.
		ctx, cancel := context.WithCancel(context.Background())
		d.mu.Lock()
		d.waits[c.ID] = cancel
		d.mu.Unlock()
		lock, err := d.client.Lock(ctx, name, d.lockOptions(c)...)
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		d.held(c.ID, lock)
	case "try-lock":
		lock, err := d.client.TryLock(context.Background(), c.Name)
		switch {
		case errors.Is(err, lockstream.ErrLocked):
			say("not-acquired", map[string]any{"id": c.ID})
		case err != nil:
			sayFailure("error", c.ID, err)
		case lock == nil:
			say("not-acquired", map[string]any{"id": c.ID})
		default:
			d.held(c.ID, lock)
		}
	case "acquire-all":
		targets := make([]lockstream.Target, len(c.Names))
		for i, name := range c.Names {
			targets[i] = lockstream.Target{Name: name, Mode: lockstream.Mutex}
		}
		lock, err := d.client.LockAll(context.Background(), targets)
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		d.held(c.ID, lock)
	case "cancel":
		d.mu.Lock()
		cancel := d.waits[c.ID]
		d.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case "release":
		d.mu.Lock()
		lock := d.locks[c.ID]
		d.mu.Unlock()
		if err := lock.Unlock(context.Background()); err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("released", map[string]any{"id": c.ID})
	case "scope":
		d.scope(c)
	case "campaign", "resign", "proclaim", "leader", "proclaim-term", "resign-term", "observe", "stop-observe":
		d.elections(c)
	case "close":
		_ = d.client.Close()
		say("closed", nil)
	default:
		fmt.Fprintf(os.Stderr, "driver: unknown command %q\n", c.Op)
		os.Exit(2)
	}
}

// scope is Go's lock scope: the work runs while the lock is held, and leaving it is the
// deferred Unlock, whose error is the scope's.
func (d *driver) scope(c command) {
	err := func() (err error) {
		lock, err := d.client.Lock(context.Background(), c.Name)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, lock.Unlock(context.Background())) }()
		d.held(c.ID, lock)
		// The body waits for the loss, then returns normally.
		<-lock.Lost()
		return nil
	}()
	fields := map[string]any{"id": c.ID, "error": nil}
	if err != nil {
		fields["error"] = failureOf(err)
	}
	say("scope-exited", fields)
}

// elections performs the election commands.
func (d *driver) elections(c command) {
	id := map[string]any{"id": c.ID}
	switch c.Op {
	case "campaign":
		// A context is how a Go caller gives up a wait.
		ctx, cancel := context.WithCancel(context.Background())
		d.mu.Lock()
		d.waits[c.ID] = cancel
		d.mu.Unlock()
		leadership, err := d.client.Election(c.Name).Campaign(ctx, []byte(*c.Value),
			lockstream.WithOnCampaignQueued(func(ahead int) { say("queued", map[string]any{"id": c.ID, "ahead": ahead}) }),
			lockstream.WithOnCampaignInDoubt(func() { say("in-doubt", id) }),
			lockstream.WithOnCampaignConfirmed(func() { say("confirmed", id) }))
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		d.mu.Lock()
		d.leaderships[c.ID] = leadership
		d.mu.Unlock()
		say("elected", map[string]any{"id": c.ID, "term": strconv.FormatUint(leadership.Term(), 10)})
		go func() {
			<-leadership.Done()
			// Done is closed by a resignation too (Err nil): only a loss is told.
			if err := leadership.Err(); err != nil {
				sayFailure("lost", c.ID, err)
			}
		}()
	case "resign", "proclaim":
		d.mu.Lock()
		leadership := d.leaderships[c.ID]
		d.mu.Unlock()
		if c.Op == "resign" {
			if err := leadership.Resign(context.Background()); err != nil {
				sayFailure("error", c.ID, err)
				return
			}
			say("resigned", id)
			return
		}
		if err := leadership.Proclaim(context.Background(), []byte(*c.Value)); err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("proclaimed", id)
	case "leader":
		leader, err := d.client.Election(c.Name).Leader(context.Background())
		switch {
		case errors.Is(err, lockstream.ErrNoLeader):
			// Nobody leads: the answer, as etcd's ErrElectionNoLeader.
			say("no-leader", id)
		case err != nil:
			sayFailure("error", c.ID, err)
		default:
			say("leader", map[string]any{"id": c.ID, "term": strconv.FormatUint(leader.Term, 10), "value": string(leader.Value)})
		}
	case "proclaim-term", "resign-term":
		term, err := strconv.ParseUint(c.Term, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "driver: bad term:", err)
			os.Exit(2)
		}
		election := d.client.Election(c.Name)
		if c.Op == "proclaim-term" {
			if err := election.Proclaim(context.Background(), term, []byte(*c.Value)); err != nil {
				sayFailure("error", c.ID, err)
				return
			}
			say("proclaimed", id)
			return
		}
		if err := election.Resign(context.Background(), term); err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("resigned", id)
	case "observe":
		var options []lockstream.ObserveOption
		if c.FromTerm != nil {
			from, err := strconv.ParseUint(*c.FromTerm, 10, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, "driver: bad fromTerm:", err)
				os.Exit(2)
			}
			options = append(options, lockstream.FromTerm(from))
		}
		// Cancelling the context stops observing.
		ctx, cancel := context.WithCancel(context.Background())
		d.mu.Lock()
		d.observers[c.ID] = cancel
		d.mu.Unlock()
		for event := range d.client.Election(c.Name).Observe(ctx, options...) {
			if event.Kind == lockstream.EventFailed {
				f := failureOf(event.Err())
				say("observe-ended", map[string]any{"id": c.ID, "error": f})
				return
			}
			say("observed", observed(c.ID, event))
		}
		say("observe-ended", map[string]any{"id": c.ID, "error": nil})
	case "stop-observe":
		d.mu.Lock()
		cancel := d.observers[c.ID]
		d.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

// observed is an election event as the protocol's `observed` says it.
func observed(id string, event lockstream.ElectionEvent) map[string]any {
	fields := map[string]any{"id": id}
	decimal := func(term uint64) string { return strconv.FormatUint(term, 10) }
	switch event.Kind {
	case lockstream.EventTerm:
		fields["what"], fields["term"], fields["value"] = "term", decimal(event.Term), string(event.Value)
	case lockstream.EventProclaimed:
		fields["what"], fields["term"], fields["value"] = "proclaimed", decimal(event.Term), string(event.Value)
	case lockstream.EventVacant:
		fields["what"], fields["term"] = "vacant", decimal(event.AfterTerm)
	case lockstream.EventHistoryGone:
		fields["what"], fields["term"] = "history-gone", decimal(event.FirstTerm)
	case lockstream.EventSkipped:
		fields["what"], fields["term"] = "skipped", decimal(event.FirstTerm)
	default:
		fields["what"] = event.Kind.String()
	}
	return fields
}

func main() {
	d := &driver{
		locks: map[string]*lockstream.Lock{}, waits: map[string]context.CancelFunc{},
		leaderships: map[string]*lockstream.Leadership{}, observers: map[string]context.CancelFunc{},
	}
	say("ready", map[string]any{"client": "go"})
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		var c command
		if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "driver: bad command:", err)
			os.Exit(2)
		}
		// connect comes first and makes the client; the rest run side by side, as a wait must
		// not hold up the cancel or close that ends it.
		if c.Op == "connect" {
			d.perform(c)
			continue
		}
		go d.perform(c)
	}
	// End of input: the suite is done with this driver.
	if d.client != nil {
		_ = d.client.Close()
	}
}
