package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/recfile"
)

// sudoUser is the user the tests run brokertrace "under sudo" for
// (SUDO_UID and SUDO_GID) and plant links as: nobody.
const sudoUser = 65534

// precious is what every victim holds, before and after.
const precious = "precious: brokertrace must not write here\n"

// writerCase is a command that writes files: its arguments for an output
// directory out and a directory aux for its single files (sticky and
// world-writable, as /tmp).
type writerCase struct {
	name string
	args func(e *secEnv, out, aux string) []string
}

// secEnv is what the commands work on: a broker, and the outputs of the
// commands run before (a sweep for calibrate, a calibration for export).
type secEnv struct {
	t     *testing.T
	nats  *testbroker.NATS
	clean map[string]string // case name → its clean run's output
}

func (e *secEnv) port() string { return strconv.Itoa(testutil.PortOf(e.t, e.nats.Addr)) }

// writers are every command that writes files, in an order where each
// finds the outputs it reads.
var writers = []writerCase{
	{"record", func(e *secEnv, out, aux string) []string {
		return []string{"record", "--pid", strconv.Itoa(e.nats.PID()), "--duration", "1s", "--quiet", "--out", out,
			"--pcap", filepath.Join(aux, "cap.pcapng"), "--perfetto", filepath.Join(aux, "trace.pftrace"),
			"--cpuprofile", filepath.Join(aux, "cpu.pprof")}
	}},
	{"record-parquet", func(e *secEnv, out, _ string) []string {
		return []string{"record", "--pid", strconv.Itoa(e.nats.PID()), "--duration", "1s", "--quiet", "--format", "parquet", "--out", out}
	}},
	{"bare", func(e *secEnv, out, _ string) []string {
		return []string{"--pid", strconv.Itoa(e.nats.PID()), "--duration", "1s", "--quiet", "--out", out}
	}},
	{"run", func(e *secEnv, out, _ string) []string {
		return []string{"run", "--duration", "1s", "--quiet", "--out", out, "--", testbroker.NATSServerBin,
			"-a", "127.0.0.1", "-p", strconv.Itoa(testutil.FreePort(e.t, "127.0.0.1"))}
	}},
	{"load", func(e *secEnv, out, _ string) []string {
		return []string{"load", "--url", e.nats.URL(), "--count", "200", "--rate", "2000", "--out", out}
	}},
	{"report", func(e *secEnv, out, _ string) []string {
		return []string{"report", e.clean["record"], "--out", out}
	}},
	{"sweep", func(e *secEnv, out, _ string) []string {
		return []string{"sweep", "--port", e.port(), "--url", e.nats.URL(), "--rates", "200,400", "--step", "1s",
			"--warmup", "200ms", "--cooldown", "200ms", "--drain", "1s", "--idle", "1s", "--restart", "--out", out}
	}},
	{"calibrate", func(e *secEnv, out, _ string) []string {
		return []string{"calibrate", e.clean["sweep"], "--allow-unsaturated", "--out", filepath.Join(out, recfile.CalibrationFile)}
	}},
	{"export", func(e *secEnv, out, _ string) []string {
		return []string{"export", e.clean["calibrate"], "--out", out}
	}},
	{"predict", func(e *secEnv, out, _ string) []string {
		return []string{"predict", e.clean["calibrate"], "--messages", "2000", "--warmup", "100", "--out", out}
	}},
	{"platform", func(e *secEnv, out, _ string) []string {
		return []string{"platform", "--quick", "--no-perf", "--out", out, "syscall"}
	}},
	{"overhead", func(e *secEnv, out, _ string) []string {
		return []string{"overhead", "--broker", "nats", "--configs", "T,T+I+C+W+pcap", "--runs", "1", "--warmup", "100",
			"--count", "2000", "--rate", "1000", "--duration", "1s", "--latency-warmup", "200ms",
			"--cpu-rate", "1000", "--cpu-duration", "1s", "--out", out}
	}},
}

// TestNoLinkFollowed is issue 20's test: for every command that writes,
// under sudo for an unprivileged user,
//   - a clean run leaves every file and directory owned by that user,
//     directories 0755 and files 0644 (0600 for sweep.json, which holds
//     the broker's URL);
//   - a run into a directory where that user planted a symbolic link at
//     every file name the clean run wrote (and at its single files') leaves
//     every link's target as it was, and each name a regular file of its
//     own;
//   - a run whose output directory is itself such a link is refused with
//     exit code 2, and nothing appears where it points.
//
// The victims belong to the same user, so following a link would change
// them whether brokertrace wrote as root or as that user: the test fails
// on either.
func TestNoLinkFollowed(t *testing.T) {
	testutil.RequireRoot(t, "brokertrace runs as root; the test plants links as nobody")
	e := &secEnv{t: t, nats: testbroker.StartNATS(t), clean: map[string]string{}}
	root := invokerBase(t) // outlives the subtests: later ones read earlier outputs
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			base := filepath.Join(root, w.name)
			mkdirAs(t, base)
			e.clean[w.name] = checkClean(t, e, w, base)
			checkPlanted(t, e, w, base)
			checkLinkedOut(t, e, w, base)
		})
	}
}

// invokerBase is a directory the invoking user owns, reachable by them.
func invokerBase(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for d := base; d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	if err := os.Chown(base, sudoUser, sudoUser); err != nil {
		t.Fatal(err)
	}
	return base
}

// runAs runs brokertrace as root under sudo for sudoUser, and returns its
// exit code and output.
func runAs(t *testing.T, args []string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SUDO_UID="+strconv.Itoa(sudoUser), "SUDO_GID="+strconv.Itoa(sudoUser), "SUDO_USER=nobody")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("%v: %v", args, err)
	return 0, ""
}

// sticky makes a world-writable sticky directory, as /tmp.
func sticky(t *testing.T, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o777|fs.ModeSticky)
	return path
}

// checkClean runs w into a fresh directory and checks who owns what it
// wrote, and its modes; it returns the directory.
func checkClean(t *testing.T, e *secEnv, w writerCase, base string) string {
	out, aux := filepath.Join(base, "clean"), sticky(t, filepath.Join(base, "aux"))
	if code, log := runAs(t, w.args(e, out, aux)); code != 0 {
		t.Fatalf("clean run: exit %d\n%s", code, log)
	}
	files, dirs := tree(t, out)
	if len(files) < 2 {
		t.Fatalf("clean run wrote %v: too few files to check", files)
	}
	auxFiles, _ := tree(t, aux)
	t.Logf("%d files in %d directories, %d beside: %v", len(files), len(dirs), len(auxFiles), auxFiles)
	for _, rel := range append(dirs, ".") {
		checkOwned(t, filepath.Join(out, rel), fs.ModeDir|0o755)
	}
	for _, rel := range files {
		mode := fs.FileMode(0o644)
		if filepath.Base(rel) == recfile.SweepFile {
			mode = 0o600
		}
		checkOwned(t, filepath.Join(out, rel), mode)
	}
	for _, rel := range auxFiles {
		checkOwned(t, filepath.Join(aux, rel), 0o644)
	}
	return out
}

// checkOwned checks that path belongs to sudoUser with mode.
func checkOwned(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	if s.Uid != sudoUser || s.Gid != sudoUser || st.Mode() != mode {
		t.Errorf("%s: %v owned by %d:%d, want %v owned by %d:%d", path, st.Mode(), s.Uid, s.Gid, mode, sudoUser, sudoUser)
	}
}

// tree lists the files and directories below root, relative to it.
func tree(t *testing.T, root string) (files, dirs []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, dirs
}

// checkPlanted plants sudoUser's links at every name the clean run wrote,
// runs w again, and checks that no link was written through.
func checkPlanted(t *testing.T, e *secEnv, w writerCase, base string) {
	victim := victimFile(t, base)
	files, dirs := tree(t, e.clean[w.name])
	auxFiles, _ := tree(t, filepath.Join(base, "aux"))
	out, aux := filepath.Join(base, "planted"), sticky(t, filepath.Join(base, "aux2"))
	for _, rel := range append([]string{"."}, dirs...) {
		mkdirAs(t, filepath.Join(out, rel))
	}
	for _, rel := range files {
		plantLink(t, victim, filepath.Join(out, rel))
	}
	for _, rel := range auxFiles {
		plantLink(t, victim, filepath.Join(aux, rel))
	}
	if code, log := runAs(t, w.args(e, out, aux)); code != 0 {
		t.Fatalf("run over %d planted links: exit %d\n%s", len(files)+len(auxFiles), code, log)
	}
	checkVictimFile(t, victim)
	for _, p := range append(prefixed(out, files), prefixed(aux, auxFiles)...) {
		if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v (%v), want a regular file in place of the planted link", p, modeOf(st), err)
		}
	}
	if left, _ := tree(t, out); slices.ContainsFunc(left, func(f string) bool { return strings.HasPrefix(filepath.Base(f), ".") }) {
		t.Errorf("temporary files left: %v", left)
	}
}

// checkLinkedOut runs w with its output directory a link to a directory
// of sudoUser's: refused, exit 2, nothing written there.
func checkLinkedOut(t *testing.T, e *secEnv, w writerCase, base string) {
	target := filepath.Join(base, "target")
	mkdirAs(t, target)
	out := filepath.Join(base, "link")
	plantLink(t, target, out)
	aux := sticky(t, filepath.Join(base, "aux3"))
	code, log := runAs(t, w.args(e, out, aux))
	if code != 2 || !strings.Contains(log, "symbolic link") {
		t.Errorf("output directory a link: exit %d, want 2 and a line naming the link\n%s", code, log)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("%d entries written through the link into %s", len(ents), target)
	}
}

func prefixed(dir string, rels []string) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = filepath.Join(dir, r)
	}
	return out
}

// victimFile is a file of sudoUser's, outside every output directory.
func victimFile(t *testing.T, base string) string {
	t.Helper()
	dir := filepath.Join(base, "victims")
	mkdirAs(t, dir)
	p := filepath.Join(dir, "victim")
	if err := os.WriteFile(p, []byte(precious), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(p, sudoUser, sudoUser)
	return p
}

func checkVictimFile(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != precious {
		t.Errorf("victim %s now holds %d bytes (%v): written through a link", p, len(b), err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Errorf("%d entries beside the victim, want 1", len(ents))
	}
}

// mkdirAs makes dir (and missing parents) as sudoUser's.
func mkdirAs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(dir, sudoUser, sudoUser)
}

// plantLink makes path a link to target, owned by sudoUser.
func plantLink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, sudoUser, sudoUser); err != nil {
		t.Fatal(err)
	}
}

// modeOf is st's mode, or nothing for a missing file.
func modeOf(st fs.FileInfo) any {
	if st == nil {
		return "missing"
	}
	return st.Mode()
}

// TestRootRefusesSharedOut: run as root without sudo, a recording refuses
// an output directory another user owns or every user may write to (exit
// 2, one line naming the directory, nothing written there), and in its own
// directory replaces the links planted at its file names without writing
// through them: here a link's target is root's, so only not following
// keeps it.
func TestRootRefusesSharedOut(t *testing.T) {
	testutil.RequireRoot(t, "brokertrace runs as root")
	nats := testbroker.StartNATS(t)
	base := t.TempDir()
	theirs, open := filepath.Join(base, "theirs"), filepath.Join(base, "open")
	mkdirAs(t, theirs)
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o777)
	record := func(out string) (int, string) {
		cmd := exec.Command(binary, "record", "--pid", strconv.Itoa(nats.PID()), "--duration", "1s", "--quiet", "--out", out)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(s string) bool { return strings.HasPrefix(s, "SUDO_") })
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(b)
	}
	for out, why := range map[string]string{theirs: "belongs to uid 65534", open: "writable by every user"} {
		code, log := record(out)
		if ents, _ := os.ReadDir(out); code != 2 || !strings.Contains(log, why) || len(ents) != 0 {
			t.Errorf("--out %s: exit %d, %d entries written, want 2, none and %q:\n%s", out, code, len(ents), why, log)
		}
	}
	victim := filepath.Join(base, "victim")
	os.WriteFile(victim, []byte(precious), 0o600)
	mine := filepath.Join(base, "mine")
	os.Mkdir(mine, 0o755)
	names := []string{recfile.MessagesFile, recfile.MetaFile, recfile.CPUFile, recfile.SchedFile, recfile.PacketsFile}
	for _, n := range names {
		os.Symlink(victim, filepath.Join(mine, n))
	}
	if code, log := record(mine); code != 0 {
		t.Fatalf("record into its own directory: exit %d\n%s", code, log)
	}
	if b, _ := os.ReadFile(victim); string(b) != precious {
		t.Errorf("root's victim now holds %d bytes: written through a link", len(b))
	}
	for _, n := range names {
		if st, err := os.Lstat(filepath.Join(mine, n)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v (%v), want a regular file in place of the link", n, modeOf(st), err)
		}
	}
}

// TestReportRefusesLinks: report, run as root on a directory where a link
// stands at a file name, refuses to read through it and quotes nothing of
// what it points to.
func TestReportRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("id,t_intended_ns\nroot:$6$SECRET:19000:0:99999:7:::\n"), 0o600)
	writeE2E(t, dir, 100)
	os.Remove(filepath.Join(dir, recfile.E2EFile))
	os.Symlink(secret, filepath.Join(dir, recfile.E2EFile))
	stdout, stderr, code := runReport(t, dir, "--out", filepath.Join(t.TempDir(), "r"))
	if code == 0 || strings.Contains(stdout+stderr, "SECRET") || !strings.Contains(stderr, "symbolic link") {
		t.Errorf("report through a link: exit %d, want an error naming the link and quoting nothing:\n%s%s", code, stdout, stderr)
	}
}
