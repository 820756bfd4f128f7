package recfile

// The files that let recordings of several brokers be joined into one
// message's path across a cluster: each recording's connections and node
// (the peers source), and the join's hops.

// ConnectionsFile lists the target's TCP connections with their addresses:
// messages.csv names a connection by its two ports only, and a join across
// nodes needs the addresses to find the peer at the other end.
const ConnectionsFile = "connections.csv"

// ConnectionRow is one TCP connection of the target, as its network
// namespace saw it when the recording started, when a message first
// crossed it, or when the recording ended.
type ConnectionRow struct {
	LocalAddr  string `csv:"local_addr"`
	LocalPort  uint16 `csv:"local_port"`
	RemoteAddr string `csv:"remote_addr"`
	RemotePort uint16 `csv:"remote_port"`
	// Side is "accepted" when the local port is one the target listens on,
	// else "dialed": the target opened it (a route to another node).
	Side       string `csv:"side"`
	SeenStart  uint8  `csv:"seen_start"`  // 1: open when the recording started
	SeenDuring uint8  `csv:"seen_during"` // 1: looked up when the first message crossed it
	SeenEnd    uint8  `csv:"seen_end"`    // 1: open when it ended
}

// Sides of a ConnectionRow.
const (
	SideAccepted = "accepted"
	SideDialed   = "dialed"
)

// NodeMeta names the broker a recording traced within its cluster: the
// peers source's part of meta.json.
type NodeMeta struct {
	// Name is the node's name: the broker's own server name where its
	// command line gives one, else "HOST:PID".
	Name     string `json:"name"`
	NameFrom string `json:"name_from"` // "command line", "--node", or "host and pid"
	Cluster  string `json:"cluster,omitempty"`
	Host     string `json:"host"`
	// Listeners are the addresses it listens on ("IP:PORT").
	Listeners []string `json:"listeners"`
	// ClusterListen is the address it takes routes from other nodes on,
	// where its command line gives one (nats-server's --cluster).
	ClusterListen string `json:"cluster_listen,omitempty"`
	// Peers are the far ends of the connections it opened itself when the
	// recording started ("IP:PORT"): its routes to other nodes.
	Peers       []string `json:"peers"`
	Connections int      `json:"connections"` // rows of connections.csv
	// Unresolved counts connections messages crossed that had closed
	// before their addresses could be read: their rows cannot be joined.
	Unresolved int `json:"unresolved,omitempty"`
	// Missed says why a list of connections could not be read, at the
	// start or at the end (a connection open only in between is not
	// listed: its rows cannot be joined to a peer).
	Missed []string `json:"missed,omitempty"`
}

// HopsFile is the join's output: one row per hop of each delivery's path.
const HopsFile = "hops.csv"

// HopRow is one hop of one delivery: the message's passage through one
// node. A delivery is a copy that left the cluster to a client; its path
// runs from the node the message entered through the routes that carried
// it to the node that delivered it. Times are the recordings' CLOCK_MONOTONIC
// ns (on one host, one clock).
type HopRow struct {
	ID       uint64 `csv:"id"`
	Delivery uint32 `csv:"delivery"` // numbers the message's deliveries from 1, in the order of their last t_out
	Hop      uint8  `csv:"hop"`      // from 1, the node the message entered by
	Hops     uint8  `csv:"hops"`     // the path's length
	Node     string `csv:"node"`
	// From and To are the node the message came from and went to, or
	// "client:ADDR:PORT" for the connection of a client.
	From    string `csv:"from"`
	To      string `csv:"to"`
	TIn     int64  `csv:"t_in_ns"`
	TOut    int64  `csv:"t_out_ns"`
	Latency int64  `csv:"latency_ns"` // TOut − TIn on Node
	NetNs   *int64 `csv:"net_ns"`     // TIn − the previous hop's TOut: the route; empty on hop 1
	Ctxsw   *int64 `csv:"ctxsw"`      // on Node, from its messages.csv; empty where it has none
	OnCPU   *int64 `csv:"oncpu_ns"`
	Copy    uint32 `csv:"copy"` // the row's copy number in Node's messages.csv
}

// ClusterFile is the join's summary (brokertrace cluster --out DIR).
const ClusterFile = "cluster.json"

// ClusterSummary is cluster.json: which recordings were joined, how many
// deliveries have their whole path, what could not be joined and why, and
// per path (the nodes a delivery crossed, in order) the latency of each hop
// and of the route before it.
type ClusterSummary struct {
	Nodes []ClusterNode `json:"nodes"`
	// Deliveries are the copies that left a node to a client.
	Deliveries int64 `json:"deliveries"`
	// FullPaths are deliveries whose path goes back, hop by hop, to the
	// node a client published the message to.
	FullPaths int64 `json:"full_paths"`
	// Broken are deliveries whose path stops at a node that read the
	// message from another recorded node whose recording has no row that
	// wrote it there (lost, or after that recording ended).
	Broken int64 `json:"broken"`
	// Unplaced are deliveries whose path stops at a row read from a
	// connection its recording does not list (see UnknownConn).
	Unplaced int64 `json:"unplaced"`
	// FromUnrecorded are deliveries whose path starts with a read from a
	// connection the node opened itself (to a node not given to the join).
	FromUnrecorded int64 `json:"from_unrecorded"`
	// UnknownConn are rows whose connection (by its ports) is not in their
	// recording's connections.csv: opened and closed during the recording.
	// They cannot be placed and are not joined.
	UnknownConn int64 `json:"unknown_connection_rows"`
	// Ambiguous are hops for which more than one row could have been the
	// previous one (the same id written twice on one connection); the
	// first written is taken.
	Ambiguous int64 `json:"ambiguous"`
	// ToUnrecorded are copies a node wrote to a connection it opened
	// itself whose far end is not in any recording given.
	ToUnrecorded int64 `json:"to_unrecorded"`
	// Clocks: which recordings share a clock, and how the others were
	// brought to the first one's.
	Clocks []ClusterClock `json:"clocks"`
	// Rows of hops.csv.
	Rows  int64         `json:"rows"`
	Paths []ClusterPath `json:"paths"`
}

// ClusterNode is one recording of a join.
type ClusterNode struct {
	Name        string `json:"name"`
	Dir         string `json:"dir"`
	Host        string `json:"host"`
	Rows        int64  `json:"rows"`        // of its messages.csv
	Connections int    `json:"connections"` // of its connections.csv
}

// ClusterClock is one clock among the recordings joined: those of one
// boot of one host. Every time in hops.csv is on the reference clock, the
// first recording's; another host's were mapped as tRef = t − θ(tRef),
// θ(t) = OffsetNs + DriftPPM·1e-6·(t − the middle of the segments' span),
// estimated from the TCP segments both ends of a route captured
// (package clocksync).
type ClusterClock struct {
	Host      string   `json:"host"`
	BootID    string   `json:"boot_id"`
	Nodes     []string `json:"nodes"`
	Reference bool     `json:"reference"`
	// Via names the two nodes whose captures gave the estimate.
	Via             string   `json:"via,omitempty"`
	OffsetNs        float64  `json:"offset_ns"`
	DriftPPM        float64  `json:"drift_ppm"`
	UncertaintyNs   float64  `json:"uncertainty_ns"`
	SegmentsForward int      `json:"segments_forward"`
	SegmentsReverse int      `json:"segments_reverse"`
	Warnings        []string `json:"warnings,omitempty"`
}

// ClusterPath is every full path through the same nodes in the same order.
type ClusterPath struct {
	Nodes      []string `json:"nodes"`
	Deliveries int64    `json:"deliveries"`
	// Broker is the first hop's t_in to the last hop's t_out: the time in
	// the cluster.
	Broker LatencyStats      `json:"broker"`
	Hops   []ClusterHopStats `json:"hops"`
}

// ClusterHopStats are one hop's times over a path's deliveries.
type ClusterHopStats struct {
	Node    string        `json:"node"`
	Latency LatencyStats  `json:"latency"`
	Net     *LatencyStats `json:"net,omitempty"` // the route before it; absent on hop 1
	// CtxswMean and OnCPUMeanNs average the hop's ctxsw and oncpu_ns over
	// the rows that have them (absent when none has).
	CtxswMean   *float64 `json:"ctxsw_mean,omitempty"`
	OnCPUMeanNs *float64 `json:"oncpu_mean_ns,omitempty"`
}
