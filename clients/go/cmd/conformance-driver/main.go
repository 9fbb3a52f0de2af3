// Command conformance-driver is the Go client's driver for the client conformance suite
// (test/clients/README.md in the repository): it reads commands as JSON lines on stdin, performs
// them with the Go client, and writes what the client reports as JSON lines on stdout, each
// stamped with the wall clock in milliseconds. This file reads the commands and performs the
// client's and the locks' (failures.go names errors, elections.go and records.go do the rest).
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
	// Guarded records: the key, the writer's token and the revision expected (decimal), and
	// what update-record adds.
	Key              string  `json:"key"`
	Token            string  `json:"token"`
	ExpectedRevision *string `json:"expectedRevision"`
	Add              int64   `json:"add"`
	// Client options of connect.
	HeartbeatIntervalMs *int64 `json:"heartbeatIntervalMs"`
	ResumeGraceMs       *int64 `json:"resumeGraceMs"`
}

func milliseconds(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

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
	case "put-record", "get-record", "delete-record", "update-record":
		d.records(c)
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
