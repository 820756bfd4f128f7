// Package privs names Linux capabilities, reads a thread's capability sets
// and no_new_privs, and drops capabilities on every thread of the process.
//
// A recording needs root to load and attach its probes and to open what it
// reads; once that is done it needs almost none of it. Dropping the rest
// bounds what a bug in the code that parses the broker's traffic, /proc and
// cgroup files could do with the process's privileges.
package privs

import (
	"fmt"
	"math/bits"
	"strings"
)

// Cap is a capability by its number, the bit it is in the hex masks of
// /proc/PID/status (CapEff, CapPrm, CapBnd…).
type Cap uint

// The capabilities by number, as linux/capability.h numbers them.
const (
	CAP_CHOWN Cap = iota
	CAP_DAC_OVERRIDE
	CAP_DAC_READ_SEARCH
	CAP_FOWNER
	CAP_FSETID
	CAP_KILL
	CAP_SETGID
	CAP_SETUID
	CAP_SETPCAP
	CAP_LINUX_IMMUTABLE
	CAP_NET_BIND_SERVICE
	CAP_NET_BROADCAST
	CAP_NET_ADMIN
	CAP_NET_RAW
	CAP_IPC_LOCK
	CAP_IPC_OWNER
	CAP_SYS_MODULE
	CAP_SYS_RAWIO
	CAP_SYS_CHROOT
	CAP_SYS_PTRACE
	CAP_SYS_PACCT
	CAP_SYS_ADMIN
	CAP_SYS_BOOT
	CAP_SYS_NICE
	CAP_SYS_RESOURCE
	CAP_SYS_TIME
	CAP_SYS_TTY_CONFIG
	CAP_MKNOD
	CAP_LEASE
	CAP_AUDIT_WRITE
	CAP_AUDIT_CONTROL
	CAP_SETFCAP
	CAP_MAC_OVERRIDE
	CAP_MAC_ADMIN
	CAP_SYSLOG
	CAP_WAKE_ALARM
	CAP_BLOCK_SUSPEND
	CAP_AUDIT_READ
	CAP_PERFMON
	CAP_BPF
	CAP_CHECKPOINT_RESTORE
)

var names = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// String is the capability's name; one newer than this package knows is
// "CAP_" and its number, as capsh prints it.
func (c Cap) String() string {
	if int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("CAP_%d", uint(c))
}

// Parse returns the capability named name ("CAP_BPF", or "bpf").
func Parse(name string) (Cap, error) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	for i, s := range names {
		if s == n {
			return Cap(i), nil
		}
	}
	return 0, fmt.Errorf("unknown capability %q", name)
}

// Set is a set of capabilities as a mask: bit c is capability c, as in
// /proc/PID/status.
type Set uint64

// SetOf is the set of caps.
func SetOf(caps ...Cap) Set {
	var s Set
	for _, c := range caps {
		s |= 1 << c
	}
	return s
}

// Has says whether c is in s.
func (s Set) Has(c Cap) bool { return c < 64 && s&(1<<c) != 0 }

// Caps lists the capabilities in s, lowest number first.
func (s Set) Caps() []Cap {
	caps := make([]Cap, 0, bits.OnesCount64(uint64(s)))
	for m := uint64(s); m != 0; m &= m - 1 {
		caps = append(caps, Cap(bits.TrailingZeros64(m)))
	}
	return caps
}

// Names lists the names of the capabilities in s, lowest number first;
// never nil, so that an empty set is [] in JSON.
func (s Set) Names() []string {
	out := []string{}
	for _, c := range s.Caps() {
		out = append(out, c.String())
	}
	return out
}

// String is the set as /proc/PID/status prints it: 16 hex digits.
func (s Set) String() string { return fmt.Sprintf("%016x", uint64(s)) }
