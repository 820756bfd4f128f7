// Package cluster joins the recordings of a cluster's nodes into each
// message's path across them: the node a client published to, the routes
// it crossed, the node that delivered it, with each hop's broker latency,
// switches and on-CPU time and the network time between nodes. It reads
// recordings through recfile only.
package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/brokertrace/brokertrace/recfile"
)

// ErrInput marks errors in what the join was given: not a recording, one
// without its connections, two recordings of one node.
var ErrInput = errors.New("bad input")

// inputError is an ErrInput in its own words.
type inputError struct{ error }

func (inputError) Is(target error) bool { return target == ErrInput }
func (e inputError) Unwrap() error      { return e.error }

func inputErrorf(format string, a ...any) error { return inputError{fmt.Errorf(format, a...)} }

// node is one recording of the join.
type node struct {
	name, dir, host string
	bootID          string
	rows            []row
	// conns maps a connection's two ports, as messages.csv names it, to
	// its addresses.
	conns map[portPair]conn
}

type portPair struct{ local, remote uint16 }

// conn is one of connections.csv's rows.
type conn struct {
	local, remote netip.AddrPort
	dialed        bool // the node opened it
}

// row is one row of messages.csv with the scheduler's columns, where the
// recording has them.
type row struct {
	ID       uint64 `csv:"id"`
	TIn      int64  `csv:"t_in_ns"`
	TOut     int64  `csv:"t_out_ns"`
	InLPort  uint16 `csv:"in_lport"`
	InRPort  uint16 `csv:"in_rport"`
	OutLPort uint16 `csv:"out_lport"`
	OutRPort uint16 `csv:"out_rport"`
	Copy     uint32 `csv:"copy"`
	Ctxsw    *int64 `csv:"ctxsw"`
	OnCPU    *int64 `csv:"oncpu_ns"`
}

// plainRow is row without the scheduler's columns, for a recording made
// with --sched=false.
type plainRow struct {
	ID       uint64 `csv:"id"`
	TIn      int64  `csv:"t_in_ns"`
	TOut     int64  `csv:"t_out_ns"`
	InLPort  uint16 `csv:"in_lport"`
	InRPort  uint16 `csv:"in_rport"`
	OutLPort uint16 `csv:"out_lport"`
	OutRPort uint16 `csv:"out_rport"`
	Copy     uint32 `csv:"copy"`
}

// recordings expands the arguments: a recording directory stands for
// itself; a directory without meta.json for the recordings directly in it
// (what bare brokertrace --all writes: one COMM-PID directory per broker).
func recordings(args []string) ([]string, error) {
	var dirs []string
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, recfile.MetaFile)); err == nil {
			dirs = append(dirs, a)
			continue
		}
		subs, _ := filepath.Glob(filepath.Join(a, "*", recfile.MetaFile))
		if len(subs) == 0 {
			return nil, inputErrorf("%s: not a recording (no %s) nor a directory of recordings", a, recfile.MetaFile)
		}
		for _, m := range subs {
			dirs = append(dirs, filepath.Dir(m))
		}
	}
	return dirs, nil
}

// readNode reads a recording: its node's name, connections and rows.
func readNode(dir string) (*node, error) {
	var meta struct {
		Host    recfile.Host `json:"host"`
		Sources map[string]struct {
			Status string           `json:"status"`
			Error  string           `json:"error"`
			Meta   recfile.NodeMeta `json:"meta"`
		} `json:"sources"`
	}
	if err := recfile.ReadJSON(dir, recfile.MetaFile, &meta); err != nil {
		return nil, inputErrorf("%s: not a recording: %w", dir, err)
	}
	p, ok := meta.Sources["peers"]
	if !ok || p.Status != "ok" {
		return nil, inputErrorf("%s: the recording has no list of connections (made without the peers source, or it failed: %s); record with --peers", dir, p.Error)
	}
	n := &node{name: p.Meta.Name, dir: dir, host: meta.Host.Hostname, bootID: meta.Host.BootID, conns: map[portPair]conn{}}
	if err := n.readConns(); err != nil {
		return nil, err
	}
	return n, n.readRows()
}

func (n *node) readConns() error {
	rows, err := recfile.ReadTable[recfile.ConnectionRow](filepath.Join(n.dir, recfile.ConnectionsFile))
	if err != nil {
		return err
	}
	for _, r := range rows {
		l, errL := netip.ParseAddr(r.LocalAddr)
		m, errR := netip.ParseAddr(r.RemoteAddr)
		if errL != nil || errR != nil {
			return inputErrorf("%s: bad address in %s: %v", n.dir, recfile.ConnectionsFile, errors.Join(errL, errR))
		}
		n.conns[portPair{r.LocalPort, r.RemotePort}] = conn{
			local:  netip.AddrPortFrom(l, r.LocalPort),
			remote: netip.AddrPortFrom(m, r.RemotePort),
			dialed: r.Side == recfile.SideDialed,
		}
	}
	return nil
}

func (n *node) readRows() error {
	path := filepath.Join(n.dir, recfile.MessagesFile)
	err := recfile.ScanTable(path, func(r *row) error {
		n.rows = append(n.rows, *r)
		return nil
	})
	var se *recfile.ScanError
	if errors.As(err, &se) && errors.Is(err, recfile.ErrNoColumn) && (se.Column == recfile.CtxswColumn || se.Column == recfile.OnCPUColumn) {
		n.rows = n.rows[:0]
		err = recfile.ScanTable(path, func(r *plainRow) error {
			n.rows = append(n.rows, row{ID: r.ID, TIn: r.TIn, TOut: r.TOut, InLPort: r.InLPort, InRPort: r.InRPort,
				OutLPort: r.OutLPort, OutRPort: r.OutRPort, Copy: r.Copy})
			return nil
		})
	}
	if errors.Is(err, os.ErrNotExist) {
		return inputErrorf("%s: no %s", n.dir, recfile.MessagesFile)
	}
	return err
}
