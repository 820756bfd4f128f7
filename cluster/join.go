package cluster

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/brokertrace/brokertrace/outdir"
	"github.com/brokertrace/brokertrace/recfile"
)

// connKey is a connection as one end sees it.
type connKey struct{ local, remote netip.AddrPort }

// outKey finds the row that wrote a message to a connection.
type outKey struct {
	id           uint64
	lport, rport uint16
}

// hop is one node's row on a path.
type hop struct {
	node int
	row  *row
}

// joiner holds the recordings and what the walk back along paths needs.
type joiner struct {
	nodes []*node
	// owner finds the node that holds a connection end.
	owner map[connKey]int
	// wrote finds, per node, the row that wrote a message to a connection
	// to another recorded node.
	wrote []map[outKey]*row
	sum   recfile.ClusterSummary
	paths [][]hop
}

// Join reads the recordings in dirs (one per node), follows every copy a
// node delivered to a client back through the routes it came by, and
// writes hops.csv into out. Recordings taken on one host share
// CLOCK_MONOTONIC; those of other hosts are first brought to the first
// recording's clock (alignClocks).
func Join(args []string, out *outdir.Dir) (*recfile.ClusterSummary, error) {
	dirs, err := recordings(args)
	if err != nil {
		return nil, err
	}
	j := &joiner{owner: map[connKey]int{}}
	seen := map[string]string{}
	for _, d := range dirs {
		n, err := readNode(d)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[n.name]; dup {
			return nil, inputErrorf("%s and %s both name their node %q: record each node with --node NAME", prev, d, n.name)
		}
		seen[n.name] = d
		j.nodes = append(j.nodes, n)
		j.sum.Nodes = append(j.sum.Nodes, recfile.ClusterNode{Name: n.name, Dir: d, Host: n.host, Rows: int64(len(n.rows)), Connections: len(n.conns)})
	}
	for i, n := range j.nodes {
		for _, c := range n.conns {
			j.owner[connKey{c.local, c.remote}] = i
		}
	}
	if err := j.alignClocks(); err != nil {
		return nil, err
	}
	j.index()
	for i, n := range j.nodes {
		for k := range n.rows {
			j.follow(i, &n.rows[k])
		}
	}
	rows := j.hopRows()
	j.sum.Rows = int64(len(rows))
	j.sum.Paths = pathStats(rows)
	if err := recfile.WriteTable(out, recfile.HopsFile, rows); err != nil {
		return nil, err
	}
	return &j.sum, recfile.WriteJSON(out, recfile.ClusterFile, &j.sum, outdir.FilePerm)
}

// peer returns the node at the other end of node i's connection pp: known
// is false when node i's recording does not list pp, peer is −1 when no
// recording holds the other end.
func (j *joiner) peer(i int, pp portPair) (c conn, peer int, known bool) {
	c, known = j.nodes[i].conns[pp]
	if !known {
		return c, -1, false
	}
	p, ok := j.owner[connKey{c.remote, c.local}]
	if !ok {
		return c, -1, true
	}
	return c, p, true
}

// index finds, on every node, the rows that wrote to another node.
func (j *joiner) index() {
	j.wrote = make([]map[outKey]*row, len(j.nodes))
	for i, n := range j.nodes {
		j.wrote[i] = map[outKey]*row{}
		for k := range n.rows {
			r := &n.rows[k]
			if _, p, _ := j.peer(i, portPair{r.OutLPort, r.OutRPort}); p < 0 {
				continue
			}
			key := outKey{r.ID, r.OutLPort, r.OutRPort}
			if prev, dup := j.wrote[i][key]; dup {
				j.sum.Ambiguous++
				if prev.TOut <= r.TOut {
					continue
				}
			}
			j.wrote[i][key] = r
		}
	}
}

// follow classifies row r of node i by where its copy went and, for a
// delivery to a client, walks its path back to where it entered.
func (j *joiner) follow(i int, r *row) {
	c, p, known := j.peer(i, portPair{r.OutLPort, r.OutRPort})
	switch {
	case !known:
		j.sum.UnknownConn++
		return
	case p >= 0:
		return // to another node: a hop of a delivery from there
	case c.dialed:
		j.sum.ToUnrecorded++
		return
	}
	j.sum.Deliveries++
	path := []hop{{i, r}}
	for len(path) <= maxHops {
		at := path[len(path)-1]
		c, p, known := j.peer(at.node, portPair{at.row.InLPort, at.row.InRPort})
		switch {
		case !known:
			j.sum.UnknownConn++
			j.sum.Unplaced++
			return
		case p < 0 && c.dialed:
			j.sum.FromUnrecorded++
			return
		case p < 0:
			slices.Reverse(path)
			j.paths = append(j.paths, path)
			j.sum.FullPaths++
			return
		}
		prev := j.wrote[p][outKey{at.row.ID, c.remote.Port(), c.local.Port()}]
		if prev == nil {
			j.sum.Broken++
			return
		}
		path = append(path, hop{p, prev})
	}
	j.sum.Broken++ // a loop
}

// maxHops bounds a path: a message may come back to a node it crossed
// (a queue's leader on another node), but not endlessly.
const maxHops = 32

// hopRows turns the full paths into hops.csv's rows, numbering each
// message's deliveries in the order they left the cluster. Deliveries that
// left in the same ns keep the order they were found in (recording, then
// row in its file), so that the numbers do not depend on the sort and
// docs/cluster-join.sql can give the same.
func (j *joiner) hopRows() []recfile.HopRow {
	last := func(p []hop) *row { return p[len(p)-1].row }
	slices.SortStableFunc(j.paths, func(a, b []hop) int {
		return cmp.Or(cmp.Compare(a[0].row.ID, b[0].row.ID), cmp.Compare(last(a).TOut, last(b).TOut))
	})
	var rows []recfile.HopRow
	var delivery uint32
	for k, p := range j.paths {
		if k == 0 || p[0].row.ID != j.paths[k-1][0].row.ID {
			delivery = 0
		}
		delivery++
		for h, at := range p {
			rows = append(rows, j.hopRow(p, h, at, delivery))
		}
	}
	return rows
}

func (j *joiner) hopRow(p []hop, h int, at hop, delivery uint32) recfile.HopRow {
	r := at.row
	hr := recfile.HopRow{ID: r.ID, Delivery: delivery, Hop: uint8(h + 1), Hops: uint8(len(p)),
		Node: j.nodes[at.node].name, TIn: r.TIn, TOut: r.TOut, Latency: r.TOut - r.TIn,
		Ctxsw: r.Ctxsw, OnCPU: r.OnCPU, Copy: r.Copy}
	if h == 0 {
		hr.From = "client:" + j.nodes[at.node].conns[portPair{r.InLPort, r.InRPort}].remote.String()
	} else {
		hr.From = j.nodes[p[h-1].node].name
		net := r.TIn - p[h-1].row.TOut
		hr.NetNs = &net
	}
	if h == len(p)-1 {
		hr.To = "client:" + j.nodes[at.node].conns[portPair{r.OutLPort, r.OutRPort}].remote.String()
	} else {
		hr.To = j.nodes[p[h+1].node].name
	}
	return hr
}
