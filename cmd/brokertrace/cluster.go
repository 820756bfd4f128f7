package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/brokertrace/brokertrace/cluster"
	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/report"
)

func newClusterCmd() *cobra.Command {
	var (
		out, format string
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "cluster RECORDING|DIR...",
		Short: "Join the recordings of a cluster's nodes into each message's path: hops.csv",
		Long: `cluster joins recordings of the nodes of one broker cluster, made at the same
time (one brokertrace record per node, or bare brokertrace --all, whose
--out directory may be given for the recordings in it), into each
delivered message's path: the node a client published it to, every route it
crossed, the node that delivered it. For every delivery it writes one row per
hop to hops.csv: the node, its t_in and t_out (the time in that broker), its
context switches and on-CPU time, and the time on the route from the hop
before. It prints per path (the nodes crossed, in order) each hop's
latencies and the time in the cluster.

A copy a node wrote to a connection whose other end is in another recording
is a hop, followed there by the message id and the connection's addresses
(each recording's connections.csv); one written to any other connection a
client accepted from is a delivery. Recordings must name distinct nodes
(record --node NAME where the broker's command line has no server name).
Times are the first recording's CLOCK_MONOTONIC: recordings made on one
host share it; those of other hosts are brought to it by the clock offset
and drift estimated from the TCP segments of a route that both ends
captured (record every node with --pcap FILE).

It writes hops.csv (hops.parquet with --format parquet) and cluster.json into --out and prints the summary, or
cluster.json with --json. docs/formats.md describes both. It also writes
cluster.html there: what was joined and what could not be, and per path a
diagram of its nodes and routes with their median and p99 latencies and
the distributions of each hop's, each route's and the whole path's times
(plots/ and figures/ hold each figure as gnuplot files, SVG and PNG).

Exit status: 0 joined; 1 failed; 2 bad input (not a recording, one made
without its connections, two recordings of one node).`,
		Example: `  # Three nodes of a NATS cluster on this host, recorded at once
  sudo brokertrace record --pid $(pgrep -f 'nats-server.*-n n1') --out rec/n1 --duration 30s &
  sudo brokertrace record --pid $(pgrep -f 'nats-server.*-n n2') --out rec/n2 --duration 30s &
  sudo brokertrace record --pid $(pgrep -f 'nats-server.*-n n3') --out rec/n3 --duration 30s &
  brokertrace load --url nats://n1:4222 --sub-url nats://n2:4222 --sub-url nats://n3:4222 --rate 20000 --duration 20s --out rec/load
  wait; brokertrace cluster rec/n1 rec/n2 rec/n3 --out rec/cluster

  # Every broker of this host recorded at once, then joined
  sudo brokertrace --all --name nats --duration 30s --out rec/all
  brokertrace cluster rec/all --out rec/cluster

  # The same, machine-readable
  brokertrace cluster rec/n1 rec/n2 rec/n3 --out rec/cluster --json

  # Nodes on three hosts, each recorded there with --pcap, files gathered here
  brokertrace cluster hostA/n1 hostB/n2 hostC/n3 --out cluster-abc`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return withCode(exitUsage, errors.New("give the recordings of the cluster's nodes (brokertrace record --out DIR, one per node)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != recfile.FormatCSV && format != recfile.FormatParquet {
				return withCode(exitUsage, fmt.Errorf("--format %q: give csv or parquet", format))
			}
			d, err := outdir.Open(out)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--out %s: %w", out, err))
			}
			defer d.Close()
			sum, err := cluster.Join(args, d)
			if errors.Is(err, cluster.ErrInput) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			if format == recfile.FormatParquet {
				if _, err := recfile.ConvertParquet(d, recfile.HopsFile); err != nil {
					return withCode(exitFailure, err)
				}
			}
			if _, err := report.ClusterPage(d); err != nil {
				return withCode(exitFailure, err)
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sum)
			}
			return cluster.WriteText(os.Stdout, sum)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "cluster", "directory for hops.csv, cluster.json and cluster.html (created if missing)")
	f.StringVar(&format, "format", recfile.FormatCSV, "format of hops: csv, or parquet (hops.parquet: typed columns, for DuckDB or Spark)")
	f.BoolVar(&asJSON, "json", false, "print cluster.json on stdout instead of the tables")
	return cmd
}
