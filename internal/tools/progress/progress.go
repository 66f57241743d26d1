// Package progress reports long waits of virtop's commands: once a command
// has been silent for a moment, it says what it waits for, how long it has
// waited and the latest reason (the last line the command printed, or one
// it set). On a terminal the report is one status line rewritten in place
// (cleared before the command's own output and at the end); elsewhere (a
// log, a pipe, a Job's pod) it is a plain line every few seconds.
package progress

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
	"k8s.io/utils/clock"
)

// Options configure a Reporter. The zero value reports plain lines to
// nothing; Start fills in the defaults.
type Options struct {
	// Out receives the reports (normally stderr).
	Out io.Writer
	// Terminal: Out is a terminal, so one status line is rewritten in
	// place instead of lines appended. IsTerminal tells.
	Terminal bool
	// Quiet: no reports at all.
	Quiet bool
	// After is how long the command must be silent before the first report
	// (default 3 s), and again after each line of its own output.
	After time.Duration
	// Every is the interval between reports while the silence lasts
	// (default 1 s on a terminal, 10 s elsewhere).
	Every time.Duration
	// Width bounds a terminal status line (default $COLUMNS, else 80), so
	// that it never wraps and can be cleared.
	Width int
	// Clock is the time source (default the real clock).
	Clock clock.WithTicker
}

// IsTerminal reports whether w is a terminal: a file whose descriptor
// answers terminal ioctls (golang.org/x/term), not merely a character
// device, which /dev/null is too.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ForStderr are the options for a command's stderr: a terminal or not, as
// it is; quiet as asked.
func ForStderr(stderr io.Writer, quiet bool) Options {
	return Options{Out: stderr, Terminal: IsTerminal(stderr), Quiet: quiet}
}

func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.After <= 0 {
		o.After = 3 * time.Second
	}
	if o.Every <= 0 {
		o.Every = 10 * time.Second
		if o.Terminal {
			o.Every = time.Second
		}
	}
	if o.Width <= 0 {
		o.Width = 80
		if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 20 {
			o.Width = n
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Line is one report: what is waited for, for how long, and the latest
// reason (omitted when empty).
func Line(what string, elapsed time.Duration, reason string) string {
	s := fmt.Sprintf("… waiting for %s (%s)", what, Elapsed(elapsed))
	if reason = strings.TrimSpace(reason); reason != "" {
		s += ": " + reason
	}
	return s
}

// Elapsed formats a wait's duration in whole seconds (minutes beyond one).
func Elapsed(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// Due says whether a report is due at now: the command has been silent for
// after since its last output (or its start), and there was no report
// during this silence yet, or the last one is every old.
func Due(now, lastOutput, lastReport time.Time, after, every time.Duration) bool {
	if now.Sub(lastOutput) < after {
		return false
	}
	return !lastReport.After(lastOutput) || now.Sub(lastReport) >= every
}

// Reporter reports one wait. Start it, route the command's own output
// through Writer, set reasons, and Stop it when the wait ends.
type Reporter struct {
	what string
	o    Options

	mu         sync.Mutex
	start      time.Time
	lastOutput time.Time
	lastReport time.Time
	reason     string
	shown      bool // a terminal status line is on screen
	stopped    bool
	stop       chan struct{}
	done       chan struct{} // closed when Start's goroutine ends; nil without one
}

// New returns a Reporter that has not started its clock goroutine; Tick
// drives it. Start is New plus the goroutine.
func New(what string, o Options) *Reporter {
	o = o.withDefaults()
	now := o.Clock.Now()
	return &Reporter{what: what, o: o, start: now, lastOutput: now, stop: make(chan struct{})}
}

// Start starts reporting the wait for what.
func Start(what string, o Options) *Reporter {
	r := New(what, o)
	if r.o.Quiet {
		return r
	}
	r.done = make(chan struct{})
	t := r.o.Clock.NewTicker(250 * time.Millisecond)
	go func() {
		defer close(r.done)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case now := <-t.C():
				r.Tick(now)
			}
		}
	}()
	return r
}

// Reason sets the latest reason, shown by the next report.
func (r *Reporter) Reason(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason = s
}

// Tick reports if a report is due at now.
func (r *Reporter) Tick(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.o.Quiet || !Due(now, r.lastOutput, r.lastReport, r.o.After, r.o.Every) {
		return
	}
	line := Line(r.what, now.Sub(r.start), r.reason)
	if r.o.Terminal {
		if w := r.o.Width - 1; len([]rune(line)) > w {
			line = string([]rune(line)[:w-1]) + "…"
		}
		fmt.Fprint(r.o.Out, "\r\033[K"+line)
		r.shown = true
	} else {
		fmt.Fprintln(r.o.Out, line)
	}
	r.lastReport = now
}

// clearLocked removes a terminal status line.
func (r *Reporter) clearLocked() {
	if r.shown {
		fmt.Fprint(r.o.Out, "\r\033[K")
		r.shown = false
	}
}

// Stop ends the reports and clears a terminal status line. It is safe to
// call more than once.
func (r *Reporter) Stop() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.stop)
	}
	r.clearLocked()
	r.mu.Unlock()
	if r.done != nil {
		<-r.done // the goroutine of Start
	}
}

// Writer wraps the command's own output: each complete line written makes
// the command not silent, becomes the latest reason, and clears a terminal
// status line before it appears.
func (r *Reporter) Writer(w io.Writer) io.Writer { return &lineWriter{r: r, w: w} }

// stamp is the elapsed-time prefix of a watch line, "[  30s] ".
var stamp = regexp.MustCompile(`^\[\s*\d+s\]\s*`)

// reasonOf is a line of the command's output as a reason: without its
// bullet and its own elapsed-time stamp (the report has its own).
func reasonOf(line string) string {
	return stamp.ReplaceAllString(strings.TrimLeft(line, "•! "), "")
}

type lineWriter struct {
	r       *Reporter
	w       io.Writer
	partial []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	r := lw.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearLocked()
	r.lastOutput = r.o.Clock.Now()
	lw.partial = append(lw.partial, p...)
	for {
		i := bytes.IndexByte(lw.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(lw.partial[:i])); line != "" {
			r.reason = reasonOf(line)
		}
		lw.partial = lw.partial[i+1:]
	}
	return lw.w.Write(p)
}
