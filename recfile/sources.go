package recfile

import "strings"

// The files the sources beside the socket probe write into a recording,
// one row type each (see table.go for how a row type declares its file).
// Times are CLOCK_MONOTONIC ns; a window is [t_start_ns, t_end_ns); an
// empty field is a value that cannot be known (a ratio without messages, a
// counter that could not be read).

// File names of the sources' files.
const (
	SchedFile     = "sched.csv"
	ThreadsFile   = "threads.csv"
	CPUFile       = "cpu.csv"
	CPUPerMsgFile = "cpu_per_msg.csv"
	CPUCoresFile  = "cpu_cores.csv"
	PacketsFile   = "packets.csv"
	NetFile       = "net.csv"
	GSOFile       = "gso.csv"
)

// SchedRow is one window of sched.csv: the target's context switches by
// both definitions (out of its threads; on the CPUs of its affinity mask)
// and its on-CPU time, per message entering the broker.
type SchedRow struct {
	TStart             int64   `csv:"t_start_ns"`
	TEnd               int64   `csv:"t_end_ns"`
	MsgsIn             int     `csv:"msgs_in"`
	MsgsOut            int     `csv:"msgs_out"`
	Voluntary          uint64  `csv:"switches_voluntary"`
	Involuntary        uint64  `csv:"switches_involuntary"`
	SwitchesTarget     uint64  `csv:"switches_target"`
	SwitchesCPUs       uint64  `csv:"switches_cpus"`
	SwitchesPerMsg     float64 `csv:"switches_per_msg_target" prec:"3"`
	SwitchesPerMsgCPUs float64 `csv:"switches_per_msg_cpus" prec:"3"`
	OnCPUNs            uint64  `csv:"oncpu_ns"`
	OnCPUNsPerMsg      float64 `csv:"oncpu_ns_per_msg" prec:"3"`
}

// ThreadRow is one thread of the target in threads.csv, over the whole
// recording, with the distribution of its CPU per message over windows.
type ThreadRow struct {
	TID            int     `csv:"tid"`
	Comm           string  `csv:"comm"`
	Voluntary      uint64  `csv:"switches_voluntary"`
	Involuntary    uint64  `csv:"switches_involuntary"`
	OnCPUNs        uint64  `csv:"oncpu_ns"`
	CPUNs          uint64  `csv:"cpu_ns"`
	RunqWaitNs     uint64  `csv:"runq_wait_ns"`
	MessagesRead   int     `csv:"messages_read"`
	MessagesWrit   int     `csv:"messages_written"`
	CPUNsPerMsg    float64 `csv:"cpu_ns_per_msg" prec:"3"`
	CPUNsPerMsgP50 *int64  `csv:"cpu_ns_per_msg_p50"`
	CPUNsPerMsgP90 *int64  `csv:"cpu_ns_per_msg_p90"`
	CPUNsPerMsgP99 *int64  `csv:"cpu_ns_per_msg_p99"`
	Windows        int64   `csv:"windows"`
}

// CPURow is one window of cpu.csv: the broker's and the system's CPU
// utilisation (CPU seconds per second; 1.0 is one CPU busy).
//
// The system's busy time comes two ways. System, SystemIRQ, SystemSoftIRQ
// and SystemMinusBroker are /proc/stat's, which charges each scheduler
// tick wholly to what the CPU was doing at that instant: tick-sampled, a
// cross-check only (a broker that wakes between ticks can be 14 times
// busier than /proc/stat says). SystemExact and SystemMinusBrokerExact are
// wall time minus the CPUs' idle-state residency (cpuidle), exact to
// microseconds over any span of windows; they are empty where the host has
// no cpuidle driver (meta.json says why). What is calibrated or judged
// uses the exact columns.
type CPURow struct {
	TStart            int64   `csv:"t_start_ns"`
	TEnd              int64   `csv:"t_end_ns"`
	MsgsIn            int     `csv:"msgs_in"`
	MsgsOut           int     `csv:"msgs_out"`
	BrokerCgroup      float64 `csv:"broker_cgroup_util" prec:"6"`
	BrokerProc        float64 `csv:"broker_proc_util" prec:"6"`
	BrokerUser        float64 `csv:"broker_user_util" prec:"6"`
	BrokerSys         float64 `csv:"broker_sys_util" prec:"6"`
	System            float64 `csv:"system_util" prec:"6"`
	SystemIRQ         float64 `csv:"system_irq_util" prec:"6"`
	SystemSoftIRQ     float64 `csv:"system_softirq_util" prec:"6"`
	SystemMinusBroker float64 `csv:"system_minus_broker_util" prec:"6"`
	CPUNsPerMsg       float64 `csv:"cpu_ns_per_msg" prec:"1"`
	SystemFrac        float64 `csv:"system_util_frac" prec:"6"`
	// Exact: Σ over CPUs of busy_exact_util, and it minus the broker.
	SystemExact            float64 `csv:"system_exact_util" prec:"6"`
	SystemMinusBrokerExact float64 `csv:"system_minus_broker_exact_util" prec:"6"`
}

// CPUPerMsgRow is one row of cpu_per_msg.csv: the broker's cumulative CPU
// U_n when the n-th message copy left at T_n, and the ZeroMQ method's
// C_n = (U_n − U_{n−k}) / (T_n − T_{n−k}).
type CPUPerMsgRow struct {
	N     int64   `csv:"n"`
	T     int64   `csv:"t_ns"`
	CPUNs int64   `csv:"cpu_ns"`
	CN    float64 `csv:"c_n" prec:"6"`
}

// CPUCoreRow is one CPU in one window of cpu_cores.csv, as shares of the
// window. Busy to Idle are /proc/stat's tick-sampled times (a cross-check,
// see CPURow); BusyExact is the window minus the CPU's cpuidle residency.
type CPUCoreRow struct {
	TStart  int64   `csv:"t_start_ns"`
	TEnd    int64   `csv:"t_end_ns"`
	CPU     int64   `csv:"cpu"`
	Busy    float64 `csv:"busy_util" prec:"6"`
	User    float64 `csv:"user_util" prec:"6"`
	Nice    float64 `csv:"nice_util" prec:"6"`
	System  float64 `csv:"system_util" prec:"6"`
	IRQ     float64 `csv:"irq_util" prec:"6"`
	SoftIRQ float64 `csv:"softirq_util" prec:"6"`
	IOWait  float64 `csv:"iowait_util" prec:"6"`
	Steal   float64 `csv:"steal_util" prec:"6"`
	Idle    float64 `csv:"idle_util" prec:"6"`
	// BusyExact is exact to microseconds, each CPU read by a thread
	// pinned to it, at the moment that thread runs — on a fully busy CPU
	// up to a scheduler slice after the row's reading — as a share of
	// the time between that thread's two readings, so a full CPU reads
	// 1 however late its reader ran. A CPU the recorder may not run on (meta.json exact_busy_remote_cpus) is read
	// from elsewhere, and one window of it can stray by the idle period in
	// progress at a reading (cpuidle counts a period when it ends); sums
	// over windows stay exact.
	BusyExact float64 `csv:"busy_exact_util" prec:"6"`
}

// PacketRow is one bar of packets.csv: how many captured TCP segments of
// one direction carried this many payload bytes.
type PacketRow struct {
	Direction    string `csv:"direction"` // "in" to the broker, "out" from it
	PayloadBytes uint64 `csv:"payload_bytes"`
	Packets      uint64 `csv:"packets"`
}

// NetRow is one window of net.csv: packets and payload bytes per message,
// each direction (ICPE'14 Fig. 10).
type NetRow struct {
	TStart         int64   `csv:"t_start_ns"`
	TEnd           int64   `csv:"t_end_ns"`
	MsgsIn         int     `csv:"msgs_in"`
	MsgsOut        int     `csv:"msgs_out"`
	PktsIn         uint64  `csv:"pkts_in"`
	PktsOut        uint64  `csv:"pkts_out"`
	BytesIn        uint64  `csv:"bytes_in"`
	BytesOut       uint64  `csv:"bytes_out"`
	PktsPerMsgIn   float64 `csv:"pkts_per_msg_in"`
	PktsPerMsgOut  float64 `csv:"pkts_per_msg_out"`
	BytesPerMsgIn  float64 `csv:"bytes_per_msg_in"`
	BytesPerMsgOut float64 `csv:"bytes_per_msg_out"`
}

// GSORow is one bar of gso.csv: skbs of one direction and interface that
// carried this many TCP segments ("64+" for the last bucket).
type GSORow struct {
	Direction string `csv:"direction"`
	Ifname    string `csv:"ifname"`
	Segs      string `csv:"segs"`
	SKBs      uint64 `csv:"skbs"`
}

// Columns the sources add to messages.csv after MessageColumns, each
// source's in its place in the table of sources. An empty field is a value
// the source could not know for that message (counted in meta.json).
const (
	// The scheduler source: switches out of the target's threads, and
	// their on-CPU time, between t_in and t_out.
	CtxswColumn = "ctxsw"
	OnCPUColumn = "oncpu_ns"
	// The socket-queue source: when the message's last byte was queued on
	// the broker's socket, and t_in − t_arrive, its wait in the socket's
	// receive queue.
	ArriveColumn    = "t_arrive_ns"
	SockqWaitColumn = "sockq_wait_ns"
)

var (
	SchedMessageColumns = []string{CtxswColumn, OnCPUColumn}
	SockqMessageColumns = []string{ArriveColumn, SockqWaitColumn}
)

// ThreadWindowsFile holds the scheduler source's CPU time of each thread of
// the target in each window: the per-stage demand distributions of a
// calibration are drawn from it (threads.csv keeps only percentiles).
const ThreadWindowsFile = "thread_windows.csv"

// ThreadWindowRow is one thread in one window of thread_windows.csv; a
// thread without CPU time in a window has no row for it.
type ThreadWindowRow struct {
	TStart int64 `csv:"t_start_ns"`
	TEnd   int64 `csv:"t_end_ns"`
	TID    int   `csv:"tid"`
	CPUNs  int64 `csv:"cpu_ns"`
	MsgsIn int   `csv:"msgs_in"`
}

// GCStintsFile lists the on-CPU stints of the target's JVM threads that do
// the work of a stop-the-world pause (GCThreadKind): a calibration tells a
// GC pause from other stalls by whether they ran during it. Only those
// threads are kept, so the file stays small beside the switch stream it is
// taken from (a few stints per pause and per safepoint).
const GCStintsFile = "gc_stints.csv"

// GCStintRow is one stint of gc_stints.csv: the thread ran on a CPU over
// [start_ns, end_ns], placed as the oncpu_ns of messages.csv is (its
// charge, ending at its switch-out).
type GCStintRow struct {
	TID   int    `csv:"tid"`
	Kind  string `csv:"kind"` // GCKindVM or GCKindWorker
	Start int64  `csv:"start_ns"`
	End   int64  `csv:"end_ns"`
}

// Kinds of GCStintRow.
const (
	GCKindVM     = "vm" // HotSpot's VM Thread: runs every safepoint operation, a serial GC's collection
	GCKindWorker = "gc" // a parallel collector's worker, busy during stop-the-world pauses
)

// gcWorkerPrefixes are the comm prefixes of HotSpot's parallel GC workers
// (comm is the first 15 bytes of the thread's name): "GC Thread#N" (G1 and
// Parallel, JDK 9+), "ParGC Thread#N", "GC task thread#N (ParallelGC)" and
// "Gang worker#N (Parallel GC Threads)" (JDK 8).
var gcWorkerPrefixes = []string{"GC Thread#", "ParGC Thread#", "GC task thread#", "Gang worker#"}

// GCThreadKind returns the kind of a JVM thread that works during
// stop-the-world pauses, by its comm, or "" for any other thread. The
// concurrent collector threads (G1 Conc#N, G1 Main Marker, G1 Refine#N,
// G1 Service, ZGC's and Shenandoah's) are left out on purpose: they run
// beside the application, so their CPU during a stall does not say the
// application was stopped.
func GCThreadKind(comm string) string {
	if comm == "VM Thread" {
		return GCKindVM
	}
	for _, p := range gcWorkerPrefixes {
		if strings.HasPrefix(comm, p) {
			return GCKindWorker
		}
	}
	return ""
}

// JVMThread is the comm of the thread every HotSpot JVM has: a target with
// one in threads.csv is a JVM.
const JVMThread = "VM Thread"
