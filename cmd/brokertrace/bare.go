package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/live"
	"github.com/brokertrace/brokertrace/metrics"
	"github.com/brokertrace/brokertrace/probes"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/record"
)

// liveView is what bare mode hands recordWith: an observer of the
// recording that also takes record's status lines.
type liveView interface {
	record.Observer
	StatusWriter() io.Writer
}

// bareFlags are the flags of `brokertrace` with no subcommand: a
// recording's, and which of the discovered brokers to attach to.
type bareFlags struct {
	recordFlags
	All bool
}

// addBareMode makes root, run with no subcommand, discover the host's
// brokers and show the one it attaches to live.
func addBareMode(root *cobra.Command) {
	var f bareFlags
	root.Example = `  # find the brokers on this host, attach to the only one, show it live
  sudo brokertrace

  # several brokers: attach to the one named nats-server (or by --pid / --port)
  sudo brokertrace --name nats-server --out nats-run

  # every broker on the host at once: DIR/COMM-PID/ for each
  sudo brokertrace --all --duration 60s --out host-run

  # 60 seconds, one plain line per second (also what a pipe gets)
  sudo brokertrace --port 4222 --duration 60s | tee live.log`
	root.Long += `

With no command, brokertrace finds the brokers running on this host (by
name, and by a listening port of a broker protocol, in every network
namespace), attaches to the only one — or the one --pid, --port or --name
picks, or asks which — records it as record does, and shows it live: a
screen redrawn every second on a terminal, one line per second otherwise.`
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error { return runBare(cmd, f) }
	fl := root.Flags()
	fl.IntVar(&f.PID, "pid", 0, "attach to the discovered broker with this pid (host pid)")
	fl.IntVar(&f.Port, "port", 0, "attach to the discovered broker listening on this TCP port (in its own network namespace)")
	fl.StringVar(&f.Name, "name", "", "attach to the discovered broker with this name (comm, argv[0], executable) or kind (nats, redis, activemq…)")
	fl.BoolVar(&f.All, "all", false, "record every discovered broker (those --pid, --port or --name select, if given) at once, each into a directory of its own under --out, one plain line per broker per second")
	addRecordFlags(root, &f.recordFlags)
}

func runBare(cmd *cobra.Command, f bareFlags) error {
	if err := checkRecordFlags(f.recordFlags); err != nil {
		return err
	}
	if err := probes.CheckPrivileges(); err != nil {
		return withCode(exitNoPriv, err)
	}
	if _, err := probes.KernelBTF(); err != nil {
		return withCode(exitNoPriv, err)
	}
	found, err := process.Discover()
	if err != nil {
		return withCode(exitFailure, err)
	}
	out := cmd.OutOrStdout()
	if f.JSON { // stdout is for the JSON summary alone
		out = cmd.ErrOrStderr()
	}
	if len(found) == 0 {
		return withCode(exitNoTarget, fmt.Errorf("no broker found: no process named like a broker (nats-server, mosquitto, redis-server, java with activemq or kafka, beam.smp with rabbit…) and none listening on a broker port (%s) in any network namespace; start one, or give `brokertrace record --pid PID` for another program", protocolPorts()))
	}
	if f.All {
		return recordAll(cmd, out, found, f)
	}
	b, err := chooseBroker(cmd, out, found, f)
	if err != nil {
		return err
	}
	by, what := bareSelector(f, b)
	tty := isTerminal(cmd.OutOrStdout()) && !f.JSON
	header := []string{"brokertrace: " + describeBroker(b)}
	fmt.Fprintf(out, "%s\nattaching… (loading probes)\n", header[0])
	f.view = live.New(out, live.Options{Header: header, Hint: loadHint(b), PID: b.PID, TTY: tty})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return recordWith(ctx, cmd, f.recordFlags, b.Process, by, what)
}

// chooseBroker picks the broker to attach to: the one the flags select,
// the only one found, or the user's choice on a terminal.
func chooseBroker(cmd *cobra.Command, out io.Writer, found []process.Broker, f bareFlags) (*process.Broker, error) {
	picked := slices.DeleteFunc(slices.Clone(found), func(b process.Broker) bool { return !selects(f, &b) })
	selecting := f.PID != 0 || f.Port != 0 || f.Name != ""
	if len(picked) == 0 {
		return nil, withCode(exitNoTarget, fmt.Errorf("none of the brokers found matches %s; found:\n%s", selectorText(f), listBrokers(found)))
	}
	if len(picked) == 1 {
		if !selecting {
			fmt.Fprintf(out, "found 1 broker:\n%s\n", listBrokers(found))
		}
		return &picked[0], nil
	}
	if !isTerminal(cmd.InOrStdin()) || !isTerminal(cmd.OutOrStdout()) {
		return nil, withCode(exitUsage, fmt.Errorf("%d brokers found; pick one with --pid, --port or --name:\n%s", len(picked), listBrokers(picked)))
	}
	fmt.Fprintf(out, "found %d brokers:\n%s\n", len(picked), listBrokers(picked))
	fmt.Fprintf(out, "attach to which? [1-%d]: ", len(picked))
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || n < 1 || n > len(picked) {
		return nil, withCode(exitUsage, fmt.Errorf("no broker chosen (answer a number from 1 to %d)", len(picked)))
	}
	return &picked[n-1], nil
}

// selects reports whether b matches every selector flag given.
func selects(f bareFlags, b *process.Broker) bool {
	if f.PID != 0 && b.PID != f.PID {
		return false
	}
	if f.Port != 0 && !slices.Contains(process.Ports(b.Listeners), uint16(f.Port)) {
		return false
	}
	if f.Name == "" || f.Name == b.Kind || f.Name == b.Comm {
		return true
	}
	if len(b.Cmdline) > 0 && (f.Name == b.Cmdline[0] || f.Name == baseName(b.Cmdline[0])) {
		return true
	}
	exe := strings.TrimSuffix(b.Exe, " (deleted)")
	return exe != "" && (f.Name == exe || f.Name == baseName(exe))
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// bareSelector is how the broker was chosen, for meta.json's target.
func bareSelector(f bareFlags, b *process.Broker) (by, what string) {
	switch {
	case f.PID != 0:
		return "pid", strconv.Itoa(f.PID)
	case f.Port != 0:
		return "port", strconv.Itoa(f.Port)
	case f.Name != "":
		return "name", f.Name
	}
	return "discovery", b.Kind
}

func selectorText(f bareFlags) string {
	var s []string
	if f.PID != 0 {
		s = append(s, "--pid "+strconv.Itoa(f.PID))
	}
	if f.Port != 0 {
		s = append(s, "--port "+strconv.Itoa(f.Port))
	}
	if f.Name != "" {
		s = append(s, "--name "+f.Name)
	}
	return strings.Join(s, " ")
}

// describeBroker is one line about b: pid, names, ports and where it runs.
func describeBroker(b *process.Broker) string {
	how := ""
	if b.ByPort {
		how = " (by port)"
	}
	ports := strings.Join(b.Ports(), ", ")
	if ports == "" {
		ports = "none"
	}
	s := fmt.Sprintf("pid %d %s, %s%s, listening on %s, %s", b.PID, b.Comm, b.Kind, how, ports, b.Where())
	if b.Cgroup != "" && b.Cgroup != "/" {
		s += ", cgroup " + b.Cgroup
	}
	return s
}

// listBrokers numbers the brokers, one a line.
func listBrokers(bs []process.Broker) string {
	lines := make([]string, len(bs))
	for i := range bs {
		lines[i] = fmt.Sprintf("  %d) %s", i+1, describeBroker(&bs[i]))
	}
	return strings.Join(lines, "\n")
}

func protocolPorts() string {
	var s []string
	for _, p := range slices.Sorted(maps.Keys(process.Protocols)) {
		s = append(s, fmt.Sprintf("%d %s", p, process.Protocols[p]))
	}
	return strings.Join(s, ", ")
}

// loadSchemes maps a broker's kind or protocol to the `load` URL that
// reaches it, with the credentials its packages configure by default.
var loadSchemes = map[string]string{
	"nats": "nats://%s", "mqtt": "mqtt://%s/bt/test", "mosquitto": "mqtt://%s/bt/test", "emqx": "mqtt://%s/bt/test", "vernemq": "mqtt://%s/bt/test",
	"redis": "redis://%s/btchan", "amqp": "amqp://guest:guest@%s/", "rabbitmq": "amqp://guest:guest@%s/",
	"stomp": "stomp://admin:admin@%s/queue/bt", "activemq": "stomp://admin:admin@%s/queue/bt", "artemis": "stomp://admin:admin@%s/queue/bt",
}

// loadHint is the command that sends marked messages to b, run in b's
// network namespace when it has its own.
func loadHint(b *process.Broker) string {
	format, l, ok := "", process.Listener{}, false
	if port, proto, found := b.ProtocolPort(); found {
		format, ok = loadSchemes[proto], loadSchemes[proto] != ""
		l = b.Listeners[slices.IndexFunc(b.Listeners, func(l process.Listener) bool { return l.Port == port })]
	} else if len(b.Listeners) > 0 {
		format, ok = loadSchemes[b.Kind], loadSchemes[b.Kind] != ""
		l = b.Listeners[0]
	}
	if !ok {
		return "brokertrace load --url URL --rate 1000 --count 10000 (load speaks nats, mqtt, stomp, amqp and redis; this broker listens on " + strings.Join(b.Ports(), ", ") + ")"
	}
	host := "127.0.0.1"
	if !l.IP.IsUnspecified() && !l.IP.IsLoopback() {
		host = l.IP.String()
	}
	cmd := fmt.Sprintf("brokertrace load --url %s --rate 1000 --count 10000", fmt.Sprintf(format, net.JoinHostPort(host, strconv.Itoa(int(l.Port)))))
	if !b.HostNet {
		cmd = fmt.Sprintf("sudo nsenter --net=%s %s", process.NetNSPath(b.PID), cmd)
	}
	return cmd
}

// isTerminal reports whether f is a terminal: then the view redraws in
// place and a choice can be asked for.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// recordAll records the brokers bs selects at once, each into a
// directory of its own under --out named COMM-PID, each with its plain
// per-second line; the summaries follow in the order of the list (with
// --json, a stream of meta.json objects on stdout).
func recordAll(cmd *cobra.Command, out io.Writer, found []process.Broker, f bareFlags) error {
	bs := slices.DeleteFunc(slices.Clone(found), func(b process.Broker) bool { return !selects(f, &b) })
	if len(bs) == 0 {
		return withCode(exitNoTarget, fmt.Errorf("none of the brokers found matches %s; found:\n%s", selectorText(f), listBrokers(found)))
	}
	base := cmp.Or(f.Out, "brokertrace-"+time.Now().Format("20060102-150405"))
	fmt.Fprintf(out, "recording %d broker(s) into %s/COMM-PID:\n%s\n", len(bs), base, listBrokers(bs))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &lockedWriter{w: out}
	// The capabilities are dropped once every recording has attached.
	shared := record.NewPrivileges(len(bs))
	var srv *metrics.Server
	if f.Metrics != "" {
		// One server for all: each recording's metrics carry its broker's
		// labels.
		var err error
		if srv, err = listenMetrics(cmd, f.recordFlags); err != nil {
			return err
		}
		defer srv.Close()
	}
	summaries := make([]strings.Builder, len(bs))
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i := range bs {
		b, rf := &bs[i], f.recordFlags
		rf.privileges, rf.metricsSrv = shared, srv
		if !f.Discard {
			rf.Out = filepath.Join(base, fmt.Sprintf("%s-%d", b.Comm, b.PID))
		}
		rf.view = live.New(w, live.Options{Prefix: fmt.Sprintf("[%s %d] ", b.Comm, b.PID), Hint: loadHint(b), PID: b.PID})
		// Each recording prints its summary into a buffer of its own.
		sub := &cobra.Command{}
		sub.SetOut(&summaries[i])
		sub.SetErr(w)
		wg.Go(func() { errs[i] = recordWith(ctx, sub, rf, b.Process, "discovery", b.Kind) })
	}
	wg.Wait()
	for i := range bs {
		fmt.Fprintf(out, "-- %s\n", describeBroker(&bs[i]))
		io.WriteString(cmd.OutOrStdout(), summaries[i].String())
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lockedWriter serialises the writes of several recordings' views.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
