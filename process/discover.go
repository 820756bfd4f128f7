package process

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Protocols maps the TCP ports brokers listen on by default to the protocol
// spoken there: the protocols `brokertrace load` speaks, and Kafka's. A
// process listening on one of them is a broker candidate whatever its name.
var Protocols = map[uint16]string{
	4222:  "nats",
	1883:  "mqtt",
	5672:  "amqp",
	61613: "stomp",
	61616: "openwire",
	6379:  "redis",
	9092:  "kafka",
}

// brokerNames maps a process's comm (or argv[0] or executable basename) to
// the kind of broker it is, for brokers with a binary of their own.
var brokerNames = map[string]string{
	"nats-server":   "nats",
	"gnatsd":        "nats",
	"mosquitto":     "mosquitto",
	"redis-server":  "redis",
	"valkey-server": "redis",
	"keydb-server":  "redis",
	"emqx":          "emqx",
	"vernemq":       "vernemq",
}

// runtimeKinds names the brokers that run on a shared runtime (a JVM, the
// Erlang VM), told apart by a word of their command line.
var runtimeKinds = map[string][]struct{ word, kind string }{
	"java":     {{"activemq", "activemq"}, {"artemis", "artemis"}, {"kafka", "kafka"}, {"pulsar", "pulsar"}},
	"beam.smp": {{"rabbit", "rabbitmq"}, {"emqx", "emqx"}, {"vernemq", "vernemq"}},
}

// Broker is a message broker found running on the host.
type Broker struct {
	*Process
	// NSPID is the pid inside the broker's own pid namespace (the last
	// field of NSpid in /proc/PID/status); it equals PID on the host.
	NSPID int
	Kind  string // "nats", "redis", "activemq"…; the protocol when found by port only
	// ByPort says it was found by a protocol port, not by its name.
	ByPort bool
	// Listeners are the TCP sockets it listens on, read in its own network
	// namespace.
	Listeners []Listener
	// NetNS and PIDNS are the inodes of its network and pid namespaces;
	// HostNet and HostPID say whether they are the caller's (the host's,
	// for brokertrace run on the host).
	NetNS, PIDNS     uint64
	HostNet, HostPID bool
	// Cgroup is its cgroup v2 path; Container the container id found in
	// that path ("" outside a container), ContainerName the name its
	// runtime (Runtime: podman or docker) gave it, where that is known.
	Cgroup        string
	Container     string
	ContainerName string
	Runtime       string
}

// Ports returns the protocol ports among b's listeners, "4222/nats", and
// the other ports as plain numbers.
func (b *Broker) Ports() []string {
	var out []string
	for _, p := range Ports(b.Listeners) {
		if proto, ok := Protocols[p]; ok {
			out = append(out, fmt.Sprintf("%d/%s", p, proto))
		} else {
			out = append(out, strconv.Itoa(int(p)))
		}
	}
	return out
}

// ProtocolPort returns the first listener port whose protocol is known,
// with the protocol, for a `brokertrace load --url`; ok is false if none.
func (b *Broker) ProtocolPort() (port uint16, proto string, ok bool) {
	for _, p := range Ports(b.Listeners) {
		if proto, ok := Protocols[p]; ok {
			return p, proto, true
		}
	}
	return 0, "", false
}

// Where says in which namespaces and container b runs, for a listing:
// "host" or "netns 4026532290, pidns 4026532291 (pid 1 inside), container 3f2a…".
func (b *Broker) Where() string {
	var parts []string
	if !b.HostNet {
		parts = append(parts, fmt.Sprintf("netns %d", b.NetNS))
	}
	if !b.HostPID {
		parts = append(parts, fmt.Sprintf("pidns %d (pid %d inside)", b.PIDNS, b.NSPID))
	}
	switch {
	case b.ContainerName != "":
		parts = append(parts, fmt.Sprintf("%s container %s (%s)", b.Runtime, b.ContainerName, b.Container[:min(12, len(b.Container))]))
	case b.Container != "":
		parts = append(parts, "container "+b.Container[:min(12, len(b.Container))])
	}
	if len(parts) == 0 {
		return "host"
	}
	return strings.Join(parts, ", ")
}

// Discover lists the brokers running on the host, sorted by pid: the
// processes named like a broker, and those holding a listening TCP socket
// on a port of Protocols, in any network namespace — a broker in a
// container is found by its name or its port in its own namespace. Run as
// root: other users' descriptors and namespaces are unreadable otherwise,
// and their brokers are missed.
//
// A socket held by several processes (workers forked after binding) is
// given to the lowest pid, the one that created it; a process whose
// listening sockets all belong to a listed broker is left out.
func Discover() ([]Broker, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	procs, err := fs.AllProcs() // sorted by pid
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	hostNet, _ := NetNSInode("/proc/self/ns/net")
	hostPID, _ := NetNSInode("/proc/self/ns/pid")
	nsPorts := map[uint64]map[uint64]bool{} // netns → inodes of protocol-port listeners
	claimed := map[uint64]bool{}            // listening socket inodes already given to a broker
	self := os.Getpid()
	var found []Broker
	for _, pr := range procs {
		if pr.PID == self {
			continue
		}
		b, ok := discoverOne(fs, pr.PID, nsPorts, claimed)
		if !ok {
			continue
		}
		b.HostNet, b.HostPID = b.NetNS == hostNet, b.PIDNS == hostPID
		found = append(found, b)
	}
	return found, nil
}

// discoverOne returns pid as a broker if it is one. nsPorts caches, per
// network namespace, the inodes of sockets listening on protocol ports, so
// each namespace's tables are read once; only processes named like brokers
// or in a namespace with such a socket get their descriptors read.
func discoverOne(fs procfs.FS, pid int, nsPorts map[uint64]map[uint64]bool, claimed map[uint64]bool) (Broker, bool) {
	netns, err := NetNSInode(NetNSPath(pid))
	if err != nil {
		return Broker{}, false // exited, or a kernel thread's namespace is unreadable
	}
	protoSocks, seen := nsPorts[netns]
	if !seen {
		protoSocks = map[uint64]bool{}
		socks, _ := listening(pid)
		for _, s := range socks {
			if _, ok := Protocols[s.Port]; ok {
				protoSocks[s.inode] = true
			}
		}
		nsPorts[netns] = protoSocks
	}
	p, err := load(fs, pid)
	if err != nil {
		return Broker{}, false
	}
	kind := brokerKind(p)
	if kind == "" && len(protoSocks) == 0 {
		return Broker{}, false
	}
	held, err := socketInodes(pid)
	if err != nil {
		return Broker{}, false
	}
	socks, _ := listening(pid)
	b := Broker{Process: p, Kind: kind, NetNS: netns}
	inherited := false
	for _, s := range socks {
		switch {
		case held[s.inode] && !claimed[s.inode]:
			b.Listeners = append(b.Listeners, s.Listener)
		case held[s.inode]:
			inherited = true
		}
	}
	if inherited && len(b.Listeners) == 0 {
		// A child of a broker already listed (a fork for a snapshot, a
		// worker): only its parent is the broker.
		return Broker{}, false
	}
	if kind == "" {
		_, proto, ok := b.ProtocolPort()
		if !ok {
			return Broker{}, false
		}
		b.Kind, b.ByPort = proto, true
	}
	for _, s := range socks {
		if held[s.inode] {
			claimed[s.inode] = true
		}
	}
	slices.SortFunc(b.Listeners, func(x, y Listener) int {
		return cmp.Or(cmp.Compare(x.Port, y.Port), strings.Compare(x.IP.String(), y.IP.String()))
	})
	b.NSPID = nsPID(pid)
	b.PIDNS, _ = NetNSInode(fmt.Sprintf("/proc/%d/ns/pid", pid))
	b.Cgroup, b.Container = Cgroup(pid)
	b.ContainerName, b.Runtime = ContainerName(b.Container)
	return b, true
}

// Kind returns the kind of broker p is by its names ("nats", "mosquitto",
// "redis", "activemq"…), or "" for none known.
func Kind(p *Process) string { return brokerKind(p) }

// brokerKind returns the kind of broker p is by its names, or "".
func brokerKind(p *Process) string {
	names := []string{p.Comm, filepath.Base(strings.TrimSuffix(p.Exe, " (deleted)"))}
	if len(p.Cmdline) > 0 {
		names = append(names, filepath.Base(p.Cmdline[0]))
	}
	cmdline := strings.ToLower(strings.Join(p.Cmdline, " "))
	for _, n := range names {
		if k, ok := brokerNames[n]; ok {
			return k
		}
		for _, rk := range runtimeKinds[n] {
			if strings.Contains(cmdline, rk.word) {
				return rk.kind
			}
		}
	}
	return ""
}

// nsPID returns pid's pid in its innermost pid namespace, from the NSpid
// line of /proc/PID/status; pid itself if there is none.
func nsPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				return n
			}
		}
	}
	return pid
}

// containerID matches the 64-hex-digit ids container runtimes put in the
// cgroup paths of containers: docker-ID.scope, cri-containerd-ID.scope,
// libpod-ID.scope, /docker/ID, /kubepods/…/ID.
var containerID = regexp.MustCompile(`[0-9a-f]{64}`)

// Cgroup returns pid's cgroup v2 path ("0::PATH" in /proc/PID/cgroup) and
// the container id in it, the innermost when nested; "" for what cannot
// be read or is not there.
func Cgroup(pid int) (path, container string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
		}
	}
	return path, containerOf(path)
}

// containerOf returns the container id in a cgroup path, the innermost one
// when nested, or "".
func containerOf(path string) string {
	ids := containerID.FindAllString(path, -1)
	if len(ids) == 0 {
		return ""
	}
	return ids[len(ids)-1]
}
