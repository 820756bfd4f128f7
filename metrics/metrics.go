// Package metrics serves a recording's numbers to Prometheus (--metrics
// ADDR): the broker's latency, context switches, CPU and socket-queue
// wait per message, and its packets' payload sizes, as native histograms
// with classic buckets beside them; the recording's counters of messages,
// losses and unscanned bytes; and the sources' latest windows as gauges.
// Every series is labelled by broker (comm, pid, container), so that one
// Prometheus scrapes a fleet. docs/metrics.md lists every metric.
//
// An Exporter is a record.Observer: per-message values come from the rows
// of messages.csv as they are written, counters and gauges from the
// recording's Tick every live interval and from meta.json at the end.
package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Broker is what labels a broker's series.
type Broker struct {
	Comm string
	PID  int
	// Container is the id of the container the broker runs in, from its
	// cgroup v2 path; empty outside a container.
	Container string
}

// labels are the values of the labels every series has, in labelNames'
// order.
func (b Broker) labels() []string {
	return []string{b.Comm, strconv.Itoa(b.PID), b.Container}
}

// labelNames label every series by broker.
var labelNames = []string{"comm", "pid", "container"}

// BrokerOf labels p: its comm, pid and container id.
func BrokerOf(p *process.Process) Broker {
	return Broker{Comm: p.Comm, PID: p.PID, Container: container(p.PID)}
}

// container is the container id of pid's cgroup, "" outside one.
func container(pid int) string {
	_, id := process.Cgroup(pid)
	return id
}

// Columns are the columns the annotating sources among srcs add to
// messages.csv, in the order a recording writes them: what an Exporter
// needs to read a row's extra fields before the first Tick names them.
func Columns(srcs []source.Source) []string {
	var cols []string
	for _, s := range srcs {
		if a, ok := s.(source.Annotator); ok {
			cols = append(cols, a.Columns()...)
		}
	}
	return cols
}

// Server serves /metrics over HTTP for the Exporters made by Observer,
// one per broker recorded.
type Server struct {
	ln    net.Listener
	http  *http.Server
	reg   *prometheus.Registry
	hists histograms
	done  chan error

	mu        sync.Mutex
	exporters []*Exporter
}

// Listen binds addr (":9464", "127.0.0.1:0") at once, so that a port in
// use is an error before a recording starts, and serves /metrics on it
// until Close.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve metrics on %s: %w", addr, err)
	}
	s := &Server{ln: ln, reg: prometheus.NewRegistry(), hists: newHistograms(), done: make(chan error, 1)}
	s.reg.MustRegister(s.hists.all()...)
	s.reg.MustRegister((*collector)(s))
	// brokertrace's own Go runtime and process: what the exporter and the
	// recording cost.
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "brokertrace: metrics at /metrics")
	})
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on (the port chosen for ":0").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Observer returns the record.Observer that exports one broker's
// recording. columns are the extra columns of messages.csv (Columns); the
// recording's Tick.Columns replace them if they differ.
func (s *Server) Observer(b Broker, columns []string) *Exporter {
	e := newExporter(s, b, columns)
	s.mu.Lock()
	s.exporters = append(s.exporters, e)
	s.mu.Unlock()
	return e
}

// Close stops serving.
func (s *Server) Close() error {
	err := s.http.Close()
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}
