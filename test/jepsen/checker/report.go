package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The report: figures and anomalies as text, then per lock a Jepsen-like timeline, one lane
// per client, as inline SVG in a horizontally scrolling box (client names stay in view).

const (
	laneH   = 16
	axisH   = 34 // nemesis labels above, time labels below
	marginR = 40
)

var modeFill = map[string]string{"write": "#4a78c2", "read": "#4fa36b", "semaphore": "#8a63c7"}

type band struct {
	from, to int64
	name     string
	detail   string
}

// bands pairs each nemesis start with the next stop of the same name.
func bands(h *History, nemesis []NemesisEvent) []band {
	sorted := append([]NemesisEvent(nil), nemesis...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].T < sorted[j].T })
	open := map[string][]band{}
	var out []band
	for _, n := range sorted {
		if n.Type == "start" {
			open[n.Nemesis] = append(open[n.Nemesis], band{from: n.T, to: h.TMax, name: n.Nemesis, detail: n.Detail})
			continue
		}
		if q := open[n.Nemesis]; len(q) > 0 {
			b := q[0]
			open[n.Nemesis] = q[1:]
			b.to = n.T
			out = append(out, b)
		} else { // a stop with no start: a fault already on when the schedule began
			out = append(out, band{from: min(h.T0, n.T), to: n.T, name: n.Nemesis, detail: n.Detail})
		}
	}
	for _, q := range open {
		out = append(out, q...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

// tickStep picks a round step in seconds so that ticks are at least 90 px apart.
func tickStep(pps float64) float64 {
	for _, s := range []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600} {
		if s*pps >= 90 {
			return s
		}
	}
	return 7200
}

type timeline struct {
	h   *History
	pps float64 // pixels per second
	w   float64
}

func (tl *timeline) x(t int64) float64 { return 6 + float64(t-tl.h.T0)/1e9*tl.pps }

// scale picks pixels per second: the median hold about 8 px wide (at least 40 px/s), the whole
// history at most 80,000 px and at least 1,000 px wide.
func scale(h *History, dur float64) float64 {
	var lens []float64
	for _, hd := range h.Holds {
		if hd.Ended {
			lens = append(lens, float64(hd.Stop-hd.Grant)/1e9)
		}
	}
	pps := 40.0
	if len(lens) > 0 {
		sort.Float64s(lens)
		if m := lens[len(lens)/2]; m > 0 {
			pps = math.Max(pps, 8/m)
		}
	}
	return math.Max(1000/dur, math.Min(pps, 80000/dur))
}

func esc(s string) string { return html.EscapeString(s) }

// WriteReport writes the HTML report to path; viz, if set, is Porcupine's visualization to link.
func WriteReport(path string, h *History, r *Result, nemesis []NemesisEvent, viz string) error {
	var b bytes.Buffer
	dur := math.Max(float64(h.TMax-h.T0)/1e9, 1e-3)
	tl := &timeline{h: h, pps: scale(h, dur)}
	tl.w = tl.x(h.TMax) + marginR

	title := "lockstream-check: " + filepath.Base(r.History)
	verdict, color := "no anomalies", "#1d7a3a"
	if len(r.Anomalies) > 0 {
		verdict, color = fmt.Sprintf("%d anomalies", len(r.Anomalies)), "#c0262d"
	} else if r.TimedOut {
		verdict, color = "UNKNOWN: Porcupine timed out", "#b86e00"
	}
	fmt.Fprintf(&b, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:16px 24px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 4px}
.verdict{font-weight:bold;color:%s;font-size:18px}
pre{background:#f6f6f6;padding:8px 10px;overflow-x:auto;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
ol.anomalies{max-height:320px;overflow-y:auto;background:#fff4f4;border:1px solid #e8b4b4;padding:6px 6px 6px 40px;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.row{display:flex;border:1px solid #ddd}
.names{flex:none;background:#fafafa;border-right:1px solid #ddd}
.scroll{overflow-x:auto;flex:1}
svg text{font:11px ui-monospace,Menlo,Consolas,monospace}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:14px;height:10px;vertical-align:middle;margin-right:4px}
</style></head><body>
<h1>%s</h1><div class="verdict">%s</div>
`, esc(title), color, esc(title), esc(verdict))
	var text bytes.Buffer
	r.WriteText(&text)
	var figures []string
	for _, l := range strings.Split(strings.TrimRight(text.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "ANOMALY ") {
			figures = append(figures, l)
		}
	}
	fmt.Fprintf(&b, "<pre>%s</pre>\n", esc(strings.Join(figures, "\n")))
	if viz != "" {
		fmt.Fprintf(&b, `<p>Porcupine found no linearization: <a href="%s">its own visualization</a> (longest partial linearizations).</p>`+"\n", esc(filepath.Base(viz)))
	}
	if len(r.Anomalies) > 0 {
		b.WriteString("<h2>Anomalies</h2>\n<ol class=\"anomalies\">\n")
		for i, a := range r.Anomalies {
			fmt.Fprintf(&b, "<li><a href=\"#an%d\">%s</a> %s</li>\n", i, esc(a.Kind), esc(a.Message))
		}
		b.WriteString("</ol>\n")
	}
	bs := bands(h, nemesis)
	if len(bs) > 0 {
		b.WriteString("<h2>Nemesis</h2>\n<pre>")
		for _, n := range bs {
			fmt.Fprintf(&b, "%s to %s  %s: %s\n", esc(h.secs(n.from)), esc(h.secs(n.to)), esc(n.name), esc(n.detail))
		}
		b.WriteString("</pre>\n")
	}
	b.WriteString(`<h2>Timelines</h2><p class="legend">`)
	for _, m := range []string{"write", "read", "semaphore"} {
		fmt.Fprintf(&b, `<span><i class="sw" style="background:%s"></i>%s hold</span>`, modeFill[m], m)
	}
	inDoubtEnd := ""
	if h.Options.DoubtEndsHold {
		inDoubtEnd = `<b style="color:#d17a00">?</b> in doubt (--doubt-ends-hold), `
	}
	b.WriteString(`<span><i class="sw" style="background:repeating-linear-gradient(45deg,#fff 0 2px,transparent 2px 4px),#999"></i>in doubt ` +
		`(from its <b style="color:#d17a00">╎</b> in_doubt to its <b style="color:#1d7a3a">╎</b> confirmed, or to the hold's end)</span>` +
		`<span>end: <b>|</b> released, <b style="color:#c0262d">✕</b> lost, ` + inDoubtEnd + `<b style="color:#777">?</b> release unknown, <b>▶</b> still held</span>` +
		`<span>check: <b>●</b> answered held, <b>○</b> answered not held</span>` +
		`<span><b style="color:#c0262d">╷</b> failed acquire, <b style="color:#888">╷</b> acquire unknown</span>` +
		`<span><i class="sw" style="background:rgba(220,30,40,.35);outline:1px solid #d00"></i>conflict</span>` +
		`<span><i class="sw" style="background:rgba(240,170,40,.25)"></i>nemesis</span>` +
		"</p><p>Hover a bar for its times. Scroll sideways; time is seconds since the first event.</p>\n")

	highlights := map[int][]int{} // hold id -> anomaly indexes
	for i, a := range r.Anomalies {
		for _, id := range a.Holds {
			highlights[id] = append(highlights[id], i)
		}
	}
	for _, lock := range h.Locks {
		tl.lock(&b, lock, r, bs, highlights)
	}
	b.WriteString("</body></html>\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func (tl *timeline) lock(b *bytes.Buffer, lock string, r *Result, bs []band, highlights map[int][]int) {
	h := tl.h
	lanes := map[string]int{}
	var names []string
	var holds []*Hold
	var attempts []Attempt
	addLane := func(c string) {
		if _, ok := lanes[c]; !ok {
			lanes[c] = 0
			names = append(names, c)
		}
	}
	for _, hd := range h.Holds {
		if hd.Lock == lock {
			holds = append(holds, hd)
			addLane(hd.Client)
		}
	}
	for _, a := range h.Attempts {
		if a.Lock == lock {
			attempts = append(attempts, a)
			addLane(a.Client)
		}
	}
	var checks []*TokenCheck
	for _, c := range h.Checks {
		if c.Lock == lock {
			checks = append(checks, c)
			addLane(c.Client)
		}
	}
	var streams []*ObserveStream // elections: observers' lanes
	for _, st := range h.Streams {
		if st.Lock == lock {
			streams = append(streams, st)
			addLane(st.Client)
		}
	}
	var calls []*TermCall
	for _, c := range h.TermCalls {
		if c.Lock == lock {
			calls = append(calls, c)
			addLane(c.Client)
		}
	}
	sort.Strings(names)
	for i, c := range names {
		lanes[c] = i
	}
	height := axisH + len(names)*laneH + 4
	y := func(c string) float64 { return float64(axisH + lanes[c]*laneH) }
	var fig *LockFigures
	for i := range r.Locks {
		if r.Locks[i].Lock == lock {
			fig = &r.Locks[i]
		}
	}
	fmt.Fprintf(b, "<h2 id=\"lock-%s\">lock %s</h2>\n", esc(lock), esc(lock))
	if fig != nil {
		fmt.Fprintf(b, "<p>%d grants; Porcupine: %s; %d anomalies</p>\n", fig.Grants, esc(fig.Porcupine), fig.Anomalies)
	}
	fmt.Fprintf(b, "<div class=\"row\"><svg class=\"names\" width=\"110\" height=\"%d\">", height)
	for _, c := range names {
		fmt.Fprintf(b, `<text x="104" y="%.0f" text-anchor="end">%s</text>`, y(c)+12, esc(c))
	}
	fmt.Fprintf(b, "</svg><div class=\"scroll\"><svg width=\"%.0f\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n", tl.w, height)
	fmt.Fprintf(b, `<defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="4" fill="#fff" opacity=".7"/></pattern></defs>`+"\n")
	// Lanes, alternately shaded.
	for i := range names {
		if i%2 == 1 {
			fmt.Fprintf(b, `<rect x="0" y="%d" width="%.0f" height="%d" fill="#f4f6f9"/>`, axisH+i*laneH, tl.w, laneH)
		}
	}
	// Nemesis bands over every lane, labelled on the top row.
	for _, n := range bs {
		x0, x1 := tl.x(n.from), tl.x(n.to)
		fmt.Fprintf(b, `<rect x="%.1f" y="0" width="%.1f" height="%d" fill="rgba(240,170,40,.22)"><title>%s %s to %s: %s</title></rect>`,
			x0, math.Max(x1-x0, 1), height, esc(n.name), esc(h.secs(n.from)), esc(h.secs(n.to)), esc(n.detail))
		fmt.Fprintf(b, `<text x="%.1f" y="11" fill="#8a5200">%s</text>`+"\n", x0+2, esc(clip(n.name+": "+n.detail, (x1-x0)/7)))
	}
	// Time axis.
	step := tickStep(tl.pps)
	for s := 0.0; s <= float64(h.TMax-h.T0)/1e9+1e-9; s += step {
		x := 6 + s*tl.pps
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ccc"/><text x="%.1f" y="%d" fill="#555">%s</text>`,
			x, x, axisH-12, height, x+2, axisH-3, strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", s), "0"), ".")+" s")
	}
	b.WriteString("\n")
	// Conflicts under the bars, as red spans on the lanes of the holds involved.
	byID := map[int]*Hold{}
	for _, hd := range holds {
		byID[hd.ID] = hd
	}
	for i, a := range r.Anomalies {
		if a.Lock != lock || a.To <= a.From {
			continue
		}
		for j, id := range a.Holds {
			hd := byID[id]
			idAttr := ""
			if j == 0 {
				idAttr = fmt.Sprintf(` id="an%d"`, i)
			}
			fmt.Fprintf(b, `<rect%s x="%.1f" y="%.0f" width="%.1f" height="%d" fill="rgba(220,30,40,.35)" stroke="#d00"><title>%s</title></rect>`,
				idAttr, tl.x(a.From)-2, y(hd.Client)-1, math.Max(tl.x(a.To)-tl.x(a.From), 2)+4, laneH, esc(a.Message))
		}
	}
	checkByID := map[int]*TokenCheck{}
	for _, c := range checks {
		checkByID[c.ID] = c
	}
	for i, a := range r.Anomalies { // check anomalies: an anchor at the check's answer
		if a.Lock == lock && len(a.Checks) > 0 {
			c := checkByID[a.Checks[0]]
			fmt.Fprintf(b, `<circle id="an%d" cx="%.1f" cy="%.0f" r="7" fill="rgba(220,30,40,.25)" stroke="#d00" stroke-width="2"><title>%s</title></circle>`,
				i, tl.x(c.Done), y(c.Client)+laneH/2, esc(a.Message))
		}
	}
	for i, a := range r.Anomalies { // election anomalies of an observer's or a caller's line
		if _, ok := lanes[a.Client]; a.Lock == lock && len(a.Holds) == 0 && len(a.Checks) == 0 && a.Client != "" && ok {
			fmt.Fprintf(b, `<circle id="an%d" cx="%.1f" cy="%.0f" r="7" fill="rgba(220,30,40,.25)" stroke="#d00" stroke-width="2"><title>%s</title></circle>`,
				i, tl.x(a.T), y(a.Client)+laneH/2, esc(a.Message))
		}
	}
	for i, a := range r.Anomalies { // token anomalies: an anchor at the later grant
		if a.Lock == lock && a.To <= a.From && len(a.Holds) > 0 && len(a.Checks) == 0 {
			hd := byID[a.Holds[len(a.Holds)-1]]
			fmt.Fprintf(b, `<circle id="an%d" cx="%.1f" cy="%.0f" r="6" fill="none" stroke="#d00" stroke-width="2"><title>%s</title></circle>`,
				i, tl.x(hd.Grant), y(hd.Client)+laneH/2, esc(a.Message))
		}
	}
	b.WriteString("\n")
	for _, hd := range holds {
		tl.hold(b, hd, y(hd.Client), len(highlights[hd.ID]) > 0)
	}
	for _, a := range attempts {
		x, yy := tl.x(a.Done), y(a.Client)
		col, what := "#888", "acquire outcome unknown"
		if a.Outcome == "fail" {
			col, what = "#c0262d", "acquire failed"
		} else if a.Outcome == "open" {
			what = "acquire never completed"
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="1.5"><title>%s %s %s: asked %s, %s %s</title></line>`+"\n",
			x, x, yy+8, yy+laneH-1, col, esc(a.Client), esc(a.Mode), what, esc(h.secs(a.Invoke)), esc(a.Outcome), esc(h.secs(a.Done)+" "+a.Error))
	}
	for _, st := range streams { // an Observe stream: a thin line, a tick per term, a "v" per vacancy
		yy := y(st.Client) + laneH/2
		end := st.Done
		if st.Outcome == "open" {
			end = h.TMax
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#9ab"><title>%s observe %d (%s): %s to %s, %s</title></line>`+"\n",
			tl.x(st.Invoke), tl.x(end), yy, yy, esc(st.Client), st.Op, esc(fromText(st)), esc(h.secs(st.Invoke)), esc(h.secs(end)), esc(st.Outcome))
		for _, ev := range st.Told {
			x := tl.x(ev.T)
			switch ev.Kind {
			case "term":
				fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#1f5fa8" stroke-width="1.5"><title>%s told term %d at %s</title></line>`,
					x, x, yy-6, yy+6, esc(st.Client), ev.Term, esc(h.secs(ev.T)))
			case "vacant":
				fmt.Fprintf(b, `<text x="%.1f" y="%.0f" fill="#777" text-anchor="middle">v<title>%s told vacant after term %d at %s</title></text>`,
					x, yy+4, esc(st.Client), ev.Term, esc(h.secs(ev.T)))
			default:
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.0f" r="2" fill="#888"><title>%s told %s</title></circle>`, x, yy, esc(st.Client), esc(tellText(ev)))
			}
		}
		b.WriteString("\n")
	}
	for _, c := range calls { // a proclaim or resign: a small square at its answer
		fill := map[string]string{"ok": "#111", "fail": "#fff"}[c.Outcome]
		if fill == "" {
			fill = "#bbb"
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="5" height="5" fill="%s" stroke="#111"><title>%s %s of term %d: asked %s, %s %s %s</title></rect>`+"\n",
			tl.x(c.Done)-2.5, y(c.Client)+laneH/2-2.5, fill, esc(c.Client), esc(c.F), c.Term, esc(h.secs(c.Invoke)), esc(c.Outcome), esc(c.Code), esc(h.secs(c.Done)))
	}
	for _, c := range checks { // a dot at the answer, a thin line back to the ask
		x0, x1, yy := tl.x(c.Invoke), tl.x(c.Done), y(c.Client)+laneH/2
		fill, answer := "#111", "held"
		if !c.Held {
			fill, answer = "#fff", "not held"
		}
		fmt.Fprintf(b, `<g><title>%s check of token %d: asked %s, answered %s at %s</title><line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#111"/>`+
			`<circle cx="%.1f" cy="%.0f" r="3" fill="%s" stroke="#111"/></g>`+"\n",
			esc(c.Client), c.Token, esc(h.secs(c.Invoke)), answer, esc(h.secs(c.Done)), x0, x1, yy, yy, x1, yy, fill)
	}
	b.WriteString("</svg></div></div>\n")
}

func clip(s string, chars float64) string {
	n := int(chars)
	if n <= 1 {
		return ""
	}
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func (tl *timeline) hold(b *bytes.Buffer, hd *Hold, y float64, conflict bool) {
	h := tl.h
	end := hd.End()
	if !hd.Ended {
		end = h.TMax
	}
	x0, x1 := tl.x(hd.Grant), tl.x(end)
	w := math.Max(x1-x0, 1)
	stroke := ""
	if conflict {
		stroke = ` stroke="#d00" stroke-width="2"`
	}
	tip := fmt.Sprintf("%s %s token %d: asked %s, granted %s, until %s", hd.Client, hd.Mode, hd.Token,
		h.secs(hd.Invoke), h.secs(hd.Grant), h.until(hd))
	if hd.Ended && !hd.UpperInf && hd.Upper > hd.Stop {
		tip += ", release ok " + h.secs(hd.Upper)
	}
	for _, d := range hd.Doubts {
		if d.Confirmed {
			tip += fmt.Sprintf(", in doubt %s to %s (confirmed)", h.secs(d.From), h.secs(d.To))
		} else {
			tip += fmt.Sprintf(", in doubt from %s, never confirmed", h.secs(d.From))
		}
	}
	fmt.Fprintf(b, `<g><title>%s</title><rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="%s"%s/>`,
		esc(tip), x0, y+2, w, laneH-4, modeFill[hd.Mode], stroke)
	for _, d := range hd.Doubts { // hatched, marked where the doubt began and where it was confirmed
		fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="url(#hatch)"/>`,
			tl.x(d.From), y+2, math.Max(tl.x(d.To)-tl.x(d.From), 1), laneH-4)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#d17a00" stroke-width="2"/>`, tl.x(d.From), tl.x(d.From), y, y+laneH)
		if d.Confirmed {
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#1d7a3a" stroke-width="2"/>`, tl.x(d.To), tl.x(d.To), y, y+laneH)
		}
	}
	if hd.Ended && !hd.UpperInf && hd.Upper > hd.Stop { // the release in flight
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s"/>`, x1, tl.x(hd.Upper), y+laneH/2, y+laneH/2, modeFill[hd.Mode])
	}
	label := fmt.Sprint(hd.Token)
	if float64(len(label))*6.7+4 > w {
		label = "…" + label[max(0, len(label)-4):]
		if float64(len(label))*6.7+4 > w {
			label = ""
		}
	}
	if label != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" fill="#fff">%s</text>`, x0+2, y+12, label)
	}
	switch hd.Reason {
	case EndReleased:
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#111" stroke-width="2"/>`, x1, x1, y+1, y+laneH-1)
	case EndLost:
		fmt.Fprintf(b, `<path d="M%.1f %.0fl6 8M%.1f %.0fl-6 8" stroke="#c0262d" stroke-width="2"/>`, x1-3, y+4, x1+3, y+4)
	case EndInDoubt, EndUnknown:
		col := "#d17a00"
		if hd.Reason == EndUnknown {
			col = "#777"
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" fill="%s" font-weight="bold">?</text>`, x1+1, y+12, col)
	case EndHeld:
		fmt.Fprintf(b, `<path d="M%.1f %.0fl6 5l-6 5z" fill="#111"/>`, x1, y+3)
	}
	b.WriteString("</g>\n")
}

func fromText(st *ObserveStream) string {
	switch {
	case st.Reference:
		return fmt.Sprintf("the reference, from term %d", st.FromTerm)
	case st.HasFrom:
		return fmt.Sprintf("from term %d", st.FromTerm)
	}
	return "the current state"
}
