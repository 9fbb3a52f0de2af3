// Command lockstream-check judges a lock history recorded by the partition test suite: it
// decides with Porcupine, and with a direct interval check, whether any two clients believed
// they held one lock in conflicting modes at once, or saw fencing tokens that did not grow.
// It shares no code with lockstream. See README.md for the model.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status (0 safe, 1 anomalies, 2 input error or
// unknown verdict).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockstream-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	historyPath := fs.String("history", "", "history, JSON lines (required)")
	nemesisPath := fs.String("nemesis", "", "nemesis schedule, JSON lines (optional)")
	reportPath := fs.String("report", "", "write an HTML report here")
	jsonPath := fs.String("json", "", "write the figures and anomalies here as JSON")
	doubtEndsHold := fs.Bool("doubt-ends-hold", false, "an in_doubt not followed by confirmed ends the hold at the in_doubt "+
		"(a client that stops at in_doubt); by default a hold lasts until it is released or lost")
	timeout := fs.Duration("timeout", 60*time.Second, "time for Porcupine over all locks; past it the verdict is unknown (exit 2)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *historyPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: lockstream-check --history h.jsonl [--nemesis n.jsonl] [--report report.html] [--json summary.json] [--timeout 60s] [--doubt-ends-hold]")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "lockstream-check: error:", err)
		return 2
	}
	h, err := load(*historyPath, Options{DoubtEndsHold: *doubtEndsHold})
	if err != nil {
		return fail(err)
	}
	var nemesis []NemesisEvent
	if *nemesisPath != "" {
		f, err := os.Open(*nemesisPath)
		if err != nil {
			return fail(err)
		}
		nemesis, err = ParseNemesis(f, *nemesisPath)
		f.Close()
		if err != nil {
			return fail(err)
		}
	}
	r := Check(h, *timeout)
	r.History = *historyPath
	if *reportPath != "" {
		viz := ""
		if len(r.illegal) > 0 {
			viz = strings.TrimSuffix(*reportPath, ".html") + ".porcupine.html"
			if err := WritePorcupineViz(h, r, viz, *timeout); err != nil {
				fmt.Fprintln(stderr, "lockstream-check: Porcupine's visualization:", err)
				viz = ""
			}
		}
		if err := WriteReport(*reportPath, h, r, nemesis, viz); err != nil {
			return fail(err)
		}
	}
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(struct {
			*Result
			ExitCode int `json:"exit_code"`
		}{r, r.ExitCode()}, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			return fail(err)
		}
	}
	r.WriteText(stdout)
	return r.ExitCode()
}

func load(path string, opt Options) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	events, err := ParseHistory(f, path)
	if err != nil {
		return nil, err
	}
	return BuildHistory(events, path, opt)
}

// WritePorcupineViz checks the locks Porcupine found illegal again, verbosely, and writes its
// own visualization of the longest partial linearizations.
func WritePorcupineViz(h *History, r *Result, path string, timeout time.Duration) error {
	var holds []*Hold
	for _, hd := range h.Holds {
		if r.illegal[hd.Lock] {
			holds = append(holds, hd)
		}
	}
	var checks []*TokenCheck
	for _, c := range h.Checks {
		if r.illegal[c.Lock] {
			checks = append(checks, c)
		}
	}
	model := LockModel()
	_, info := porcupine.CheckOperationsVerbose(model, Operations(h, holds, checks, clientIDs(h)), timeout)
	return porcupine.VisualizePath(model, info, path)
}
