package sweep

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/brokertrace/brokertrace/recfile"
)

// Patterns of SweepOptions.Pattern.
const (
	PatternRegular = "regular"
	PatternBursty  = "bursty"
	PatternBoth    = "both"
)

// ErrConfig wraps every error in what the sweep was asked to do.
var ErrConfig = errors.New("sweep")

// ErrOptionsDiffer is returned when the output directory holds a sweep
// asked with other options and Restart is not set.
var ErrOptionsDiffer = errors.New("sweep options differ")

// ErrInterrupted is returned when the context ended the sweep early; the
// sweep.json then says which steps are done and a rerun resumes.
var ErrInterrupted = errors.New("sweep interrupted")

// ErrBroker wraps failures to start, reach or keep the broker.
var ErrBroker = errors.New("broker")

// Config is one sweep.
type Config struct {
	// Exe is the brokertrace binary the steps run (os.Executable).
	Exe string
	// Out is the sweep directory: sweep.json and one directory per step.
	Out string
	// Options are what sweep.json records; Target and Command are set
	// from PID/Port/Name or Command by Run.
	Options recfile.SweepOptions
	// Attach: exactly one of PID, Port, Name; or Options.Command (run
	// mode).
	PID, Port int
	Name      string
	// Drain is how long each load waits for its last messages.
	Drain time.Duration
	// Restart discards a stored sweep whose options differ.
	Restart bool
	// Progress receives the progress lines (nil: none).
	Progress io.Writer
	// Version is brokertrace's, for sweep.json.
	Version string
	// Grace is how long the run-mode broker has to exit after SIGTERM.
	Grace time.Duration
}

// protocols are the load's URL schemes the sweep knows, with their
// default ports, so that a run-mode broker can be waited for.
var protocols = map[string]string{"nats": "4222", "stomp": "61613", "mqtt": "1883", "amqp": "5672", "redis": "6379", "tcp": ""}

// check validates the options and fills Protocol and Target.
func (c *Config) check() error {
	o := &c.Options
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: --url %q: give a broker URL such as nats://127.0.0.1:4222", ErrConfig, o.URL)
	}
	if _, ok := protocols[u.Scheme]; !ok {
		return fmt.Errorf("%w: --url %q: scheme %q is not one load speaks (nats, stomp, mqtt, amqp, redis, tcp)", ErrConfig, o.URL, u.Scheme)
	}
	o.Protocol = u.Scheme
	if err := c.checkTarget(); err != nil {
		return err
	}
	if err := checkSearch(o); err != nil {
		return err
	}
	switch {
	case slices.ContainsFunc(o.Rates, func(r float64) bool { return !(r > 0) || math.IsInf(r, 0) }):
		return fmt.Errorf("%w: rates must be positive messages per second: %v", ErrConfig, o.Rates)
	case !slices.Contains([]string{PatternRegular, PatternBursty, PatternBoth}, o.Pattern):
		return fmt.Errorf("%w: --pattern %q: give regular, bursty or both", ErrConfig, o.Pattern)
	case o.Pattern != PatternRegular && o.Burst < 2:
		return fmt.Errorf("%w: --burst %d: a burst needs at least 2 messages", ErrConfig, o.Burst)
	case o.WarmupNs < 0 || o.CooldownNs < 0:
		return fmt.Errorf("%w: --warmup and --cooldown must not be negative", ErrConfig)
	case o.StepNs-o.WarmupNs-o.CooldownNs < int64(500*time.Millisecond):
		return fmt.Errorf("%w: --step %v leaves %v after --warmup and --cooldown: the measured window needs at least 500ms",
			ErrConfig, time.Duration(o.StepNs), time.Duration(o.StepNs-o.WarmupNs-o.CooldownNs))
	case !(o.Behind > 0 && o.Behind <= 1):
		return fmt.Errorf("%w: --behind %v: give a ratio in (0, 1], e.g. 0.95", ErrConfig, o.Behind)
	case c.Out == "":
		return fmt.Errorf("%w: --out is empty", ErrConfig)
	}
	if o.Pattern == PatternRegular {
		o.Burst = 0
	}
	return nil
}

// checkSearch checks the rates: given, or a knee search's start, factor
// and refinements.
func checkSearch(o *recfile.SweepOptions) error {
	switch {
	case !o.Search && len(o.Rates) == 0:
		return fmt.Errorf("%w: no rates: give --rates, --from/--to/--steps, or no --to to search for the knee", ErrConfig)
	case !o.Search:
		return nil
	case len(o.Rates) > 0:
		return fmt.Errorf("%w: a knee search chooses its rates: give no --rates", ErrConfig)
	case !(o.From >= 1) || math.IsInf(o.From, 0):
		return fmt.Errorf("%w: --from %v: give the search's first rate, at least 1 msg/s", ErrConfig, o.From)
	case !(o.Factor > 1) || math.IsInf(o.Factor, 0):
		return fmt.Errorf("%w: --factor %v: the climb needs a factor above 1, e.g. 2", ErrConfig, o.Factor)
	case o.Refine < 0:
		return fmt.Errorf("%w: --refine %d: give 0 or more bisections", ErrConfig, o.Refine)
	case o.Beyond:
		return fmt.Errorf("%w: --beyond climbs a given ladder past saturation; the knee search stops at the knee", ErrConfig)
	}
	return nil
}

// checkTarget sets Options.Target from the attach flags or the command.
func (c *Config) checkTarget() error {
	o := &c.Options
	var targets []string
	if c.PID != 0 {
		targets = append(targets, "pid "+strconv.Itoa(c.PID))
	}
	if c.Port != 0 {
		targets = append(targets, "port "+strconv.Itoa(c.Port))
	}
	if c.Name != "" {
		targets = append(targets, "name "+c.Name)
	}
	if len(o.Command) > 0 {
		targets = append(targets, "run")
	}
	if len(targets) != 1 {
		return fmt.Errorf("%w: give exactly one of --pid, --port, --name or a broker command after --", ErrConfig)
	}
	o.Target = targets[0]
	if len(o.Command) > 0 {
		if _, err := exec.LookPath(o.Command[0]); err != nil {
			return fmt.Errorf("%w: cannot run %s: %v", ErrConfig, o.Command[0], err)
		}
	}
	if len(o.Command) == 0 && o.CPUQuota != 0 {
		return fmt.Errorf("%w: --cpu-quota throttles a broker the sweep starts (after --); an attached broker keeps its cgroup", ErrConfig)
	}
	if len(o.Command) == 0 && o.BrokerCPUs != "" {
		return fmt.Errorf("%w: --cpus pins a broker the sweep starts (after --); an attached broker keeps its CPUs", ErrConfig)
	}
	return nil
}

// recordTarget is the record flag that names the broker.
func (c *Config) recordTarget(runPID int) []string {
	switch {
	case runPID != 0:
		return []string{"--pid", strconv.Itoa(runPID)}
	case c.PID != 0:
		return []string{"--pid", strconv.Itoa(c.PID)}
	case c.Port != 0:
		return []string{"--port", strconv.Itoa(c.Port)}
	}
	return []string{"--name", c.Name}
}

// plan is every step of a sweep with given rates in the order run: each
// rate, lowest first, once per pattern, regular before bursty, so that
// Fig. 2's pair at one rate is measured back to back on the same warmed
// broker. A knee search plans its first rate only (nextSearch the rest).
func plan(o recfile.SweepOptions) []recfile.SweepStep {
	if o.Search {
		return nextSearch(o, nil)
	}
	var steps []recfile.SweepStep
	for _, r := range o.Rates {
		steps = append(steps, stepsAt(o, len(steps), r, "")...)
	}
	return steps
}

// stepDir names a step's directory: its index, pattern and asked rate.
func stepDir(i int, pattern string, rate float64) string {
	return fmt.Sprintf("step-%02d-%s-%s", i, pattern, strconv.FormatFloat(rate, 'f', -1, 64))
}

// GeometricRates are n rates from lo to hi, each the same factor above
// the one before, rounded to whole messages per second (the paper's
// ladder doubles).
func GeometricRates(lo, hi float64, n int) ([]float64, error) {
	if !(lo > 0) || !(hi >= lo) || n < 1 || (n == 1 && hi != lo) {
		return nil, fmt.Errorf("%w: --from %v --to %v --steps %d: give 0 < from ≤ to and at least 2 steps (1 when from = to)", ErrConfig, lo, hi, n)
	}
	rates := make([]float64, n)
	for i := range rates {
		f := 0.0
		if n > 1 {
			f = float64(i) / float64(n-1)
		}
		rates[i] = math.Round(lo * math.Pow(hi/lo, f))
	}
	return slices.Compact(rates), nil
}

func stepPath(out string, st *recfile.SweepStep) string { return filepath.Join(out, st.Dir) }
