package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestMalformedLineExits2(t *testing.T) {
	good := `{"t": 1, "client": "c1", "op": 1, "type": "invoke", "f": "acquire", "lock": "L", "mode": "write"}` + "\n"
	cases := map[string]string{
		"not json":          `{"t": 2, "client": "c1",`,
		"no token":          `{"t": 2, "client": "c1", "op": 1, "type": "ok", "f": "acquire", "lock": "L", "mode": "write"}`,
		"bad token":         `{"t": 2, "client": "c1", "op": 1, "type": "ok", "f": "acquire", "lock": "L", "mode": "write", "token": "12x"}`,
		"token overflow":    `{"t": 2, "client": "c1", "op": 1, "type": "ok", "f": "acquire", "lock": "L", "mode": "write", "token": "18446744073709551616"}`,
		"float time":        `{"t": 2.5, "client": "c1", "op": 2, "type": "event", "f": "lost", "lock": "L"}`,
		"bad type":          `{"t": 2, "client": "c1", "op": 2, "type": "done", "f": "acquire", "lock": "L"}`,
		"bad f":             `{"t": 2, "client": "c1", "op": 2, "type": "event", "f": "acquire", "lock": "L"}`,
		"bad mode":          `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "acquire", "lock": "M", "mode": "mutex"}`,
		"no limit":          `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "acquire", "lock": "M", "mode": "semaphore"}`,
		"orphan completion": `{"t": 2, "client": "c1", "op": 9, "type": "ok", "f": "release", "lock": "L"}`,
		"reused op":         `{"t": 2, "client": "c1", "op": 1, "type": "invoke", "f": "release", "lock": "L"}`,
		"no lock":           `{"t": 2, "client": "c1", "op": 2, "type": "event", "f": "lost"}`,
		"two values":        `{"t": 2, "client": "c1", "op": 2, "type": "event", "f": "lost", "lock": "L"} {}`,
		"check no token":    `{"t": 2, "client": "c1", "op": 2, "type": "invoke", "f": "check", "lock": "L"}`,
		"check no held":     `{"t": 2, "client": "c1", "op": 2, "type": "ok", "f": "check", "lock": "L", "token": "5"}`,
		"check held string": `{"t": 2, "client": "c1", "op": 2, "type": "ok", "f": "check", "lock": "L", "token": "5", "held": "yes"}`,
		"check as event":    `{"t": 2, "client": "c1", "op": 2, "type": "event", "f": "check", "lock": "L", "token": "5"}`,
	}
	for name, bad := range cases {
		later := `{"t": 3, "client": "c1", "op": 5, "type": "event", "f": "in_doubt", "lock": "L"}`
		p := writeFile(t, "h.jsonl", good+"\n"+bad+"\n"+later)
		code, out, errs := runCLI(t, "--history", p)
		if code != 2 || !strings.Contains(errs, "h.jsonl:3:") || out != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 2 naming line 3", name, code, errs, out)
		}
	}
	code, _, errs := runCLI(t, "--history", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != 2 {
		t.Errorf("missing file: exit %d %s", code, errs)
	}
	code, _, _ = runCLI(t)
	if code != 2 {
		t.Errorf("no --history: exit %d", code)
	}
}

func TestCLIPassAndFail(t *testing.T) {
	dir := t.TempDir()
	nemesis := writeFile(t, "n.jsonl", `{"t": 5000000100000, "type": "start", "nemesis": "partition-follower", "detail": "zk2 cut from zk1, zk3"}
{"t": 5000020000000, "type": "stop", "nemesis": "partition-follower", "detail": "healed"}
`)
	good := writeFile(t, "good.jsonl", generate(2, 6, 60, largeLocks))
	report := filepath.Join(dir, "good.html")
	summary := filepath.Join(dir, "good.json")
	code, out, errs := runCLI(t, "--history", good, "--nemesis", nemesis, "--report", report, "--json", summary)
	if code != 0 || !strings.HasSuffix(lastLine(out), " operations, 0 anomalies") || errs != "" {
		t.Fatalf("good history: exit %d, stdout:\n%s\nstderr: %s", code, out, errs)
	}
	var js map[string]any
	b, err := os.ReadFile(summary)
	if err != nil || json.Unmarshal(b, &js) != nil || js["exit_code"].(float64) != 0 {
		t.Errorf("summary: %v %s", err, b)
	}
	if _, err := os.Stat(report); err != nil {
		t.Error(err)
	}

	bad := &hist{}
	bad.acquire("c1", "L", "write", 0, 0.001, 5)
	bad.acquire("c2", "L", "write", 1.0, 11.002, 6)
	bad.event("c1", "L", "lost", 12.345)
	badPath := writeFile(t, "bad.jsonl", bad.text())
	report = filepath.Join(dir, "bad.html")
	code, out, _ = runCLI(t, "--history", badPath, "--report", report)
	if code != 1 || lastLine(out) != "3 operations, 1 anomalies" {
		t.Fatalf("bad history: exit %d, stdout:\n%s", code, out)
	}
	viz, err := os.ReadFile(filepath.Join(dir, "bad.porcupine.html"))
	if err != nil || !bytes.Contains(viz, []byte("<html")) {
		t.Errorf("porcupine visualization: %v", err)
	}
	html, _ := os.ReadFile(report)
	if !bytes.Contains(html, []byte("bad.porcupine.html")) {
		t.Errorf("report does not link Porcupine's visualization")
	}
}

func TestPorcupineTimeoutIsNotSuccess(t *testing.T) {
	p := writeFile(t, "h.jsonl", mutexHandoffs(50, []string{"c1", "c2"}).text())
	code, out, _ := runCLI(t, "--history", p, "--timeout", "1ns")
	if code != 2 || !strings.Contains(out, "TIMED OUT") || lastLine(out) != "100 operations, 0 anomalies" {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
}

func TestReportShowsTimelineNemesisAndConflicts(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.001, 5)
	b.event("c1", "L", "in_doubt", 2)
	b.event("c1", "L", "confirmed", 3)
	b.acquire("c2", "L", "write", 1.0, 11.002, 6)
	b.event("c1", "L", "lost", 12.345)
	b.acquireNot("c3", "L", "write", 4, 5, "fail")
	b.checkTok("c3", "L", 5, 6, 6.5, true)
	b.acquireN("s1", "S", "semaphore", 2, 0, 1, 1)
	b.release("s1", "S", 2, 2.5, "info")
	hp := writeFile(t, "h.jsonl", b.text())
	np := writeFile(t, "n.jsonl", `{"t": 500000000, "type": "start", "nemesis": "partition-follower", "detail": "zk2 cut from zk1, zk3"}
{"t": 9000000000, "type": "stop", "nemesis": "partition-follower", "detail": "healed"}
{"t": 10000000000, "type": "start", "nemesis": "kill", "detail": "s1 SIGKILL"}
`)
	report := filepath.Join(t.TempDir(), "r.html")
	if code, out, errs := runCLI(t, "--history", hp, "--nemesis", np, "--report", report); code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"partition-follower: zk2 cut from zk1, zk3", // a labelled band
		"0.500 s to 9.000 s",                        // its span, relative to the first event
		"kill: s1 SIGKILL",                          // a band left open to the end
		`id="lock-L"`, `id="lock-S"`,                // a section per lock
		`id="an0"`, // the conflict, highlighted and linked
		"c1 held write (token 5) until 12.345 s (lost)",
		"c1 write token 5: asked 0.000 s, granted 0.001 s, until 12.345 s (lost), in doubt 2.000 s to 3.000 s (confirmed)",
		"c3 check of token 5: asked 6.000 s, answered held at 6.500 s",
		"c3 write acquire failed",
		"s1 semaphore token 1",
		"r.porcupine.html",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script src", "<link", "@import", "url(http"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("report is not self-contained: %q", bad)
		}
	}
}

func TestSecondHoldOfOneLockIsAnInputError(t *testing.T) {
	b := &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.acquire("c1", "L", "write", 0.2, 0.3, 2) // c1 never released, lost or doubted its first hold
	code, out, errs := runCLI(t, "--history", writeFile(t, "h.jsonl", b.text()))
	if code != 2 || !strings.Contains(errs, "h.jsonl:3: client c1 invokes acquire of L while it still holds it") || out != "" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	// After an unconfirmed in_doubt the client still holds the first (it was not told lost): an
	// input error by default; with --doubt-ends-hold the client gave it up there.
	b = &hist{}
	b.acquire("c1", "L", "write", 0, 0.1, 1)
	b.event("c1", "L", "in_doubt", 0.15)
	b.acquire("c1", "L", "write", 0.2, 0.3, 2)
	p := writeFile(t, "h.jsonl", b.text())
	code, out, errs = runCLI(t, "--history", p)
	if code != 2 || !strings.Contains(errs, "h.jsonl:4: client c1 invokes acquire of L while it still holds it (granted on line 2, in doubt since line 3") || out != "" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	code, out, errs = runCLI(t, "--history", p, "--doubt-ends-hold")
	if code != 0 || !strings.Contains(out, "--doubt-ends-hold") {
		t.Errorf("--doubt-ends-hold: exit %d, stdout %s, stderr %q", code, out, errs)
	}
	h, r := checkTextOpt(t, b.text(), Options{DoubtEndsHold: true})
	expect(t, r, "L", true, 0)
	if hd := h.Holds[0]; hd.Reason != EndInDoubt || hd.Stop != ns(0.15) {
		t.Errorf("first hold ended %s at %d", hd.Reason, hd.Stop)
	}
}
