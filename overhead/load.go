package overhead

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// loadSpec is one run of `brokertrace load`.
type loadSpec struct {
	name     string // subdirectory of the run's directory
	rate     float64
	count    int
	duration time.Duration
	warmup   time.Duration
}

// drain is how long a load waits for its last messages: long enough for a
// broker that queued a saturation load to deliver it, so that a load's
// messages never reach the next one.
const drain = 60 * time.Second

// runLoad runs the load generator as a child pinned to cpus and returns
// its summary (load.json) and its directory. Each load has a subject (a
// queue, on a queueing broker) of its own, so that a message one load left
// behind is never taken for another's.
func (e *Experiment) runLoad(url string, dir *outdir.Dir, l loadSpec) (recfile.LoadSummary, string, error) {
	out := dir.Join(l.name)
	args := []string{"-c", e.LoadCPUs, e.Exe, "load", "--url", url, "--size", strconv.Itoa(e.Size),
		"--rate", strconv.FormatFloat(l.rate, 'g', -1, 64),
		"--out", out, "--subject", "brokertrace.overhead." + l.name, "--drain", drain.String()}
	if e.Payload != "" {
		args = append(args, "--payload", e.Payload)
	}
	if l.count > 0 {
		args = append(args, "--count", strconv.Itoa(l.count))
	}
	if l.duration > 0 {
		args = append(args, "--duration", l.duration.String())
	}
	if l.warmup > 0 {
		args = append(args, "--warmup", l.warmup.String())
	}
	var sum recfile.LoadSummary
	cmd := exec.Command("taskset", args...)
	b, err := cmd.CombinedOutput()
	_ = dir.WriteFile(filepath.Join(l.name, "load.log"), b, outdir.FilePerm)
	if err != nil {
		return sum, out, fmt.Errorf("load %s: %v: %s", l.name, err, b)
	}
	if err := recfile.ReadJSON(out, recfile.LoadJSONFile, &sum); err != nil {
		return sum, out, err
	}
	if sum.Received == 0 {
		return sum, out, fmt.Errorf("load %s: no message came back (%d sent)", l.name, sum.Sent)
	}
	return sum, out, nil
}

// throughput is the saturation throughput of a load directory: messages
// received over the time from the first send to the last receive.
func throughput(dir string) (float64, error) {
	first, last, n := int64(1<<62), int64(0), 0
	err := recfile.ScanTable(filepath.Join(dir, recfile.E2EFile), func(r *recfile.E2ERow) error {
		first = min(first, r.TSend)
		if r.TRecv != nil {
			last, n = max(last, *r.TRecv), n+1
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n == 0 || last <= first {
		return 0, errors.New("no message received")
	}
	return float64(n) / (float64(last-first) / 1e9), nil
}

// latencies are t_recv − t_intended of a load directory's received
// non-warm-up messages, in ns: what a user of an open-loop system waits.
func latencies(dir string) ([]float64, error) {
	var ls []float64
	err := recfile.ScanTable(filepath.Join(dir, recfile.E2EFile), func(r *recfile.E2ERow) error {
		if r.TRecv != nil && r.Warmup == 0 {
			ls = append(ls, float64(*r.TRecv-r.TIntended))
		}
		return nil
	})
	return ls, err
}
