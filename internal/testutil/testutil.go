// Package testutil holds the helpers that brokertrace's tests share: the
// root check, the watcher for the recording's "attached" line, reading a
// whole CSV file, free loopback ports, a throwaway CA and server
// certificate, irq_work interrupts per CPU. It imports only the standard
// library and golang.org/x/sys, so that the tests of any package, down to
// the bottom layer, can use it without an import cycle.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where make test
// runs as root after installing every package the tests need.
func InCI() bool { return os.Getenv("CI") != "" }

// Skipf skips the test on a developer's machine that lacks what it needs,
// and fails it in CI: there the condition is a broken set-up, and a skip
// would hide a test that never ran. A test whose condition cannot be met on
// CI's machine calls tb.Skip itself and says why.
func Skipf(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("would skip in CI, where it must run: "+format, args...)
	}
	tb.Skipf(format, args...)
}

// RequireRoot skips the test unless it runs as root (loading eBPF
// programs, creating cgroups and network namespaces, reading other
// processes' /proc files); in CI it fails instead. why says what the test
// needs root for.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skipf(tb, "needs root: %s", why)
	}
}

// RequireTools skips the test unless every program is in $PATH; in CI it
// fails instead.
func RequireTools(tb testing.TB, programs ...string) {
	tb.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			Skipf(tb, "needs %s (make deps installs it)", p)
		}
	}
}
