package probes

import (
	"errors"
	"strings"
	"testing"
)

func TestNoBTF(t *testing.T) {
	err := checkBTF("/nonexistent/vmlinux")
	if !errors.Is(err, ErrKernel) || !strings.Contains(err.Error(), "CONFIG_DEBUG_INFO_BTF") {
		t.Fatalf("%v", err)
	}
	if err := checkBTF(vmlinuxBTF); err != nil {
		t.Fatalf("this machine has BTF: %v", err)
	}
}

func TestHasTracepoint(t *testing.T) {
	// Linux 6.18 here: the sock length tracepoints exist; a made-up one does not.
	if !HasTracepoint("sched_switch") || HasTracepoint("no_such_tracepoint_xyz") {
		t.Fatal("HasTracepoint disagrees with the kernel's BTF")
	}
}
