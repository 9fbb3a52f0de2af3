package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Records by hand: holds of a mutex r (acquire, release), increments of counter k of r (in store
// b.store), and the final reads of it.

func (b *hist) storeName() string {
	if b.store == "" {
		return "records"
	}
	return b.store
}

// inc records an increment of counter k of lock by client as the holder of tok: invoked at inv,
// read at read (0: no read event), completed with typ ("" never) at done, code on a failure.
// It returns its id.
func (b *hist) inc(client, lock string, tok uint64, inv, read, done float64, typ, code string) string {
	op := b.next(client)
	id := fmt.Sprintf("%s:%d", client, op)
	shape := fmt.Sprintf(`, "store": %q, "key": "k", "id": %q`, b.storeName(), id)
	b.line(inv, client, op, "invoke", "increment", lock, shape+fmt.Sprintf(`, "token": "%d"`, tok))
	if read > 0 {
		b.line(read, client, op, "event", "read", lock, fmt.Sprintf(`, "store": %q, "key": "k", "length": 0, "revision": "0"`, b.storeName()))
	}
	if typ != "" {
		extra := shape
		if code != "" {
			extra += fmt.Sprintf(`, "code": %q, "error": "%s: test"`, code, code)
		}
		b.line(done, client, op, typ, "increment", lock, extra)
	}
	return id
}

// final records a final read of counter k of lock through server: value ids at revision rev.
func (b *hist) final(lock, server string, t float64, rev uint64, ids ...string) *hist {
	op := b.next("final")
	if ids == nil {
		ids = []string{}
	}
	value, _ := json.Marshal(ids)
	shape := fmt.Sprintf(`, "store": %q, "key": "k", "server": %q`, b.storeName(), server)
	b.line(t, "final", op, "invoke", "final", lock, shape)
	b.line(t+0.001, "final", op, "ok", "final", lock, shape+fmt.Sprintf(`, "value": %s, "revision": "%d"`, value, rev))
	return b
}

// records is a correct run: c1 holds r (token 5) and makes two increments, then an unknown one
// that was applied; c2 (token 6) makes one unknown that was not; c1, paused past its loss after
// its read, writes late with token 7 and is refused; c3 (token 8) makes one after that.
func records() (*hist, []string) {
	b := &hist{}
	var ids []string
	b.acquire("c1", "r", "write", 0.0, 0.1, 5)
	ids = append(ids, b.inc("c1", "r", 5, 0.2, 0.21, 0.3, "ok", ""), b.inc("c1", "r", 5, 0.4, 0.41, 0.5, "ok", ""))
	ids = append(ids, b.inc("c1", "r", 5, 0.6, 0.61, 1.6, "info", "UNAVAILABLE"))
	b.release("c1", "r", 1.7, 1.8, "ok")
	b.acquire("c2", "r", "write", 0.5, 1.81, 6)
	b.inc("c2", "r", 6, 1.9, 1.91, 6.9, "info", "TIMEOUT")
	b.release("c2", "r", 7.0, 7.1, "ok")
	b.acquire("c1", "r", "write", 2.0, 7.11, 7)
	ids = append(ids, b.inc("c1", "r", 7, 7.2, 7.21, 7.3, "ok", ""))
	lateInv := 7.4
	b.inc("c1", "r", 7, lateInv, 7.41, 12.5, "fail", "FAILED_PRECONDITION")
	b.event("c1", "r", "lost", 7.45) // the harness: paused at 7.45
	b.acquire("c3", "r", "write", 3.0, 10.0, 8)
	ids = append(ids, b.inc("c3", "r", 8, 10.1, 10.11, 10.2, "ok", ""))
	b.release("c3", "r", 10.3, 10.4, "ok")
	b.final("r", "s1", 20, 9, ids...)
	b.final("r", "s2", 20.1, 9, ids...)
	b.final("r", "s3", 20.2, 8, ids[:4]...) // a member behind: a lower revision is not the final value
	return b, ids
}

func recordFigures(t *testing.T, r *Result) RecordFigures {
	t.Helper()
	if len(r.Records) != 1 || r.RecordsTotal == nil {
		t.Fatalf("records %v, want one counter", r.Records)
	}
	return r.Records[0]
}

func TestRecordsCorrectPasses(t *testing.T) {
	b, _ := records()
	_, r := b.check(t)
	if r.ExitCode() != 0 {
		t.Fatalf("exit %d: %v %v", r.ExitCode(), messages(r), r.Undecided)
	}
	f := recordFigures(t, r)
	want := RecordFigures{Store: "records", Counter: "records r/k", Increments: 7, Acknowledged: 4, Failed: 1, Refused: 1, LateRefused: 1,
		Unknown: 2, UnknownApplied: 1, Final: 5, Revision: 9}
	if f != want {
		t.Errorf("figures %+v, want %+v", f, want)
	}
	var text strings.Builder
	r.WriteText(&text)
	figures := "7 increments: 4 acknowledged (0 late), 1 failed (1 refused by the guard, 1 late), 2 unknown (1 applied); " +
		"final values: 5 ids = 4 acknowledged + 1 unknown applied; 0 lost, 0 duplicated, 0 failed applied; 0 anomalies"
	for _, line := range []string{"counter records r/k: " + figures, "store records: " + figures, "records: " + figures} {
		if !strings.Contains(text.String(), line+"\n") {
			t.Errorf("output\n%s\nwant %q", text.String(), line)
		}
	}
}

// Two stores at once (guarded records and PostgreSQL, pg): one counter k of r in each, judged
// apart, with figures per store. In pg, c1 (token 7) was paused after its read and its late
// write refused as a stale token (STALE_TOKEN, the fenced transaction's refusal): late, by the guard.
func storesHistory(pgLost bool) *hist {
	b, _ := records()
	b.store = "pg"
	b.acquire("c4", "r", "write", 20.5, 21.0, 9)
	p1 := b.inc("c4", "r", 9, 21.1, 21.11, 21.2, "ok", "")
	b.inc("c4", "r", 9, 21.2, 21.21, 28.0, "fail", "STALE_TOKEN")
	b.event("c4", "r", "lost", 21.25) // the harness: paused after that read
	b.acquire("c5", "r", "write", 21.0, 25.0, 10)
	p3 := b.inc("c5", "r", 10, 25.1, 25.11, 25.2, "ok", "")
	b.release("c5", "r", 25.3, 25.4, "ok")
	if pgLost {
		return b.final("r", "pg", 30, 2, p3) // c4's first increment lost
	}
	return b.final("r", "pg", 30, 2, p1, p3)
}

func TestRecordsStoresJudgedApart(t *testing.T) {
	_, r := storesHistory(false).check(t)
	if r.ExitCode() != 0 {
		t.Fatalf("exit %d: %v %v", r.ExitCode(), messages(r), r.Undecided)
	}
	if len(r.Records) != 2 || len(r.RecordsByStore) != 2 {
		t.Fatalf("counters %+v, stores %+v; want two of each", r.Records, r.RecordsByStore)
	}
	pg := RecordFigures{Store: "pg", Increments: 3, Acknowledged: 2, Failed: 1, Refused: 1, LateRefused: 1, Final: 2, Revision: 0}
	if f := r.RecordsByStore[0]; f != pg {
		t.Errorf("pg figures %+v, want %+v", f, pg)
	}
	if f := r.RecordsByStore[1]; f.Store != "records" || f.Increments != 7 || f.LateRefused != 1 || f.Final != 5 {
		t.Errorf("records figures %+v", f)
	}
	if f := *r.RecordsTotal; f.Increments != 10 || f.Acknowledged != 6 || f.LateRefused != 2 || f.Final != 7 {
		t.Errorf("total %+v", f)
	}
	var text strings.Builder
	r.WriteText(&text)
	line := "store pg: 3 increments: 2 acknowledged (0 late), 1 failed (1 refused by the guard, 1 late), 0 unknown (0 applied); " +
		"final values: 2 ids = 2 acknowledged + 0 unknown applied; 0 lost, 0 duplicated, 0 failed applied; 0 anomalies\n"
	if !strings.Contains(text.String(), line) {
		t.Errorf("output\n%s\nwant %q", text.String(), line)
	}
}

func TestRecordsLostInOneStoreCaughtThere(t *testing.T) {
	b := storesHistory(true)
	recordsCaught(t, b, "lost", "counter pg r/k: c4's increment c4:2 (token 9), acknowledged at 21.200 s, is not in the final value")
	_, r := b.check(t)
	if r.RecordsByStore[0].Lost != 1 || r.RecordsByStore[1].Lost != 0 {
		t.Errorf("stores %+v", r.RecordsByStore)
	}
}

// kinds are the kinds of the anomalies found, in order, joined by commas.
func kinds(r *Result) string {
	var out []string
	for _, a := range r.Anomalies {
		out = append(out, a.Kind)
	}
	return strings.Join(out, ",")
}

// recordsCaught checks b and wants exactly one anomaly, of kind, saying says.
func recordsCaught(t *testing.T, b *hist, kind, says string) {
	t.Helper()
	_, r := b.check(t)
	if r.ExitCode() != 1 || len(r.Anomalies) != 1 || r.Anomalies[0].Kind != kind ||
		!strings.Contains(r.Anomalies[0].Message, says) {
		t.Fatalf("exit %d, anomalies %+v; want one %s saying %q", r.ExitCode(), r.Anomalies, kind, says)
	}
}

func TestRecordsLostUpdateCaught(t *testing.T) {
	b, ids := records()
	b.lines = b.lines[:len(b.lines)-6]
	b.final("r", "s1", 20, 9, ids[0], ids[2], ids[3], ids[4])
	recordsCaught(t, b, "lost", "c1's increment c1:3 (token 5), acknowledged at 0.500 s, is not in the final value")
}

func TestRecordsAppliedTwiceCaught(t *testing.T) {
	b, ids := records()
	b.lines = b.lines[:len(b.lines)-6]
	b.final("r", "s1", 20, 9, append(ids, ids[1])...)
	recordsCaught(t, b, "duplicate", "c1:3 (ok) was applied 2 times (at [1 5])")
}

func TestRecordsFailedAppliedAndUnknownIdsCaught(t *testing.T) {
	b, ids := records()
	b.lines = b.lines[:len(b.lines)-6]
	b.final("r", "s1", 20, 9, append(ids, "c1:8")...) // c1's late write, refused
	recordsCaught(t, b, "failed-applied", "c1's increment c1:8 failed at 12.500 s (FAILED_PRECONDITION: test) but is in the final value")
	b, ids = records()
	b.lines = b.lines[:len(b.lines)-6]
	b.final("r", "s1", 20, 9, append(ids, "c9:1")...)
	recordsCaught(t, b, "unknown", "c9:1 (at 5 of 6) is no increment of this counter")
}

func TestRecordsOrderCaught(t *testing.T) {
	b, ids := records()
	b.lines = b.lines[:len(b.lines)-6]
	b.final("r", "s1", 20, 9, ids[1], ids[0], ids[2], ids[3], ids[4])
	recordsCaught(t, b, "order", "c1:3 (invoked 0.400 s) is at 0, before c1:2 (at 1)")
}

func TestRecordsFinalReadsThatDisagreeCaught(t *testing.T) {
	b, ids := records()
	b.final("r", "s3", 21, 9, ids[1:]...)
	_, r := b.check(t)
	if r.ExitCode() != 1 || kinds(r) != "final" {
		t.Fatalf("exit %d, anomalies %v", r.ExitCode(), messages(r))
	}
}

// The planted bug unguarded-records: c1 reads, is paused past its loss, c2 is granted and makes
// two increments, c1 wakes and its late write (its read's value and its own id) is accepted.
func TestRecordsLateWriteAcceptedCaught(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "r", "write", 0.0, 0.1, 5)
	a1 := b.inc("c1", "r", 5, 0.2, 0.21, 0.3, "ok", "")
	b.event("c1", "r", "lost", 0.45)
	b.acquire("c2", "r", "write", 0.3, 3.0, 6)
	b.inc("c2", "r", 6, 3.1, 3.11, 3.2, "ok", "")
	b.inc("c2", "r", 6, 3.3, 3.31, 3.4, "ok", "")
	b.release("c2", "r", 3.5, 3.6, "ok")
	op := b.next("c1") // c1's read at 0.41 (of [a1]), its write at 6.0
	b.line(0.4, "c1", op, "invoke", "increment", "r", `, "key": "k", "id": "c1:late", "token": "5"`)
	b.line(0.41, "c1", op, "event", "read", "r", `, "key": "k"`)
	b.line(6.01, "c1", op, "ok", "increment", "r", `, "key": "k", "id": "c1:late"`)
	b.final("r", "s1", 10, 5, a1, "c1:late")
	_, r := b.check(t)
	// The unfenced write is not judged: c1's read came before c2's grant. Its effect is.
	if r.ExitCode() != 1 || kinds(r) != "lost,lost" {
		t.Fatalf("exit %d, anomalies %v", r.ExitCode(), messages(r))
	}
	if f := recordFigures(t, r); f.Lost != 2 || f.Final != 2 || f.Acknowledged != 4 || f.LateAccepted != 1 {
		t.Errorf("figures %+v", f)
	}
}

func TestRecordsUnfencedWriteCaught(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "r", "write", 0.0, 0.1, 5)
	b.event("c1", "r", "lost", 0.45)
	b.acquire("c2", "r", "write", 0.3, 3.0, 6)
	a := b.inc("c1", "r", 5, 3.1, 3.11, 3.2, "ok", "") // read after c2's grant: sent by a holder no more
	b.final("r", "s1", 10, 1, a)
	recordsCaught(t, b, "unfenced", "c1's write of c1:3 (token 5, sent after its read at 3.110 s) was acknowledged at 3.200 s, "+
		"though c2 had been granted r (token 6) at 3.000 s, after c1's grant at 0.100 s")
}

func TestRecordsWithoutFinalReadIsUndecided(t *testing.T) {
	b, _ := records()
	b.lines = b.lines[:len(b.lines)-6]
	_, r := b.check(t)
	if r.ExitCode() != 2 || len(r.Undecided) != 1 || !strings.Contains(r.Undecided[0], "counter records r/k: no final read") {
		t.Errorf("exit %d, undecided %v", r.ExitCode(), r.Undecided)
	}
}

func TestRecordsMalformedLinesExit2(t *testing.T) {
	good := `{"t": 1, "client": "c1", "op": 1, "type": "invoke", "f": "increment", "lock": "r", "key": "k", "id": "c1:1", "token": "5"}` + "\n"
	cases := map[string]string{
		"increment without id":    `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "increment", "lock": "r", "key": "k", "token": "5"}`,
		"increment without token": `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "increment", "lock": "r", "key": "k", "id": "c1:2"}`,
		"increment without key":   `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "increment", "lock": "r", "id": "c1:2", "token": "5"}`,
		"id used twice":           `{"t": 2, "client": "c2", "op": 1, "type": "invoke", "f": "increment", "lock": "r", "key": "k", "id": "c1:1", "token": "6"}`,
		"read of no increment":    `{"t": 2, "client": "c1", "op": 7, "type": "event", "f": "read", "lock": "r", "key": "k"}`,
		"read of another counter": `{"t": 2, "client": "c1", "op": 1, "type": "event", "f": "read", "lock": "r", "key": "j"}`,
		"final without value":     `{"t": 2, "client": "c1", "op": 2, "type": "ok", "f": "final", "lock": "r", "key": "k", "revision": "1"}`,
		"value not strings":       `{"t": 2, "client": "f", "op": 2, "type": "ok", "f": "final", "lock": "r", "key": "k", "value": [1], "revision": "1"}`,
	}
	for name, bad := range cases {
		p := writeFile(t, "h.jsonl", good+"\n"+bad+"\n")
		code, out, errs := runCLI(t, "--history", p)
		if code != 2 || !strings.Contains(errs, "h.jsonl:3:") || out != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 2 naming line 3", name, code, errs, out)
		}
	}
}
