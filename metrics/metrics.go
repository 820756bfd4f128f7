// Package metrics serves a recording's numbers to Prometheus (--metrics
// ADDR; over HTTPS with basic auth as the exporter-toolkit's web
// configuration file says, --web.config.file): the broker's latency,
// context switches, CPU and socket-queue wait per message, and its
// packets' payload sizes, as native histograms with classic buckets
// beside them; the recording's counters of messages, losses and
// unscanned bytes; and the sources' latest windows as gauges. Every
// series is labelled by broker (comm, pid, container), so that one
// Prometheus scrapes a fleet. docs/metrics.md lists every metric.
//
// An Exporter is a record.Observer: per-message values come from the rows
// of messages.csv as they are written, counters and gauges from the
// recording's Tick every live interval and from meta.json at the end.
package metrics

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

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

// Server serves /metrics over HTTP, or HTTPS with basic auth as its web
// configuration file says, for the Exporters made by Observer, one per
// broker recorded.
type Server struct {
	ln    net.Listener
	http  *http.Server
	web   *webConfig
	reg   *prometheus.Registry
	hists histograms
	done  chan error

	mu        sync.Mutex
	exporters []*Exporter
}

// Options are how a Server serves.
type Options struct {
	// WebConfigFile is a web configuration file of the Prometheus
	// exporter-toolkit, as node_exporter's --web.config.file reads it:
	// tls_server_config for HTTPS, basic_auth_users with bcrypt hashes.
	// Empty: plain HTTP, open to anyone who reaches the address.
	WebConfigFile string
	// ErrorLog takes the server's errors, such as a TLS handshake that
	// failed; nil: os.Stderr.
	ErrorLog io.Writer
}

// Listen checks o's web configuration file and binds addr (":9464",
// "127.0.0.1:0") at once, so that a bad file or a port in use is an error
// before a recording starts, and serves /metrics on it until Close.
func Listen(addr string, o Options) (*Server, error) {
	wc, err := loadWebConfig(o.WebConfigFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		wc.remove()
		return nil, fmt.Errorf("cannot serve metrics on %s: %w", addr, err)
	}
	s := &Server{ln: ln, web: wc, reg: prometheus.NewRegistry(), hists: newHistograms(), done: make(chan error, 1)}
	s.reg.MustRegister(s.hists.all()...)
	s.reg.MustRegister((*collector)(s))
	// brokertrace's own Go runtime and process: what the exporter and the
	// recording cost.
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	log := errorLogger(o.ErrorLog)
	s.http = &http.Server{Handler: s.mux(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}
	go s.serve(addr, wc.path, log)
	return s, nil
}

// mux serves /metrics, and a line pointing there at /.
func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "brokertrace: metrics at /metrics")
	})
	return mux
}

// serve runs the toolkit's server on s's listener until Close, from the
// checked copy of the web configuration file; an error that stops it
// earlier is logged, since the recording goes on without its metrics.
func (s *Server) serve(addr, webConfig string, log *slog.Logger) {
	err := web.Serve(s.ln, s.http, &web.FlagConfig{
		WebListenAddresses: &[]string{addr},
		WebConfigFile:      &webConfig,
	}, log)
	if !errors.Is(err, http.ErrServerClosed) {
		log.Error("metrics server stopped", "address", addr, "err", err)
	}
	s.done <- err
}

// errorLogger logs the toolkit's errors to w, leaving out its
// informational lines (listening, TLS on or off), which would interleave
// with the recording's status lines.
func errorLogger(w io.Writer) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
}

// Addr is the address the server listens on (the port chosen for ":0").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is where the metrics are: https:// when the web configuration file
// turns TLS on.
func (s *Server) URL() string {
	scheme := "http"
	if s.web.tls {
		scheme = "https"
	}
	return scheme + "://" + s.Addr() + "/metrics"
}

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

// Close stops serving and removes the copy of the web configuration.
func (s *Server) Close() error {
	err := s.http.Close()
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	s.web.remove()
	return err
}
