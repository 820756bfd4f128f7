package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/source"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/metrics"
	"github.com/brokertrace/brokertrace/perfetto"
	"github.com/brokertrace/brokertrace/privs"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/record"
)

type recordFlags struct {
	PID       int           `json:"pid,omitempty"`
	Port      int           `json:"port,omitempty"`
	Name      string        `json:"name,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	Out       string        `json:"out"`
	ScanLimit int           `json:"scan_limit"`
	RingSize  int           `json:"ring_size"`
	ProbePath string        `json:"probe_path"`
	Match     string        `json:"match"`
	FramePort []string      `json:"frame_ports,omitempty"`
	Quiet     bool          `json:"quiet"`
	JSON      bool          `json:"json"`
	Window    time.Duration `json:"window_ns"`
	Discard   bool          `json:"discard"`
	Priority  string        `json:"priority"`
	Boost     bool          `json:"boost"`
	SelfCPUs  string        `json:"self_cpus,omitempty"`
	IDTTL     time.Duration `json:"id_ttl_ns"`
	Format    string        `json:"format"`
	Metrics   string        `json:"metrics,omitempty"`
	WebConfig string        `json:"web_config_file,omitempty"`
	Perfetto  string        `json:"perfetto,omitempty"`
	// KeepPrivileges: do not drop the capabilities once attached.
	KeepPrivileges bool `json:"keep_privileges,omitempty"`
	// Profiles of brokertrace itself (hidden flags).
	CPUProfile string `json:"-"`
	MemProfile string `json:"-"`
	// view is bare mode's live view: it observes the recording and takes
	// record's status lines in place of stderr.
	view liveView
	// sources are the table of sources, their flags bound.
	sources []source.Spec
	// privileges is shared by the recordings of bare --all (see
	// record.Privileges); needs are what run does after its recording.
	privileges *record.Privileges
	needs      []privs.Need
	// metricsSrv is bare --all's one metrics server, which every
	// recording exports to (labelled by broker); nil: the recording
	// serves --metrics itself.
	metricsSrv *metrics.Server
}

// addRecordFlags registers the flags of a recording, shared by record and
// run, including every registered source's own flags.
func addRecordFlags(cmd *cobra.Command, f *recordFlags) {
	fl := cmd.Flags()
	fl.DurationVar(&f.Duration, "duration", 0, "stop after this long (0: until Ctrl-C or the target exits)")
	fl.StringVar(&f.Out, "out", "", "recording directory (default brokertrace-YYYYMMDD-HHMMSS)")
	fl.IntVar(&f.ScanLimit, "scan-limit", sockio.DefaultScanLimit, "bytes of each socket call scanned for markers, the rest counted as unscanned; 0: every byte")
	fl.IntVar(&f.RingSize, "ring-size", 8<<20, "ring buffer size in bytes (a power of two)")
	fl.StringVar(&f.Match, "match", string(sockio.MatchMarker), "match each message read with its copies written by: marker (BTID + 16 hex digits in the body, as brokertrace load sends), frame (the broker protocol's frames, keyed by a fingerprint of the payload and the subject, computed in the kernel: production traffic without markers; NATS, MQTT, STOMP, AMQP 0-9-1 and Redis pub/sub), or both (markers, as messages.csv says, checked copy by copy against frames matched by a second probe: match_check.csv and meta.json's match_check)")
	fl.StringSliceVar(&f.FramePort, "frame-port", nil, "with --match frame or both: a broker port and its protocol, PORT=PROTO (4222=nats), repeatable; default: the broker's listeners on well-known ports")
	fl.StringVar(&f.ProbePath, "probe-path", "auto", "socket probe hooks: auto, sock (tracepoints, Linux 6.3+) or syscalls")
	fl.DurationVar(&f.Window, "window", 100*time.Millisecond, "window of the time series (sched.csv, cpu.csv, net.csv)")
	fl.BoolVar(&f.Quiet, "quiet", false, "no live status lines (the attached line is still printed)")
	fl.BoolVar(&f.JSON, "json", false, "print the summary as JSON (meta.json) instead of text")
	fl.BoolVar(&f.Discard, "discard", false, "collect everything as a recording does but write no files (no --out): the summary only, to measure the cost of collection alone")
	fl.StringVar(&f.Priority, "priority", string(process.PriorityIdle), "scheduling of brokertrace's own threads while recording, so they keep out of the broker's way: idle (SCHED_IDLE: only CPU time nothing else wants), batch (SCHED_BATCH, nice 19), nice (nice 19) or normal")
	fl.BoolVar(&f.Boost, "boost", true, "lift brokertrace's threads to the priority it was started with while a ring buffer fills past a quarter, and back to --priority once drained: a saturation longer than the rings hold loses nothing (counted in meta.json's boost)")
	fl.StringVar(&f.SelfCPUs, "self-cpus", "", "run brokertrace's own threads only on these CPUs (list: 1 or 0-3,6), e.g. off the broker's, but for its reader of each CPU's idle time, which runs on that CPU a few µs a window; default: any")
	fl.StringVar(&f.Format, "format", recfile.FormatCSV, "format of the tables: csv, or parquet (typed columns, for DuckDB, Spark or pandas; written as CSV, then converted when the recording ends); report reads both")
	fl.StringVar(&f.Metrics, "metrics", "", "serve Prometheus metrics on this address while recording (:9464 or 127.0.0.1:9464; empty: off): latency, context switches, CPU, socket-queue wait and packet sizes as native histograms, every loss counter (docs/metrics.md)")
	fl.StringVar(&f.WebConfig, "web.config.file", "", "serve --metrics with TLS and/or basic auth as this Prometheus web configuration file says (node_exporter's format: tls_server_config, basic_auth_users with bcrypt hashes; empty: plain HTTP, open to all who reach the address)")
	fl.StringVar(&f.Perfetto, "perfetto", "", "also write a Perfetto trace to this file (open it at ui.perfetto.dev): the broker's threads with their on-CPU stints and switch reasons, the socket calls that carried markers, one flow per message from its read to each write")
	fl.DurationVar(&f.IDTTL, "id-ttl", record.DefaultIDTTL, "forget a message read that has no copy written after this long (counted as expired; a later copy counted as late), so memory stays bounded however long the recording; 0: never")
	fl.BoolVar(&f.KeepPrivileges, "keep-privileges", false, "keep every capability while recording; by default brokertrace drops, once attached, all but those it still needs (meta.json privileges says which and why)")
	fl.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of brokertrace itself to this file")
	fl.StringVar(&f.MemProfile, "memprofile", "", "write brokertrace's own heap profile to this file every 5 s")
	fl.MarkHidden("cpuprofile")
	fl.MarkHidden("memprofile")
	f.sources = sourceTable()
	for _, s := range f.sources {
		s.Flags(fl)
	}
}

func newRecordCmd() *cobra.Command {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "record (--pid PID | --port PORT | --name NAME) [flags]",
		Short: "Attach to a running broker and record per-message latency inside it",
		Long: `record attaches eBPF probes to the socket I/O of one running process and
writes, for every marked message, when the broker read it and when it wrote
each copy of it on. It ends on Ctrl-C, after --duration, or when the target
exits, and always leaves complete files:

  DIR/messages.csv  one row per message copy leaving the broker
  DIR/meta.json     host, target, probe path, options, every loss counter

Once every probe is live it prints a line starting "brokertrace: attached"
on stderr, then a status line every second.`,
		Example: `  # NATS on its default port, until Ctrl-C
  sudo brokertrace record --port 4222 --out nats-run

  # ActiveMQ by process name, for 60 seconds
  sudo brokertrace record --name java --duration 60s --out amq-run

  # A known pid, forcing the system-call probe path (kernels before 6.3)
  sudo brokertrace record --pid 1234 --probe-path syscalls

  # Prometheus metrics on port 9464 while recording (scrape /metrics)
  sudo brokertrace record --port 4222 --metrics :9464

  # The same over HTTPS with basic auth, as web.yml says (docs/metrics.md)
  sudo brokertrace record --port 4222 --metrics :9464 --web.config.file web.yml

  # Tables as Parquet (messages.parquet, sched.parquet…) for DuckDB or pandas
  sudo brokertrace record --port 4222 --format parquet --out nats-pq

  # A Perfetto trace of 10 seconds beside the recording
  sudo brokertrace record --port 4222 --duration 10s --perfetto nats.pftrace

  # production traffic without markers: match by the protocol's frames
  sudo brokertrace record --port 4222 --match frame --frame-port 4222=nats

  # check matching by frame against the markers brokertrace load sends
  sudo brokertrace record --port 4222 --match both   # → match_check.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecord(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.PID, "pid", 0, "trace the process with this pid")
	fl.IntVar(&f.Port, "port", 0, "trace the process listening on this TCP port")
	fl.StringVar(&f.Name, "name", "", "trace the process with this name (comm, argv[0] or executable)")
	addRecordFlags(cmd, &f)
	return cmd
}

func runRecord(cmd *cobra.Command, f recordFlags) error {
	n := 0
	for _, set := range []bool{f.PID != 0, f.Port != 0, f.Name != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return withCode(exitUsage, errors.New("record: give exactly one of --pid, --port or --name"))
	}
	if err := checkRecordFlags(f); err != nil {
		return err
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	if _, err := probes.KernelBTF(); err != nil {
		return withCode(exitNoPriv, err)
	}

	var (
		proc     *process.Process
		err      error
		by, what string
	)
	switch {
	case f.PID != 0:
		by, what = "pid", strconv.Itoa(f.PID)
		proc, err = process.ByPID(f.PID)
	case f.Port != 0:
		by, what = "port", strconv.Itoa(f.Port)
		proc, err = process.ByPort(f.Port)
	default:
		by, what = "name", f.Name
		proc, err = process.ByName(f.Name)
	}
	if err != nil {
		return withCode(exitNoTarget, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return recordWith(ctx, cmd, f, proc, by, what)
}

// framePortList is "4222/nats, 6222/nats".
func framePortList(ports map[string]string) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(ports)) {
		out = append(out, p+"/"+ports[p])
	}
	return strings.Join(out, ", ")
}

// matchFlags parses --match and --frame-port.
func matchFlags(f recordFlags) (sockio.Match, map[uint16]frame.Proto, error) {
	m := sockio.Match(f.Match)
	switch m {
	case "":
		m = sockio.MatchMarker
	case sockio.MatchMarker, sockio.MatchFrame, record.MatchBoth:
	default:
		return "", nil, fmt.Errorf("--match must be marker, frame or both, not %q", f.Match)
	}
	if len(f.FramePort) > 0 && m == sockio.MatchMarker {
		return "", nil, errors.New("--frame-port needs --match frame or both")
	}
	ports := map[uint16]frame.Proto{}
	for _, pp := range f.FramePort {
		port, name, ok := strings.Cut(pp, "=")
		n, err := strconv.ParseUint(port, 10, 16)
		if !ok || err != nil || n == 0 {
			return "", nil, fmt.Errorf("--frame-port %q: want PORT=PROTO, 4222=nats", pp)
		}
		proto, err := frame.ParseProto(name)
		if err != nil {
			return "", nil, fmt.Errorf("--frame-port %q: %w", pp, err)
		}
		ports[uint16(n)] = proto
	}
	return m, ports, nil
}

// checkRecordFlags validates the flags shared by record and run.
func checkRecordFlags(f recordFlags) error {
	switch f.ProbePath {
	case "auto", "", "sock", "syscalls":
	default:
		return withCode(exitUsage, fmt.Errorf("record: --probe-path must be auto, sock or syscalls, not %q", f.ProbePath))
	}
	if f.RingSize < os.Getpagesize() || f.RingSize&(f.RingSize-1) != 0 {
		return withCode(exitUsage, fmt.Errorf("record: --ring-size must be a power of two of at least %d bytes", os.Getpagesize()))
	}
	if f.ScanLimit < 0 {
		return withCode(exitUsage, errors.New("record: --scan-limit must be 0 (every byte) or positive"))
	}
	if _, _, err := matchFlags(f); err != nil {
		return withCode(exitUsage, fmt.Errorf("record: %w", err))
	}
	if f.Discard && f.Out != "" {
		return withCode(exitUsage, errors.New("record: --discard writes no files; drop --out"))
	}
	if _, err := selfPlacement(f); err != nil {
		return withCode(exitUsage, fmt.Errorf("record: %w", err))
	}
	if f.IDTTL < 0 {
		return withCode(exitUsage, errors.New("record: --id-ttl must not be negative"))
	}
	if f.Window < time.Millisecond {
		return withCode(exitUsage, errors.New("record: --window must be at least 1ms"))
	}
	if f.Format != "" && !slices.Contains(recfile.Formats, f.Format) {
		return withCode(exitUsage, fmt.Errorf("record: --format must be one of %s, not %q", strings.Join(recfile.Formats, ", "), f.Format))
	}
	return checkWebConfig(f)
}

// checkWebConfig reads --web.config.file before anything starts (run's
// broker, the probes), so that a missing or broken file is a usage error
// and not a recording without its metrics.
func checkWebConfig(f recordFlags) error {
	if f.WebConfig == "" {
		return nil
	}
	if f.Metrics == "" {
		return withCode(exitUsage, errors.New("record: --web.config.file secures --metrics; give --metrics ADDR too"))
	}
	if _, err := metrics.CheckWebConfig(f.WebConfig); err != nil {
		return withCode(exitUsage, fmt.Errorf("record: --web.config.file: %w", err))
	}
	return nil
}

// recordWith records proc until ctx ends, the duration passes or proc
// exits, and prints the summary. by and what say how proc was chosen.
func recordWith(ctx context.Context, cmd *cobra.Command, f recordFlags, proc *process.Process, by, what string) error {
	var path sockio.Path
	switch f.ProbePath {
	case "sock":
		path = sockio.PathSock
	case "syscalls":
		path = sockio.PathSyscalls
	}
	if f.Out == "" && !f.Discard {
		f.Out = "brokertrace-" + time.Now().Format("20060102-150405")
	}
	ran := false
	defer func() {
		if !ran && f.privileges != nil {
			f.privileges.Abandon()
		}
	}()
	var sources []source.Source
	for _, s := range f.sources {
		src, err := s.New(proc)
		if err != nil {
			return withCode(exitUsage, err)
		}
		if src != nil {
			sources = append(sources, src)
		}
	}
	// Placed by record.Run after run started the broker, which would
	// inherit it.
	place, _ := selfPlacement(f)
	stopProfiles, err := startProfiles(f.CPUProfile, f.MemProfile)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("record: profile: %w", err))
	}
	defer stopProfiles()
	live := cmd.ErrOrStderr()
	interval := time.Second
	if f.Quiet {
		interval = time.Hour
	}
	var observers []record.Observer
	if f.view != nil {
		live, observers = f.view.StatusWriter(), append(observers, f.view)
	}
	if f.Metrics != "" {
		srv := f.metricsSrv
		if srv == nil {
			if srv, err = listenMetrics(cmd, f); err != nil {
				return err
			}
			defer srv.Close()
		}
		observers = append(observers, srv.Observer(metrics.BrokerOf(proc), metrics.Columns(sources)))
		if f.Quiet {
			// The metrics are updated every live interval.
			interval, live = time.Second, attachedOnly{live}
		}
	}
	if f.Perfetto != "" {
		pf, err := perfetto.Create(f.Perfetto, proc.PID, proc.Comm, cmd.ErrOrStderr())
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("record: --perfetto: %w", err))
		}
		defer pf.Close()
		observers = append(observers, pf)
	}
	match, framePorts, _ := matchFlags(f)
	ran = true
	res, err := record.Run(ctx, record.Config{
		Match: match, FramePorts: framePorts,
		Target: proc, SelectedBy: by, Selector: what,
		Out: f.Out, Duration: f.Duration, ScanLimit: f.ScanLimit, RingSize: f.RingSize,
		Path: path, Live: live, LiveInterval: interval, Options: f,
		Sources: sources, Window: f.Window, Discard: f.Discard, Self: &place, NoBoost: !f.Boost, IDTTL: idTTL(f.IDTTL), Observers: observers,
		Format: f.Format, KeepPrivileges: f.KeepPrivileges, Privileges: f.privileges, Needs: append(f.needs, profileNeeds(f)...),
	})
	if res != nil {
		printSummary(cmd, res, f.JSON)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, probes.ErrPrivilege), errors.Is(err, probes.ErrKernel):
		return withCode(exitNoPriv, err)
	case errors.Is(err, record.ErrNoFramePorts):
		return withCode(exitUsage, err)
	default:
		return withCode(exitFailure, err)
	}
}

// idTTL is --id-ttl for record.Config, where 0 means the default and
// never is negative.
func idTTL(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}

// selfPlacement is where --priority and --self-cpus put brokertrace's own
// threads.
func selfPlacement(f recordFlags) (process.SelfPlacement, error) {
	p, err := process.ParsePriority(f.Priority)
	if err != nil {
		return process.SelfPlacement{}, fmt.Errorf("--priority: %w", err)
	}
	place := process.SelfPlacement{Priority: p}
	if f.SelfCPUs != "" {
		set, err := process.ParseCPUList(f.SelfCPUs)
		if err != nil {
			return place, fmt.Errorf("--self-cpus: %w", err)
		}
		place.CPUs = &set
	}
	return place, nil
}

func printSummary(cmd *cobra.Command, res *record.Result, asJSON bool) {
	out := cmd.OutOrStdout()
	m := res.Meta
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(m)
		return
	}
	secs := float64(m.EndNs-m.StartNs) / 1e9
	fmt.Fprintf(out, "recorded %s (pid %d) for %.1fs via %s path; ended by %s\n", m.Target.Comm, m.Target.PID, secs, m.Probe.Path, m.EndReason)
	for _, n := range res.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	fmt.Fprintf(out, "messages: %d read, %d copies written and matched, %d read but not written, %d written but never read, %d expired, %d copies late\n",
		m.Messages.Messages, m.Messages.Copies, m.Messages.InWithoutOut, m.Messages.OutWithoutIn, m.Messages.Expired, m.Messages.LateOut)
	if m.Probe.Match == string(sockio.MatchFrame) {
		fmt.Fprintf(out, "matched by frame (%s): %d copies ambiguous (identical payload and subject in flight), %d written with no read\n",
			framePortList(m.Probe.FramePorts), m.Messages.Ambiguous, m.Messages.OutWithoutIn)
	}
	if h := res.Latency; h != nil && h.TotalCount() > 0 {
		fmt.Fprintf(out, "latency in broker: min %s p50 %s p90 %s p99 %s max %s (mean %s)\n",
			source.FormatNs(h.Min()), source.FormatNs(h.ValueAtQuantile(50)), source.FormatNs(h.ValueAtQuantile(90)),
			source.FormatNs(h.ValueAtQuantile(99)), source.FormatNs(h.Max()), source.FormatNs(int64(h.Mean())))
	}
	for _, line := range res.Summaries {
		fmt.Fprintln(out, line)
	}
	s := m.Probe.Stats
	fmt.Fprintf(out, "socket calls: %d reads (%d B), %d writes (%d B); events %d, dropped %d\n",
		s.Calls[0], s.Bytes[0], s.Calls[1], s.Bytes[1], s.Events, s.DroppedEvents)
	fmt.Fprintln(out, privilegesLine(m.Privileges))
	for _, w := range m.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if m.Discard {
		fmt.Fprintln(out, "no files written (--discard)")
		return
	}
	fmt.Fprintf(out, "files in %s: %s\n", res.Dir, strings.Join(m.Files, ", "))
}

// privilegesLine says in the summary what became of the capabilities.
func privilegesLine(p recfile.Privileges) string {
	if p.DroppedNs == 0 {
		return "capabilities: kept (" + p.NotDropped + ")"
	}
	if len(p.Kept) == 0 {
		return "capabilities: all dropped once attached"
	}
	var kept []string
	for _, c := range slices.Sorted(maps.Keys(p.Kept)) {
		kept = append(kept, c+" ("+p.Kept[c]+")")
	}
	return "capabilities: all dropped once attached but " + strings.Join(kept, ", ")
}

// startProfiles starts the hidden --cpuprofile and --memprofile of a
// recording, for finding brokertrace's own costs; stop ends them. The heap
// profile is rewritten every few seconds while recording, so the file holds
// the heap in use near the end, while the recording's state still lived.
func startProfiles(cpuFile, memFile string) (stop func(), err error) {
	var stops []func()
	if cpuFile != "" {
		f, err := outdir.CreateFile(cpuFile, outdir.FilePerm)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if memFile != "" {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for t := time.NewTicker(5 * time.Second); ; {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					writeHeap(memFile)
				}
			}
		}()
		stops = append(stops, func() { cancel(); <-done })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}, nil
}

// profileNeeds: --memprofile rewrites its file while recording, after the
// capabilities are dropped.
func profileNeeds(f recordFlags) []privs.Need {
	if f.MemProfile == "" {
		return nil
	}
	dir := filepath.Dir(f.MemProfile)
	return []privs.Need{{
		Caps:  []privs.Cap{privs.CAP_DAC_OVERRIDE},
		Why:   "rewriting --memprofile in " + dir + ", which root may not write by its mode",
		Check: func() error { return privs.Writable(dir) },
	}}
}

func writeHeap(name string) {
	f, err := outdir.CreateFile(name, outdir.FilePerm)
	if err != nil {
		return
	}
	defer f.Close()
	runtime.GC()
	pprof.WriteHeapProfile(f)
}

// listenMetrics starts the --metrics server and says where it serves.
func listenMetrics(cmd *cobra.Command, f recordFlags) (*metrics.Server, error) {
	srv, err := metrics.Listen(f.Metrics, metrics.Options{WebConfigFile: f.WebConfig, ErrorLog: cmd.ErrOrStderr()})
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("record: %w", err))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "brokertrace: metrics on %s\n", srv.URL())
	return srv, nil
}

// attachedOnly passes on record's "attached" line and drops its status
// lines: --quiet with --metrics, whose exporter needs the status lines'
// interval.
type attachedOnly struct{ w io.Writer }

func (a attachedOnly) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("brokertrace: attached")) || bytes.HasPrefix(p, []byte(record.NotePrefix)) {
		return a.w.Write(p)
	}
	return len(p), nil
}
