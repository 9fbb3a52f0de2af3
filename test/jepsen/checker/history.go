package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// An Event is one line of a history, validated.
type Event struct {
	Line   int
	T      int64 // CLOCK_MONOTONIC nanoseconds
	Client string
	Op     int64
	HasOp  bool
	Type   string // invoke | ok | fail | info | event
	F      string // acquire | release | check | in_doubt | confirmed | lost
	Lock   string
	Mode   string // write | read | semaphore (acquires only)
	Limit  int    // semaphores only
	Token  uint64
	HasTok bool
	Held   bool // a check's answer (ok only)
	Error  string

	// Elections (election.go): the term a term/proclaimed event, a proclaim or a resign names; a
	// vacant's after_term; a history_gone's or skipped's first_term; an observe's from_term.
	Term      uint64
	HasTerm   bool
	FromTerm  uint64
	HasFrom   bool
	Reference bool   // an observe that replays the election's whole history (the reference)
	Stale     bool   // a proclaim or resign the client believes names a term that is over
	Code      string // a proclaim's or resign's status code name, on its completion; an increment's

	// Records (records.go): the counter (store, key of Lock) an increment, read or final read is
	// of; an increment's id; a final read's value and revision, and the server it read through.
	Store    string
	Key      string
	IncID    string
	Value    []string
	Revision uint64
	Server   string
}

// InputError is a history or nemesis file the checker cannot read: exit 2.
type InputError struct {
	File string
	Line int
	Msg  string
}

func (e *InputError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

type rawEvent struct {
	T      json.RawMessage `json:"t"`
	Client *string         `json:"client"`
	Op     json.RawMessage `json:"op"`
	Type   *string         `json:"type"`
	F      *string         `json:"f"`
	Lock   *string         `json:"lock"`
	Mode   *string         `json:"mode"`
	Limit  json.RawMessage `json:"limit"`
	Token  json.RawMessage `json:"token"`
	Held   json.RawMessage `json:"held"`
	Error  *string         `json:"error"`

	Term      json.RawMessage `json:"term"`
	AfterTerm json.RawMessage `json:"after_term"`
	FirstTerm json.RawMessage `json:"first_term"`
	FromTerm  json.RawMessage `json:"from_term"`
	Reference json.RawMessage `json:"reference"`
	Stale     json.RawMessage `json:"stale"`
	Code      *string         `json:"code"`

	Store    *string         `json:"store"`
	Key      *string         `json:"key"`
	ID       *string         `json:"id"`
	Value    json.RawMessage `json:"value"`
	Revision json.RawMessage `json:"revision"`
	Server   *string         `json:"server"`
}

// readLines calls fn for every non-blank line, numbered from 1. A history line has no length
// limit worth guessing, so lines are read whole.
func readLines(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(n, line); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parseInt reads a JSON integer (no fraction, no exponent, no quotes).
func parseInt(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %s", s)
	}
	return v, nil
}

// parseToken reads a fencing token: a decimal string (as specified) or a bare JSON integer,
// as uint64 either way, so tokens past 2^53 keep every digit.
func parseToken(raw json.RawMessage) (uint64, error) {
	s := string(bytes.TrimSpace(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("token %q is not a decimal uint64", s)
	}
	return v, nil
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// operationF are the f of invokes and their completions.
var operationF = map[string]bool{"acquire": true, "release": true, "check": true, "observe": true, "proclaim": true,
	"resign": true, "increment": true, "final": true}

var validF = map[string]map[string]bool{
	"invoke": operationF,
	"ok":     operationF,
	"fail":   operationF,
	"info":   operationF,
	"event": {"in_doubt": true, "confirmed": true, "lost": true,
		"term": true, "proclaimed": true, "vacant": true, "history_gone": true, "skipped": true, "read": true},
}

// observeEvents are what an Observe stream tells, each with the term field it needs.
var observeEvents = map[string]string{
	"term": "term", "proclaimed": "term", "vacant": "after_term", "history_gone": "first_term", "skipped": "first_term",
}

// parseBool reads an optional JSON boolean.
func parseBool(raw json.RawMessage, name string) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf(`%q must be true or false, not %s`, name, bytes.TrimSpace(raw))
}

// parseEvent validates one line on its own; pairing comes later.
func parseEvent(n int, line []byte) (Event, error) {
	var raw rawEvent
	e := Event{Line: n}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return e, fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return e, fmt.Errorf("more than one JSON value on the line")
	}
	if !present(raw.T) {
		return e, fmt.Errorf(`missing "t"`)
	}
	t, err := parseInt(raw.T)
	if err != nil {
		return e, fmt.Errorf(`"t": %v`, err)
	}
	if t < 0 || t >= math.MaxInt64-1 {
		return e, fmt.Errorf(`"t" out of range: %d`, t)
	}
	e.T = t
	if raw.Client == nil || *raw.Client == "" {
		return e, fmt.Errorf(`missing "client"`)
	}
	e.Client = *raw.Client
	if raw.Type == nil {
		return e, fmt.Errorf(`missing "type"`)
	}
	e.Type = *raw.Type
	fs, ok := validF[e.Type]
	if !ok {
		return e, fmt.Errorf(`"type" %q is not invoke, ok, fail, info or event`, e.Type)
	}
	if raw.F == nil || !fs[*raw.F] {
		f := "<missing>"
		if raw.F != nil {
			f = strconv.Quote(*raw.F)
		}
		return e, fmt.Errorf(`"f" %s is not valid for type %q`, f, e.Type)
	}
	e.F = *raw.F
	if raw.Lock == nil || *raw.Lock == "" {
		return e, fmt.Errorf(`missing "lock"`)
	}
	e.Lock = *raw.Lock
	if present(raw.Op) {
		if e.Op, err = parseInt(raw.Op); err != nil {
			return e, fmt.Errorf(`"op": %v`, err)
		}
		e.HasOp = true
	} else if e.Type != "event" {
		return e, fmt.Errorf(`missing "op" on a %s`, e.Type)
	}
	if raw.Mode != nil {
		switch *raw.Mode {
		case "write", "read", "semaphore":
			e.Mode = *raw.Mode
		default:
			return e, fmt.Errorf(`"mode" %q is not write, read or semaphore`, *raw.Mode)
		}
	}
	if e.F == "acquire" && e.Type == "invoke" && e.Mode == "" {
		return e, fmt.Errorf(`acquire invoke without "mode"`)
	}
	if present(raw.Limit) {
		l, err := parseInt(raw.Limit)
		if err != nil || l < 1 || l > math.MaxInt32 {
			return e, fmt.Errorf(`"limit" must be a positive integer`)
		}
		e.Limit = int(l)
	}
	if e.Mode == "semaphore" && e.Type == "invoke" && e.Limit == 0 {
		return e, fmt.Errorf(`semaphore acquire without "limit"`)
	}
	if present(raw.Token) {
		if e.Token, err = parseToken(raw.Token); err != nil {
			return e, err
		}
		e.HasTok = true
	}
	if e.F == "acquire" && e.Type == "ok" && !e.HasTok {
		return e, fmt.Errorf(`acquire ok without "token"`)
	}
	if e.F == "check" && e.Type == "invoke" && !e.HasTok {
		return e, fmt.Errorf(`check invoke without "token"`)
	}
	if e.F == "check" && e.Type == "ok" {
		switch string(bytes.TrimSpace(raw.Held)) {
		case "true":
			e.Held = true
		case "false":
		case "":
			return e, fmt.Errorf(`check ok without "held"`)
		default:
			return e, fmt.Errorf(`"held" must be true or false, not %s`, bytes.TrimSpace(raw.Held))
		}
	}
	if raw.Error != nil {
		e.Error = *raw.Error
	}
	if err := parseElection(&e, &raw); err != nil {
		return e, err
	}
	return e, parseRecords(&e, &raw)
}

// parseElection reads the fields of the elections' lines (README: "Elections").
func parseElection(e *Event, raw *rawEvent) error {
	var err error
	if field, ok := observeEvents[e.F]; ok {
		if !e.HasOp {
			return fmt.Errorf(`%s event without "op" (the observe it was told on)`, e.F)
		}
		value := map[string]json.RawMessage{"term": raw.Term, "after_term": raw.AfterTerm, "first_term": raw.FirstTerm}[field]
		if !present(value) {
			return fmt.Errorf(`%s event without %q`, e.F, field)
		}
		if e.Term, err = parseToken(value); err != nil {
			return fmt.Errorf(`%q: %v`, field, err)
		}
		e.HasTerm = true
	}
	if (e.F == "proclaim" || e.F == "resign") && present(raw.Term) {
		if e.Term, err = parseToken(raw.Term); err != nil {
			return fmt.Errorf(`"term": %v`, err)
		}
		e.HasTerm = true
	}
	if (e.F == "proclaim" || e.F == "resign") && e.Type == "invoke" && !e.HasTerm {
		return fmt.Errorf(`%s invoke without "term"`, e.F)
	}
	if e.F == "observe" && present(raw.FromTerm) {
		if e.FromTerm, err = parseToken(raw.FromTerm); err != nil {
			return fmt.Errorf(`"from_term": %v`, err)
		}
		if e.FromTerm == 0 {
			return fmt.Errorf(`"from_term" must be at least 1`)
		}
		e.HasFrom = true
	}
	if e.Reference, err = parseBool(raw.Reference, "reference"); err != nil {
		return err
	}
	if e.Stale, err = parseBool(raw.Stale, "stale"); err != nil {
		return err
	}
	if raw.Code != nil {
		e.Code = *raw.Code
	}
	return nil
}

// ParseHistory reads a whole history. Any line that does not parse is an *InputError
// naming the line: nothing is skipped but blank lines.
func ParseHistory(r io.Reader, name string) ([]Event, error) {
	var events []Event
	err := readLines(r, func(n int, line []byte) error {
		e, err := parseEvent(n, line)
		if err != nil {
			return &InputError{File: name, Line: n, Msg: err.Error()}
		}
		events = append(events, e)
		return nil
	})
	if err != nil {
		if _, ok := err.(*InputError); ok {
			return nil, err
		}
		return nil, &InputError{File: name, Msg: err.Error()}
	}
	if len(events) == 0 {
		return nil, &InputError{File: name, Msg: "empty history"}
	}
	return events, nil
}

// A NemesisEvent is one line of the optional fault schedule.
type NemesisEvent struct {
	Line    int    `json:"-"`
	T       int64  `json:"t"`
	Type    string `json:"type"`
	Nemesis string `json:"nemesis"`
	Detail  string `json:"detail"`
}

// ParseNemesis reads the fault schedule: {"t", "type": start|stop, "nemesis", "detail"}.
func ParseNemesis(r io.Reader, name string) ([]NemesisEvent, error) {
	var out []NemesisEvent
	err := readLines(r, func(n int, line []byte) error {
		var raw struct {
			T       json.RawMessage `json:"t"`
			Type    string          `json:"type"`
			Nemesis string          `json:"nemesis"`
			Detail  string          `json:"detail"`
		}
		fail := func(msg string) error { return &InputError{File: name, Line: n, Msg: msg} }
		if err := json.Unmarshal(line, &raw); err != nil {
			return fail(fmt.Sprintf("not a JSON object: %v", err))
		}
		if !present(raw.T) {
			return fail(`missing "t"`)
		}
		t, err := parseInt(raw.T)
		if err != nil {
			return fail(`"t": ` + err.Error())
		}
		if raw.Type != "start" && raw.Type != "stop" {
			return fail(fmt.Sprintf(`"type" %q is not start or stop`, raw.Type))
		}
		if raw.Nemesis == "" {
			return fail(`missing "nemesis"`)
		}
		out = append(out, NemesisEvent{Line: n, T: t, Type: raw.Type, Nemesis: raw.Nemesis, Detail: raw.Detail})
		return nil
	})
	if err != nil {
		if _, ok := err.(*InputError); ok {
			return nil, err
		}
		return nil, &InputError{File: name, Msg: err.Error()}
	}
	return out, nil
}
