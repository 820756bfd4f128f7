package overhead

import (
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/recfile"
)

// TestHookTable builds two runs whose programs' costs are chosen so that
// every figure of the in-kernel cost table is known, sums them as the
// experiment does and reads the Markdown table back.
func TestHookTable(t *testing.T) {
	half := func(run int) recfile.OverheadRun {
		return recfile.OverheadRun{Config: ConfW, Run: run, CPUReceived: 250, Progs: []recfile.OverheadProg{
			{Source: "sockio", Name: "sock_recv", Runs: 500, Ns: 100000, Messages: 250},
			{Source: "sockio", Name: "sock_send", Runs: 250, Ns: 50000, Messages: 250},
			{Source: "sched", Name: "switch_btf", Runs: 125, Ns: 25000, Messages: 250},
		}}
	}
	res := &recfile.Overhead{Broker: "nats", Options: recfile.OverheadOptions{CPURate: 20000}}
	res.Configs = aggregate([]Config{{Name: ConfW}}, []recfile.OverheadRun{half(1), half(2)}, nil)
	var b strings.Builder
	if err := WriteTable(&b, res, true); err != nil {
		t.Fatal(err)
	}
	// 500 messages in all; at 20 000 msg/s, 1 ns per message is 0.002% of a core.
	for _, want := range []string{
		"| config | source | program | runs per msg | ns per run | ns per msg | % of a core at 20000 msg/s |",
		"| T+I+C+W | sched | switch_btf | 0.50 | 200 | 100 | 0.20 |",
		"| T+I+C+W | sched | all | 0.50 | 200 | 100 | 0.20 |",
		"| T+I+C+W | sockio | sock_recv | 2.00 | 200 | 400 | 0.80 |",
		"| T+I+C+W | sockio | sock_send | 1.00 | 200 | 200 | 0.40 |",
		"| T+I+C+W | sockio | all | 3.00 | 200 | 600 | 1.20 |",
		"| T+I+C+W | all | all | 3.50 | 200 | 700 | 1.40 |",
		"tracer CPU % at 20000 msg/s |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// TestSameCallLine: --match both's runs, the frame probe's costs chosen
// (1.5× and 1.25× the marker probe's; pooled 1.375×), give the line that
// sets the two probes side by side.
func TestSameCallLine(t *testing.T) {
	run := func(n int, frameNs uint64) recfile.OverheadRun {
		return recfile.OverheadRun{Config: ConfCBoth, Run: n, CPUReceived: 100, Progs: []recfile.OverheadProg{
			{Source: "sockio", Name: "sock_recv", Runs: 100, Ns: 100000, Messages: 100},
			{Source: SourceSockioFrame, Name: "sock_recv", Runs: 100, Ns: frameNs, Messages: 100},
			{Source: "sched", Name: "switch_btf", Runs: 100, Ns: 900000, Messages: 100},
		}}
	}
	res := &recfile.Overhead{Broker: "activemq", Options: recfile.OverheadOptions{CPURate: 20000}}
	runs := []recfile.OverheadRun{run(1, 150000), run(2, 125000)}
	res.Configs = aggregate([]Config{{Name: ConfCBoth}}, runs, nil)
	res.Runs = runs
	var b strings.Builder
	if err := WriteTable(&b, res, false); err != nil {
		t.Fatal(err)
	}
	want := "T+I+C+both, on the same calls: the frame probe 1375 ns per message against the marker probe's 1000 (1.38×); run by run 1.50×, 1.25×."
	if !strings.Contains(b.String(), want) {
		t.Errorf("no %q in\n%s", want, b.String())
	}
}
