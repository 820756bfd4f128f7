// Package peers is the source that places a recording's broker in its
// cluster: it names the node and lists its TCP connections with their
// addresses (connections.csv), which messages.csv names by ports alone.
// A join of several nodes' recordings (package cluster) follows a message
// from the node that wrote it to a connection to the node that read it by
// these addresses.
package peers

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/correlate"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the source's entry in the table of sources (--peers, --node).
func Spec() source.Spec {
	var (
		on   bool
		name string
	)
	return source.Spec{
		Name: "peers",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "peers", true, "name the node and list the broker's TCP connections with their addresses at the start and end (connections.csv), so that recordings of a cluster's nodes can be joined (brokertrace cluster)")
			fl.StringVar(&name, "node", "", "the node's name in a cluster join (default: the broker's own server name where its command line gives one, else HOST:PID)")
		},
		New: func(*process.Process) (source.Source, error) {
			if !on {
				return nil, nil
			}
			return &Source{name: name}, nil
		},
	}
}

// Source lists the target's connections when the recording starts and
// when it ends, and in between each connection a message crossed, looked
// up by its ports when its first row is written: it reads /proc only then,
// so a connection no message crossed and that lived only in between is
// not listed (nothing needs it).
type Source struct {
	name  string // --node
	env   *source.Env
	node  recfile.NodeMeta
	ports []uint16 // listening
	start []process.Conn

	// asked are the port pairs of rows already looked up or known, owned
	// by Annotate's goroutine; lookups go to the resolver through req.
	asked map[portPair]bool
	req   chan portPair
	done  chan struct{}
	wg    sync.WaitGroup

	mu         sync.Mutex
	during     []process.Conn // found by lookups
	unresolved []portPair     // closed and gone before the lookup
	missed     []string
}

type portPair struct{ local, remote uint16 }

// Name is the source's key in meta.json.
func (s *Source) Name() string { return "peers" }

// Start names the node, reads its listeners and connections, and starts
// the resolver of connections the rows cross later.
func (s *Source) Start(env *source.Env) error {
	s.env = env
	t := env.Target
	ls, err := process.Listeners(t.PID)
	if err != nil {
		return source.Unavailable(err)
	}
	s.ports = process.Ports(ls)
	host, _ := os.Hostname()
	s.node = nodeOf(t, host, s.name)
	for _, l := range ls {
		s.node.Listeners = append(s.node.Listeners, l.String())
	}
	if s.start, err = process.Connections(t.PID); err != nil {
		s.missed = append(s.missed, "at the start: "+err.Error())
	}
	s.node.Peers = []string{}
	for _, c := range s.start {
		if !slices.Contains(s.ports, c.Local.Port()) && !slices.Contains(s.start, process.Conn{Local: c.Remote, Remote: c.Local}) {
			s.node.Peers = append(s.node.Peers, c.Remote.String())
		}
	}
	s.asked = map[portPair]bool{}
	for _, c := range s.start {
		s.asked[portPair{c.Local.Port(), c.Remote.Port()}] = true
	}
	s.req, s.done = make(chan portPair, 1024), make(chan struct{})
	s.wg.Go(s.resolve)
	return nil
}

// Columns: the source adds none; it only watches the rows' connections.
func (s *Source) Columns() []string { return nil }

// Annotate asks for the addresses of a row's connections the first time a
// row crosses them. A full queue leaves the pair to be asked again by the
// next row.
func (s *Source) Annotate(dst []byte, m *correlate.Message) []byte {
	for _, pp := range [2]portPair{{m.InConn.LocalPort, m.InConn.RemotePort}, {m.OutConn.LocalPort, m.OutConn.RemotePort}} {
		if s.asked[pp] {
			continue
		}
		select {
		case s.req <- pp:
			s.asked[pp] = true
		default:
		}
	}
	return dst
}

// resolve looks up the pairs asked for, a batch per read of the
// namespace's TCP tables.
func (s *Source) resolve() {
	for {
		var batch []portPair
		select {
		case pp := <-s.req:
			batch = append(batch, pp)
		case <-s.done:
			return
		}
		for more := true; more; {
			select {
			case pp := <-s.req:
				batch = append(batch, pp)
			default:
				more = false
			}
		}
		s.lookup(batch)
	}
}

func (s *Source) lookup(batch []portPair) {
	conns, err := process.NamespaceConns(s.env.Target.PID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.unresolved = append(s.unresolved, batch...)
		return
	}
	for _, pp := range batch {
		i := slices.IndexFunc(conns, func(c process.Conn) bool {
			return c.Local.Port() == pp.local && c.Remote.Port() == pp.remote
		})
		if i < 0 {
			s.unresolved = append(s.unresolved, pp)
			continue
		}
		s.during = append(s.during, conns[i])
	}
}

// Sample does nothing: the connections are read at the start and end.
func (s *Source) Sample(int64) {}

// Watermark: no per-message data.
func (s *Source) Watermark() int64 { return source.NoWatermark }

// Drain stops the resolver; pairs asked later are found at the end, if
// still open.
func (s *Source) Drain() error {
	close(s.done)
	s.wg.Wait()
	return nil
}

// Finish reads the connections again and writes connections.csv. Once
// the recording has dropped its capabilities the broker's descriptors
// cannot be read (that needs CAP_SYS_PTRACE, kept for nothing else), so
// the connections at the end are those of the broker's namespace that it
// held at the start, that messages crossed, or that it accepted on its
// listening ports.
func (s *Source) Finish(*source.Timeline) (source.Result, error) {
	all, err := process.NamespaceConns(s.env.Target.PID)
	if err != nil {
		s.missed = append(s.missed, "at the end: "+err.Error())
	}
	end := slices.DeleteFunc(all, func(c process.Conn) bool {
		return !s.asked[portPair{c.Local.Port(), c.Remote.Port()}] && !slices.Contains(s.ports, c.Local.Port())
	})
	rows := rowsOf(s.start, s.during, end, s.ports)
	if err := recfile.WriteTable(s.env.Out, recfile.ConnectionsFile, rows); err != nil {
		return source.Result{}, err
	}
	s.node.Connections = len(rows)
	s.node.Missed = s.missed
	var warn []string
	for _, m := range s.missed {
		warn = append(warn, "the broker's connections could not be listed "+m)
	}
	if n := len(s.unresolved) - found(s.unresolved, end); n > 0 {
		s.node.Unresolved = n
		warn = append(warn, fmt.Sprintf("%d connections that messages crossed had closed before their addresses were read: a cluster join cannot place their rows", n))
	}
	return source.Result{
		Files:    []string{recfile.ConnectionsFile},
		Meta:     s.node,
		Warnings: warn,
		Summary:  fmt.Sprintf("node %s, %d connections", s.node.Name, len(rows)),
	}, nil
}

// found counts the pairs that conns hold.
func found(pairs []portPair, conns []process.Conn) int {
	n := 0
	for _, pp := range pairs {
		if slices.ContainsFunc(conns, func(c process.Conn) bool {
			return c.Local.Port() == pp.local && c.Remote.Port() == pp.remote
		}) {
			n++
		}
	}
	return n
}

// rowsOf merges the connections seen at the start, during and at the
// end, in the order of their local, then remote, address.
func rowsOf(start, during, end []process.Conn, listening []uint16) []recfile.ConnectionRow {
	const atStart, atDuring, atEnd = 1, 2, 4
	seen := map[process.Conn]int{}
	for bit, cs := range map[int][]process.Conn{atStart: start, atDuring: during, atEnd: end} {
		for _, c := range cs {
			seen[c] |= bit
		}
	}
	conns := slices.SortedFunc(maps.Keys(seen), func(a, b process.Conn) int {
		return cmp.Or(a.Local.Compare(b.Local), a.Remote.Compare(b.Remote))
	})
	rows := make([]recfile.ConnectionRow, len(conns))
	for i, c := range conns {
		side := recfile.SideDialed
		if slices.Contains(listening, c.Local.Port()) {
			side = recfile.SideAccepted
		}
		rows[i] = recfile.ConnectionRow{LocalAddr: c.Local.Addr().String(), LocalPort: c.Local.Port(),
			RemoteAddr: c.Remote.Addr().String(), RemotePort: c.Remote.Port(), Side: side,
			SeenStart: b2u(seen[c]&atStart != 0), SeenDuring: b2u(seen[c]&atDuring != 0), SeenEnd: b2u(seen[c]&atEnd != 0)}
	}
	return rows
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// nodeOf names the node: --node, else the server name on the broker's
// command line, else HOST:PID.
func nodeOf(t *process.Process, host, name string) recfile.NodeMeta {
	n := recfile.NodeMeta{Host: host}
	var args map[string]string
	if isNATS(t) {
		args = flagValues(t.Cmdline)
	}
	switch {
	case name != "":
		n.Name, n.NameFrom = name, "--node"
	case args["name"] != "":
		n.Name, n.NameFrom = args["name"], "command line"
	default:
		n.Name, n.NameFrom = fmt.Sprintf("%s:%d", host, t.PID), "host and pid"
	}
	n.Cluster, n.ClusterListen = args["cluster"], args["cluster_listen"]
	return n
}

// isNATS reports whether t is a nats-server, whose flags serverFlags knows.
func isNATS(t *process.Process) bool {
	names := []string{t.Comm, filepath.Base(t.Exe)}
	if len(t.Cmdline) > 0 {
		names = append(names, filepath.Base(t.Cmdline[0]))
	}
	return slices.ContainsFunc(names, func(n string) bool { return n == "nats-server" || n == "gnatsd" })
}

// serverFlags are the command-line flags that name a server and its
// cluster, by broker: nats-server's -n/--name/--server_name and
// --cluster_name.
var serverFlags = map[string]string{
	"-n": "name", "--name": "name", "-name": "name", "--server_name": "name", "-server_name": "name",
	"--cluster_name": "cluster", "-cluster_name": "cluster",
	"--cluster": "cluster_listen", "-cluster": "cluster_listen",
}

// flagValues picks serverFlags' values from a command line, as "-f v" or
// "-f=v".
func flagValues(cmdline []string) map[string]string {
	vals := map[string]string{}
	for i, a := range cmdline {
		flag, val, eq := strings.Cut(a, "=")
		key, ok := serverFlags[flag]
		if !ok {
			continue
		}
		if !eq && i+1 < len(cmdline) {
			val = cmdline[i+1]
		}
		if val != "" {
			vals[key] = val
		}
	}
	return vals
}
