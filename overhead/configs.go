package overhead

import (
	_ "embed"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/outdir"
)

// sockcalls is the bpftrace script of the "bpftrace" configuration.
//
//go:embed sockcalls.bt
var sockcalls []byte

// attachedLine begins the line brokertrace record prints once every probe
// is live.
const attachedLine = "brokertrace: attached"

// bpftraceReady is the line sockcalls.bt prints from BEGIN, which bpftrace
// runs once every probe is attached.
const bpftraceReady = "# t_ns tid dir bytes"

// What the alternatives print when they lose data: bpftrace into its
// output when the perf buffer overflowed, tcpdump on standard error at its
// end.
var (
	bpftraceLost   = regexp.MustCompile(`(?m)^Lost (\d+) events`)
	tcpdumpDropped = regexp.MustCompile(`(?m)^(\d+) packets? dropped by kernel`)
)

// Configuration names.
const (
	ConfT        = "T"
	ConfI        = "T+I"
	ConfC        = "T+I+C"
	ConfW        = "T+I+C+W"
	ConfWPcap    = "T+I+C+W+pcap"
	ConfCFrame   = "T+I+C+frame"
	ConfCBoth    = "T+I+C+both"
	ConfBpftrace = "bpftrace"
	ConfTcpdump  = "tcpdump"
)

// Config is one configuration of the experiment.
type Config struct {
	Name, Description string
	// recorded: the tracer is brokertrace record, whose summary gives the
	// events it lost; matches: it traces the broker's messages, so the
	// share of copies matched is measured too.
	recorded, matches bool
	// extra: not in the default set, run only when named in --configs.
	extra  bool
	tracer func(r *runEnv) (*tracerSpec, error) // nil: untraced
}

// runEnv is what a configuration's tracer needs of one run.
type runEnv struct {
	exe        string      // brokertrace
	pid, port  int         // the broker's
	url        string      // the load's URL: its scheme is the protocol
	dir        string      // the run's directory
	out        *outdir.Dir // the same, opened
	brokerCPUs string
}

// Configs are every configuration, in the order they run: MooBench's four,
// then the alternatives a user would reach for.
var Configs = []Config{
	{Name: ConfT, Description: "untraced"},
	{Name: ConfI, recorded: true, Description: "brokertrace record, every source on, attached to an idle nats-server on the broker's CPUs: every hook fires, nothing matches", tracer: idleRecord},
	{Name: ConfC, Description: "brokertrace record --discard on the broker: everything collected, nothing written", recorded: true, matches: true, tracer: discardRecord},
	{Name: ConfW, Description: "brokertrace record on the broker with its defaults (capture included), to disk", recorded: true, matches: true, tracer: fullRecord},
	{Name: ConfBpftrace, Description: "bpftrace timestamping the broker's socket calls (sock_recv_length, sock_send_length) to a file", tracer: bpftrace},
	{Name: ConfTcpdump, Description: "tcpdump -w of the broker's port on lo, 96-byte snaplen (headers only)", tracer: tcpdump},
	{Name: ConfWPcap, Description: "T+I+C+W with the headers also written to a pcapng file (--pcap)", recorded: true, matches: true, tracer: pcapRecord, extra: true},
	{Name: ConfCFrame, Description: "T+I+C matching by frame (--match frame): the kernel parses the broker's protocol (the URL's scheme) and fingerprints every payload", recorded: true, matches: true, tracer: frameRecord, extra: true},
	{Name: ConfCBoth, Description: "T+I+C matching by marker and, with a second socket probe, by frame (--match both): the two parsers on the same calls in the same window, the frame probe's programs under source " + SourceSockioFrame, recorded: true, matches: true, tracer: bothRecord, extra: true},
}

// SelectConfigs returns the configurations named (when names is empty,
// all but the extra ones), in the order of Configs.
func SelectConfigs(names []string) ([]Config, error) {
	if len(names) == 0 {
		return slices.DeleteFunc(slices.Clone(Configs), func(c Config) bool { return c.extra }), nil
	}
	for _, n := range names {
		if !slices.ContainsFunc(Configs, func(c Config) bool { return c.Name == n }) {
			return nil, fmt.Errorf("unknown configuration %q (known: %s)", n, strings.Join(configNames(Configs), ", "))
		}
	}
	return slices.DeleteFunc(slices.Clone(Configs), func(c Config) bool { return !slices.Contains(names, c.Name) }), nil
}

func configNames(cs []Config) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// record is `brokertrace record` of pid with the summary (meta.json) as
// JSON on standard output, kept as meta.json of the run.
func record(r *runEnv, pid int, extra ...string) *tracerSpec {
	argv := append([]string{r.exe, "record", "--pid", strconv.Itoa(pid), "--quiet", "--json"}, extra...)
	return &tracerSpec{argv: argv, out: r.out, stdout: filepath.Join(r.dir, "meta.json"), readyLine: attachedLine}
}

// idleRecord traces a nats-server that no client talks to, pinned like the
// broker: it listens, so the capture, socket-queue and GSO sources attach
// as they would to a broker, and its CPUs are the broker's, so the
// scheduler probe sees every switch there. Every hook runs; none matches.
func idleRecord(r *runEnv) (*tracerSpec, error) {
	idle, err := startNATS(r.brokerCPUs)
	if err != nil {
		return nil, fmt.Errorf("idle target: %w", err)
	}
	out := filepath.Join(r.dir, "recording")
	s := record(r, idle.pid, "--out", out)
	s.outputs, s.cleanup = []string{out}, idle.stop
	return s, nil
}

func discardRecord(r *runEnv) (*tracerSpec, error) {
	return record(r, r.pid, "--discard"), nil
}

// frameRecord is discardRecord matching by frame, the broker's port parsed
// in the protocol the load's URL names (nats, mqtt, stomp, amqp, redis).
func frameRecord(r *runEnv) (*tracerSpec, error) {
	return matchRecord(r, "frame")
}

// bothRecord is discardRecord with --match both: the marker scan and the
// frame parser each in a socket probe of its own, run by the same calls
// one after the other (the marker probe's programs attached first), so
// that their costs are compared on the same traffic in the same window,
// where rounds of the same configuration spread by more than the
// difference sought on a noisy host.
func bothRecord(r *runEnv) (*tracerSpec, error) {
	return matchRecord(r, "both")
}

func matchRecord(r *runEnv, match string) (*tracerSpec, error) {
	u, err := url.Parse(r.url)
	if err != nil {
		return nil, err
	}
	p, err := frame.ParseProto(u.Scheme)
	if err != nil {
		return nil, fmt.Errorf("--match %s: the load's URL %s: %w", match, r.url, err)
	}
	return record(r, r.pid, "--discard", "--match", match, "--frame-port", strconv.Itoa(r.port)+"="+p.String()), nil
}

// fullRecord is a default recording: `brokertrace record --pid PID --out
// DIR` and nothing else, the goal's "default recording".
func fullRecord(r *runEnv) (*tracerSpec, error) {
	out := filepath.Join(r.dir, "recording")
	s := record(r, r.pid, "--out", out)
	s.outputs = []string{out}
	return s, nil
}

// pcapRecord is a default recording that also writes the headers to a
// pcapng file.
func pcapRecord(r *runEnv) (*tracerSpec, error) {
	out, pcap := filepath.Join(r.dir, "recording"), filepath.Join(r.dir, "recording.pcapng")
	s := record(r, r.pid, "--out", out, "--pcap", pcap)
	s.outputs = []string{out, pcap}
	return s, nil
}

func bpftrace(r *runEnv) (*tracerSpec, error) {
	script := filepath.Join(r.dir, "sockcalls.bt")
	if err := r.out.WriteFile(filepath.Base(script), sockcalls, outdir.FilePerm); err != nil {
		return nil, err
	}
	out := filepath.Join(r.dir, "bpftrace.txt")
	return &tracerSpec{argv: []string{"bpftrace", script, strconv.Itoa(r.pid)}, out: r.out, stdout: out, readyFile: out, readyLine: bpftraceReady, outputs: []string{out},
		drops: bpftraceLost, dropsFile: out}, nil
}

func tcpdump(r *runEnv) (*tracerSpec, error) {
	out := filepath.Join(r.dir, "tcpdump.pcap")
	argv := []string{"tcpdump", "-i", "lo", "-n", "-Z", "root", "-s", "96", "-w", out, "tcp", "port", strconv.Itoa(r.port)}
	return &tracerSpec{argv: argv, readyLine: "listening on", outputs: []string{out}, drops: tcpdumpDropped}, nil
}
