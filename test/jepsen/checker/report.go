package main

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
)

// WriteReport writes the HTML report (the timeline comes next).
func WriteReport(path string, h *History, r *Result, nemesis []NemesisEvent, viz string) error {
	s := "<!doctype html><meta charset=utf-8><title>lockstream-check</title><pre>"
	for _, a := range r.Anomalies {
		s += html.EscapeString(a.Message) + "\n"
	}
	if viz != "" {
		s += fmt.Sprintf("<a href=%q>Porcupine's visualization</a>", filepath.Base(viz))
	}
	return os.WriteFile(path, []byte(s+"</pre>"), 0o644)
}
