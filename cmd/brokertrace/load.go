package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

type loadOptions struct {
	cfg  load.Config
	json bool
}

func newLoadCmd() *cobra.Command {
	var o loadOptions
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Send marked messages through a broker and measure them end to end",
		Long: `load runs a producer and a consumer against a broker, each on its own
connection, in the broker's own protocol (chosen by the --url scheme). Every
message body starts with the marker BTID<16 hex digits> carrying a
sequential id (decimal in the output files), padded to --size.

Pacing is open-loop: message i has an intended send time fixed by --rate and
--pattern; a producer that falls behind sends at once and records how late it
was, so broker stalls show up as latency rather than as a lower rate.
After sending, it waits up to --drain for outstanding messages; those still
missing are counted.

It writes DIR/e2e.csv (id,t_intended_ns,t_send_ns,t_recv_ns,warmup; times are
CLOCK_MONOTONIC ns, the clock of 'brokertrace record'; t_recv_ns is empty for
messages never received) and DIR/load.json (options, counts, achieved rate,
lateness, latency percentiles). Ctrl-C stops sending, drains and still writes
both files; press it again to abort without them.

With --sub-url (repeatable) it publishes on --url and subscribes on each
--sub-url instead (on --url too only when it is also given as a --sub-url):
one consumer per node of a cluster, to measure end to end across it. Each
--sub-url must have the scheme of --url. Before sending, it publishes probe
messages (bodies starting BTPROBE, no marker) until every subscriber got one,
so the cluster has passed every subscription on. A queue (AMQP, STOMP
/queue/...) hands each message to one subscriber only: use a topic for every
subscriber to get every message. The drain waits until every subscriber has
every message; DIR/subs.csv (id,sub,t_recv_ns) has each
subscriber's receive times, sub numbering the --sub-url flags from 1;
e2e.csv's t_recv_ns and load.json's top-level counts are subscriber 1's,
its "subscribers" list has them all.

Broker URLs:
` + load.URLForms,
		Example: `  # 10000 messages at 1000 msg/s to a local nats-server, results in ./run1
  brokertrace load --rate 1000 --count 10000 --out run1

  # 30 s of 100-message bursts averaging 5000 msg/s, first 5 s marked warm-up
  brokertrace load --url nats://broker.example.com:4222 --rate 5000 --duration 30s \
      --pattern bursty --burst 100 --warmup 5s --out run2

  # as fast as possible, 1 KiB bodies, summary as JSON
  brokertrace load --rate 0 --count 100000 --size 1024 --json

  # MQTT QoS 1 (mosquitto), STOMP queue with client acks (ActiveMQ, RabbitMQ),
  # AMQP with publisher confirms (RabbitMQ), Redis pub/sub
  brokertrace load --url 'mqtt://127.0.0.1:1883/bt/test?qos=1' --count 10000
  brokertrace load --url 'stomp://admin:admin@127.0.0.1:61613/queue/bt?ack=client' --count 10000
  brokertrace load --url 'amqp://guest:guest@127.0.0.1:5672/?confirm=1' --count 10000

  # AMQP fan-out to two consumers, each with a queue of its own bound to amq.direct
  u='amqp://guest:guest@127.0.0.1:5672/?exchange=amq.direct'
  brokertrace load --url "$u" --sub-url "$u" --sub-url "$u" --count 10000
  brokertrace load --url redis://127.0.0.1:6379/btchan --count 10000

  # publish on one node of a NATS cluster, subscribe on two others
  brokertrace load --url nats://10.0.0.1:4222 --sub-url nats://10.0.0.2:4222 --sub-url nats://10.0.0.3:4222 --rate 20000 --duration 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLoad(cmd, o) },
	}
	f := cmd.Flags()
	c := &o.cfg
	f.StringVar(&c.URL, "url", load.DefaultURL, "broker URL; supported schemes: "+strings.Join(load.Schemes(), ", "))
	f.StringArrayVar(&c.SubURLs, "sub-url", nil, "subscribe on this broker URL instead of --url, e.g. another node of its cluster (repeatable: one consumer each)")
	f.StringVar(&c.Subject, "subject", load.DefaultSubject, "subject (topic, queue) to publish and subscribe on")
	f.Float64Var(&c.Rate, "rate", 1000, "messages per second; 0 = as fast as possible (needs --count)")
	f.IntVar(&c.Count, "count", 0, "messages to send (with --duration, whichever ends first)")
	f.DurationVar(&c.Duration, "duration", 0, "how long to send (e.g. 30s)")
	f.DurationVar(&c.Warmup, "warmup", 0, "mark messages intended in this first part of the run as warm-up (written, left out of the latency summary)")
	f.DurationVar(&c.Drain, "drain", load.DefaultDrain, "after the last send, wait this long for outstanding messages")
	f.IntVar(&c.Size, "size", load.DefaultSize, fmt.Sprintf("message body size in bytes, marker included (minimum %d)", marker.Len))
	f.StringVar(&c.Payload, "payload", load.PayloadFixed, "message bodies: fixed (the marker, then filler: alike but for the id), json (a JSON event with timestamp and ids, new per message), random (random bytes, new per message) or same (filler only, every body alike, the marker in a header: NATS, STOMP, AMQP, MQTT 5; Redis and MQTT 3.1.1 have none: no marker, messages named by their order of arrival); json and random end with the marker")
	f.StringVar(&c.Pattern, "pattern", load.PatternRegular, "pacing: regular (one message every 1/rate) or bursty (--burst messages every burst/rate)")
	f.IntVar(&c.Burst, "burst", load.DefaultBurst, "messages per burst with --pattern bursty")
	f.Uint64Var(&c.IDBase, "id-base", 0, "first message id (default: derived from the clock so runs do not collide)")
	f.DurationVar(&c.LateAfter, "late-after", load.DefaultLateAfter, "a send this far behind its intended time counts as late")
	f.StringVar(&c.Out, "out", ".", "directory for e2e.csv and load.json (created if missing)")
	f.BoolVar(&o.json, "json", false, "print the summary as JSON (the content of load.json)")
	return cmd
}

func runLoad(cmd *cobra.Command, o loadOptions) error {
	cfg := o.cfg
	if cmd.Flags().Changed("burst") && cfg.Pattern != load.PatternBursty {
		return withCode(exitUsage, errors.New("--burst only applies to --pattern bursty"))
	}
	for _, name := range []string{"size", "burst", "drain", "late-after", "id-base"} {
		// Zero means "default" in load.Config; on the command line it is
		// more likely a mistake than a request for the default.
		if fl := cmd.Flags().Lookup(name); fl.Changed && isZeroFlag(fl) {
			return withCode(exitUsage, fmt.Errorf("--%s %s is invalid: give a value > 0", name, fl.Value))
		}
	}
	if cfg.Out == "" {
		return withCode(exitUsage, errors.New("--out is empty: give a directory for e2e.csv and load.json"))
	}
	// Check the output directory before sending anything.
	outDir, err := outdir.Open(cfg.Out)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--out %s: %w", cfg.Out, err))
	}
	defer outDir.Close()

	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, restore default handling so a second
		// one kills the process.
		<-ctx.Done()
		stop()
	}()

	res, err := load.Run(ctx, cfg)
	if res == nil {
		switch {
		case errors.Is(err, load.ErrConfig):
			return withCode(exitUsage, err)
		case errors.Is(err, load.ErrUnreachable):
			return withCode(exitNoTarget, err)
		case errors.Is(err, load.ErrAuth):
			// Not "unreachable" (3): a script retrying a down broker must
			// not retry a wrong password forever.
			return withCode(exitFailure, err)
		case errors.Is(err, context.Canceled):
			return withCode(exitFailure, errors.New("interrupted before sending started"))
		}
		return withCode(exitFailure, err)
	}
	if werr := res.WriteFiles(outDir); werr != nil {
		return withCode(exitFailure, werr)
	}
	out := cmd.OutOrStdout()
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(res.Summary); jerr != nil {
			return withCode(exitFailure, jerr)
		}
	} else {
		printLoadSummary(out, res, cfg.Out)
	}
	switch {
	case err != nil:
		return withCode(exitFailure, fmt.Errorf("run ended early after %d of %d messages (results for those are in %s): %w", res.Sent, res.Planned, cfg.Out, err))
	case res.Interrupted:
		return withCode(exitFailure, fmt.Errorf("interrupted after %d of %d messages; partial results in %s", res.Sent, res.Planned, cfg.Out))
	}
	return nil
}

func isZeroFlag(fl *pflag.Flag) bool {
	switch fl.Value.Type() {
	case "duration":
		d, _ := time.ParseDuration(fl.Value.String())
		return d == 0
	default:
		return fl.Value.String() == "0"
	}
}

func printLoadSummary(w io.Writer, r *load.Result, dir string) {
	s := r.Summary
	fmt.Fprintf(w, "load: %s subject %s, ids %d..%d\n", s.URL, s.Options.Subject, s.FirstID, s.LastID)
	fmt.Fprintf(w, "  sent %d of %d planned, received %d, missing %d, duplicates %d", s.Sent, s.Planned, s.Received, s.Missing, s.Duplicates)
	if s.Unexpected+s.Unmarked > 0 {
		fmt.Fprintf(w, ", foreign %d", s.Unexpected+s.Unmarked)
	}
	if s.ClientDropped > 0 {
		fmt.Fprintf(w, " (%d dropped by the client library)", s.ClientDropped)
	}
	fmt.Fprintln(w)
	if s.NamedByOrder {
		fmt.Fprintln(w, "  payload same: no header carries the marker over this protocol; each consumer named the messages by their order of arrival (the broker keeps one publisher's order)")
	}
	if s.AskedRate > 0 {
		fmt.Fprintf(w, "  rate asked %.1f msg/s, achieved %.1f msg/s (short by %.2f%%); %d late sends (> %v), max lateness %v\n",
			s.AskedRate, s.AchievedRate, s.ShortfallPct, s.LateSends, time.Duration(s.LateAfterNs), time.Duration(s.MaxLatenessNs))
	} else {
		fmt.Fprintf(w, "  rate achieved %.1f msg/s (as fast as possible)\n", s.AchievedRate)
	}
	lat := func(name string, st load.Stats) {
		if st.Count == 0 {
			fmt.Fprintf(w, "  e2e latency %s: no messages\n", name)
			return
		}
		fmt.Fprintf(w, "  e2e latency %s (n=%d): p50 %v  p99 %v  max %v\n", name, st.Count,
			time.Duration(st.P50Ns), time.Duration(st.P99Ns), time.Duration(st.MaxNs))
	}
	lat("from intended send", s.LatencyFromIntended)
	lat("from actual send", s.LatencyFromSend)
	printSubscribers(w, s.Subscribers)
	if s.Warmup > 0 {
		fmt.Fprintf(w, "  %d warm-up messages left out of latency\n", s.Warmup)
	}
	files := []string{filepath.Join(dir, recfile.E2EFile), filepath.Join(dir, recfile.LoadJSONFile)}
	if len(s.Subscribers) > 0 {
		files = slices.Insert(files, 1, filepath.Join(dir, recfile.SubsFile))
	}
	fmt.Fprintf(w, "  files: %s\n", strings.Join(files, ", "))
}

// printSubscribers prints one line per subscriber of a run with --sub-url.
// It prints them for a single one as well: the counts above are then that
// subscriber's, and the line says where it subscribed.
func printSubscribers(w io.Writer, subs []recfile.SubscriberSummary) {
	for k, s := range subs {
		fmt.Fprintf(w, "  subscriber %d %s: received %d, missing %d, duplicates %d", k+1, s.URL, s.Received, s.Missing, s.Duplicates)
		if s.Unexpected+s.Unmarked > 0 {
			fmt.Fprintf(w, ", foreign %d", s.Unexpected+s.Unmarked)
		}
		if s.ClientDropped > 0 {
			fmt.Fprintf(w, " (%d dropped by the client library)", s.ClientDropped)
		}
		if st := s.LatencyFromSend; st.Count > 0 {
			fmt.Fprintf(w, "; e2e from send p50 %v  p99 %v  max %v", time.Duration(st.P50Ns), time.Duration(st.P99Ns), time.Duration(st.MaxNs))
		}
		fmt.Fprintln(w)
	}
}
