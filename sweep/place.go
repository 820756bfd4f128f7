package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/process"
)

// recorderRing is the ring buffer every step's record gets unless
// --record-flag says otherwise: 4 × record's default. With the recorder
// at normal priority beside a load at 300 000 msg/s a 16 MiB ring (the
// default then; 8 MiB now) still overflowed in bursts (15 499 events, 346 646 markers lost
// on nats-server); 64 MiB lost none up to its knee (~500 000 msg/s).
const recorderRing = 64 << 20

// recorderFlags are the flags that place every step's `brokertrace
// record` so that it keeps up with the load, and the sentence sweep.json
// keeps about them. record's own defaults (SCHED_IDLE, any CPU) suit a
// recorder beside a broker on an otherwise quiet host; in a sweep the
// load generator runs flat out on the recorder's CPUs, and at SCHED_IDLE
// the recorder got almost no CPU there: its rings filled and most
// markers were lost (nats-server, 60 000 msg/s: 59 790 markers lost and
// 15 124 packets dropped; 150 000 msg/s: 956 700 markers lost). At
// normal priority the scheduler shares the CPU fairly between load and
// recorder, and no marker was lost. Flags given with --record-flag win.
func (c *Config) recorderFlags() (flags []string, why string) {
	o := c.Options
	var notes []string
	if !hasFlag(o.RecordFlags, "priority") {
		flags = append(flags, "--priority", string(process.PriorityNormal))
		notes = append(notes, "at normal priority beside the load (SCHED_IDLE starves it)")
	}
	if !hasFlag(o.RecordFlags, "ring-size") {
		flags = append(flags, "--ring-size", strconv.Itoa(recorderRing))
		notes = append(notes, fmt.Sprintf("a %d MiB ring for the load's bursts", recorderRing>>20))
	}
	if o.LoadCPUs != "" && !hasFlag(o.RecordFlags, "self-cpus") {
		cpus, where := recorderCPUs(o.BrokerCPUs, o.LoadCPUs)
		flags = append(flags, "--self-cpus", cpus)
		notes = append(notes, where)
	}
	if len(o.RecordFlags) > 0 {
		notes = append(notes, "then --record-flag "+strings.Join(o.RecordFlags, " "))
	}
	return flags, "record " + strings.Join(flags, " ") + ": " + strings.Join(notes, "; ")
}

// recorderCPUs are the CPUs for record's own threads: those of ours
// that neither the broker nor the load is pinned to, when there are any,
// so that the recorder takes CPU from neither; else the load's CPUs,
// off the broker's, whose CPU time the sweep measures.
func recorderCPUs(broker, load string) (cpus, where string) {
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		return load, "on the load's CPUs " + load
	}
	taken := map[int]bool{}
	for _, list := range []string{broker, load} {
		set, err := process.ParseCPUList(list)
		if err != nil {
			continue
		}
		for i := range 1024 {
			if set.IsSet(i) {
				taken[i] = true
			}
		}
	}
	var free []string
	for i := range 1024 {
		if mine.IsSet(i) && !taken[i] {
			free = append(free, strconv.Itoa(i))
		}
	}
	switch {
	case broker == "":
		// An attached broker may run on any CPU but the load's.
		return load, "on the load's CPUs " + load + " (the attached broker's are not pinned)"
	case len(free) == 0:
		return load, "on the load's CPUs " + load + " (no CPU is free of broker and load)"
	}
	return strings.Join(free, ","), "on CPUs " + strings.Join(free, ",") + ", free of broker and load"
}
