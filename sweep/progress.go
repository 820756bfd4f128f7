package sweep

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/recfile"
)

// progress prints a line per step with the time left; on a terminal the
// line of the running step is redrawn every second.
type progress struct {
	w        io.Writer
	tty      bool
	total    int // steps this run makes at most; 0: unknown (a knee search)
	started  int
	begun    time.Time
	stepBase time.Duration // a step's expected wall time before one ran
	spent    time.Duration // wall time of the steps run so far
	after    time.Duration // the idle step's expected wall time, after the steps
	mu       sync.Mutex
	stopTick chan struct{}
	line     string
}

// stepOverhead is what a step adds to its --step before one step measured
// it: record attaching and writing its files, the load's drain.
const stepOverhead = 4 * time.Second

func newProgress(w io.Writer, total int, step time.Duration) *progress {
	p := &progress{w: w, total: total, begun: time.Now(), stepBase: step + stepOverhead}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
}

// eta is the expected time left, the current step and the idle step
// included, from the mean wall time of the steps run so far.
func (p *progress) eta(now time.Time, stepStart time.Time) time.Duration {
	per := p.stepBase
	if done := p.started - 1; done > 0 {
		per = p.spent / time.Duration(done)
	}
	left := time.Duration(p.total-p.started+1)*per - now.Sub(stepStart) + p.after
	return max(left, 0).Round(time.Second)
}

func (p *progress) begin(st *recfile.SweepStep) {
	if p.w == nil {
		return
	}
	p.started++
	start := time.Now()
	head := p.head(st)
	if !p.tty {
		fmt.Fprintf(p.w, "%s: started%s\n", head, p.left(start, start))
		return
	}
	p.stopTick = make(chan struct{})
	go func(stop chan struct{}) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			now := time.Now()
			p.redraw(fmt.Sprintf("%s: %v in%s", head, now.Sub(start).Round(time.Second), p.left(now, start)))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}(p.stopTick)
}

// head names the step: its number of this run's, its phase in a knee
// search, pattern and rate.
func (p *progress) head(st *recfile.SweepStep) string {
	n := fmt.Sprintf("%d/%d", p.started, p.total)
	if p.total == 0 {
		n = fmt.Sprintf("%d (%s)", p.started, st.Phase)
	}
	return fmt.Sprintf("sweep: step %s %s %s msg/s", n, st.Pattern, fmtRate(st.RateAsked))
}

// left is ", about T left", or "" when the number of steps is unknown.
func (p *progress) left(now, stepStart time.Time) string {
	if p.total == 0 {
		return ""
	}
	return fmt.Sprintf(", about %v left", p.eta(now, stepStart))
}

func (p *progress) redraw(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pad := max(0, len(p.line)-len(s))
	fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
	p.line = s
}

func (p *progress) end(st *recfile.SweepStep) {
	if p.w == nil {
		return
	}
	p.spent += time.Duration(st.WallNs)
	if p.stopTick != nil {
		close(p.stopTick)
		p.stopTick = nil
		p.redraw("")
		fmt.Fprint(p.w, "\r")
	}
	fmt.Fprintf(p.w, "%s: %s (%v, %v elapsed)\n", p.head(st),
		StepLine(st), time.Duration(st.WallNs).Round(100*time.Millisecond), time.Since(p.begun).Round(time.Second))
}

// StepLine says in a few words what a step measured.
func StepLine(st *recfile.SweepStep) string {
	switch st.Status {
	case recfile.SweepDone:
	case recfile.SweepFailed:
		return "failed: " + st.Error
	default:
		return st.Status
	}
	jit := ""
	if st.JITUtil >= 0.0005 {
		jit = fmt.Sprintf(", %.3f of it JIT compiling", st.JITUtil)
	}
	s := fmt.Sprintf("achieved %s msg/s, broker %.3f CPU (%s%s), system %.3f, p50 %v p99 %v, %.2f|%.2f switches/msg",
		fmtRate(st.RateAchieved), st.BrokerUtil, st.BrokerUtilSource, jit, st.SystemUtil,
		time.Duration(st.LatencyNs.P50Ns), time.Duration(st.LatencyNs.P99Ns), st.SwitchesPerMsgThreads, st.SwitchesPerMsgCPUs)
	if st.Missing > 0 || st.Lossy() {
		// Losses of the recording beside the load's: a step whose
		// consumer got every message may still have lost most markers.
		s += fmt.Sprintf(", %d messages missing, %d markers lost, %d events dropped", st.Missing, st.MarkersLost, st.DroppedEvents)
	}
	if st.Lossy() {
		s += " — LOSSY"
	}
	if st.Saturated {
		s += " — SATURATED"
		switch st.Bottleneck {
		case recfile.BottleneckBroker:
			s += " (the broker's CPU full)"
		case recfile.BottleneckLoad:
			s += fmt.Sprintf(" (the load's CPUs full, %.2f busy: not the broker)", st.LoadCPUsBusy)
		case recfile.BottleneckNeither:
			s += " (neither the broker's nor the load's CPUs full)"
		}
	}
	return s
}

func fmtRate(r float64) string {
	if r == float64(int64(r)) {
		return fmt.Sprint(int64(r))
	}
	return fmt.Sprintf("%.1f", r)
}
