// Package layers holds the test that keeps brokertrace's imports running
// one way: every package sits on a layer, and a package may import only
// packages on lower layers (or, within a layer, those the table allows).
// docs/architecture.md draws the same table.
package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/brokertrace/brokertrace/"

// layer of every package of the module, bottom (0) to top. A package not
// listed fails the test: a new package must be given its place.
var layer = map[string]int{
	"outdir": 0, // where files are written: no link followed, as the invoking user
	"privs":  0, // capabilities: read, dropped on every thread

	"recfile":  1, // every file format; imports nothing of ours but outdir
	"monotime": 1,
	"tick":     1, // the poll clock: brokertrace's pollers woken together
	"marker":   1,
	"frame":    1, // protocol frames → message fingerprints (the in-kernel parser's reference)
	"kernfs":   1, // tracefs and debugfs: found, or mounted

	"events":    2,
	"correlate": 3, // events → per-message records

	"process": 4, // the target: pids, threads, listeners, namespaces
	"probes":  4, // what every eBPF loader shares
	"source":  5, // the contract between record and its sources

	"probes/sockio":   6,
	"probes/sched":    6,
	"probes/sockq":    6,
	"probes/netstack": 6,
	"capture":         6,
	"collect":         6,
	"peers":           6, // the node's name and connections, for a cluster join

	"record": 7, // orchestration

	"load":      7, // the load generator: brokers' clients, e2e.csv
	"analysis":  7, // reads recordings through recfile only
	"clocksync": 7, // two hosts' clocks from the segments both captured (recfile, pcapgo)
	"platform":  7, // Ginpex experiments: platform constants

	// the broker model: simulation, exact solution, exporters (read
	// calibration.json through recfile)
	"model/sim":  7,
	"model/mva":  7,
	"model/qpme": 7,
	"model/jmva": 7,
	"model/lqn":  7,

	"report":    8,
	"overhead":  8, // the MooBench experiment: runs brokers, tracers and load as children
	"sweep":     8, // a ladder of rates: runs brokers, record and load as children
	"calibrate": 8, // sweep → calibration.json (ICPE'14 §4.4)
	"predict":   8, // calibration → simulated model → prediction.json
	"cluster":   8, // joins the recordings of a cluster's nodes (reads files)
	"live":      8, // the live terminal view of a recording (bare mode)
	"metrics":   8, // the Prometheus exporter: a record.Observer
	"perfetto":  8, // the Perfetto trace: a record.Observer

	"cmd/brokertrace": 9,

	"internal/testbroker": 7, // tests only
	"internal/testutil":   7, // tests only
	"internal/browser":    7, // tests only: pages in headless Chromium
	"internal/kernels":    7, // tests only: the kernel matrix's checker
	"internal/clockshift": 7, // tests only: a recording moved to a host with another clock
	"internal/latefeed":   7, // tests only: message times reaching a timeline late
	"internal/layers":     10,
}

// readers are the packages that read recordings: they must not depend on
// the kernel side or on a broker's client, so that a report can be made
// anywhere from files alone.
var readers = []string{"analysis", "report", "cluster", "clocksync", "calibrate", "predict", "model/sim", "model/mva", "model/qpme", "model/jmva", "model/lqn"}

var forbiddenForReaders = []string{
	"github.com/cilium/ebpf",
	// A reader may parse a recording's pcapng file (gopacket's pcapgo and
	// layers, pure Go: clocksync does), never open a capture.
	"github.com/gopacket/gopacket/afpacket",
	"github.com/gopacket/gopacket/pcap",
	"github.com/nats-io/",
	"github.com/eclipse/paho",
	"github.com/go-stomp/",
	"github.com/rabbitmq/",
	"github.com/redis/",
	module + "probes",
	module + "capture",
	module + "collect",
	module + "record",
	module + "load",
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < len(layer)-1 {
		t.Fatalf("go list found %d packages, the table has %d", len(pkgs), len(layer))
	}
	return pkgs
}

// TestImportsRunDown fails for every import of a package on the same or a
// higher layer than the importer's.
func TestImportsRunDown(t *testing.T) {
	for _, p := range list(t) {
		name := strings.TrimPrefix(p.ImportPath, module)
		from, ok := layer[name]
		if !ok {
			t.Errorf("%s has no layer: add it to the table here and to docs/architecture.md", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if to, ok := layer[dep]; ok && to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must run down", name, from, dep, to)
			}
		}
	}
}

// TestReadersStayOffTheKernel fails when analysis or report depends, even
// indirectly, on cilium/ebpf, packet capture, a broker's client or a
// package that does.
func TestReadersStayOffTheKernel(t *testing.T) {
	for _, p := range list(t) {
		name := strings.TrimPrefix(p.ImportPath, module)
		if !slices.Contains(readers, name) {
			continue
		}
		for _, d := range p.Deps {
			for _, f := range forbiddenForReaders {
				// "x/" forbids everything under x; "x" forbids x and its
				// subpackages (…/pcap, not …/pcapgo).
				if strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) || d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s: readers of recordings go through recfile only", name, d)
				}
			}
		}
	}
}
