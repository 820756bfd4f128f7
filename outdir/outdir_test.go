package outdir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// nobody is the unprivileged user the tests plant links as.
const nobody = 65534

// victim is a root-owned file outside every output directory, with the
// content the tests check is still there.
func victim(t *testing.T) (path, content string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "victim")
	content = "do not overwrite\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func checkVictim(t *testing.T, path, content string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != content {
		t.Fatalf("victim %s now holds %q (%v), want %q", path, b, err, content)
	}
}

// plant makes a symbolic link at dir/name to target, owned by nobody.
func plant(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

// TestPlantedLinksAreReplaced: a link at a file's name, at a
// subdirectory's and at a temporary name's is never written through.
func TestPlantedLinksAreReplaced(t *testing.T) {
	v, content := victim(t)
	out := t.TempDir()
	plant(t, v, filepath.Join(out, "messages.csv"))
	plant(t, filepath.Dir(v), filepath.Join(out, "plots"))
	d, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("messages.csv", []byte("t_in_ns\n"), FilePerm); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(out, "messages.csv"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o777 != 0o644 {
		t.Errorf("messages.csv: mode %o (%v), want a regular file 644", st.Mode, err)
	}
	if _, err := d.Create("plots/latency.svg", FilePerm); !errors.Is(err, ErrUnsafe) {
		t.Errorf("create through the link plots: %v, want ErrUnsafe", err)
	}
	if _, err := d.Sub("plots/more"); !errors.Is(err, ErrUnsafe) {
		t.Errorf("subdirectory through the link plots: %v, want ErrUnsafe", err)
	}
	if _, err := d.Create("../escape", FilePerm); !errors.Is(err, ErrUnsafe) {
		t.Errorf("create ../escape: %v, want ErrUnsafe", err)
	}
	checkVictim(t, v, content)
	if ents, _ := os.ReadDir(filepath.Dir(v)); len(ents) != 1 {
		t.Errorf("the victim's directory holds %d entries, want 1", len(ents))
	}
}

// TestRefusedDirectories: the output directory itself a link, owned by
// another user, or writable by others is refused, and nothing is created
// in it or through it.
func TestRefusedDirectories(t *testing.T) {
	v, _ := victim(t)
	base := t.TempDir()
	link := filepath.Join(base, "link")
	plant(t, filepath.Dir(v), link)
	theirs := filepath.Join(base, "theirs")
	open := filepath.Join(base, "open")
	sticky := filepath.Join(base, "sticky")
	for p, mode := range map[string]os.FileMode{theirs: 0o755, open: 0o777, sticky: 0o777 | os.ModeSticky} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	os.Chown(theirs, nobody, nobody)
	for _, p := range []string{link, theirs, open, sticky, filepath.Join(link, "sub")} {
		if _, err := Open(p); !errors.Is(err, ErrUnsafe) {
			t.Errorf("Open(%s): %v, want ErrUnsafe", p, err)
		} else {
			t.Logf("Open(%s): %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(v)); len(ents) != 1 {
		t.Errorf("the victim's directory holds %d entries, want 1", len(ents))
	}
	// A single file may go into a sticky directory such as /tmp, by
	// rename over a planted link.
	plant(t, v, filepath.Join(sticky, "cap.pcapng"))
	f, err := CreateFile(filepath.Join(sticky, "cap.pcapng"), FilePerm)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("capture")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(sticky, "cap.pcapng")); string(b) != "capture" {
		t.Errorf("cap.pcapng holds %q", b)
	}
	if _, err := CreateFile(filepath.Join(open, "cap.pcapng"), FilePerm); !errors.Is(err, ErrUnsafe) {
		t.Errorf("CreateFile in a world-writable, non-sticky directory: %v, want ErrUnsafe", err)
	}
}

// TestRootOwnedLinkFollowed: a link owned by root on the way to the
// directory is followed, as /var/run is; it is refused as the last
// component.
func TestRootOwnedLinkFollowed(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o755)
	os.Symlink("real", filepath.Join(base, "via"))
	d, err := Open(filepath.Join(base, "via", "rec", "ding"))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if st, err := os.Stat(filepath.Join(real, "rec", "ding")); err != nil || !st.IsDir() || st.Mode().Perm() != DirPerm {
		t.Errorf("real/rec/ding: %v %v", st, err)
	}
	if _, err := Open(filepath.Join(base, "via")); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Open of the link itself: %v, want ErrUnsafe", err)
	}
}

// TestRemoveAllStaysInside: a link inside a directory being removed is
// removed itself; what it points to is left alone.
func TestRemoveAllStaysInside(t *testing.T) {
	v, content := victim(t)
	out := t.TempDir()
	os.MkdirAll(filepath.Join(out, "step", "deep"), 0o755)
	os.WriteFile(filepath.Join(out, "step", "deep", "f"), nil, 0o644)
	plant(t, filepath.Dir(v), filepath.Join(out, "step", "deep", "dir"))
	plant(t, v, filepath.Join(out, "step", "file"))
	d, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.RemoveAll("step"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(out, "step")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("step still there: %v", err)
	}
	checkVictim(t, v, content)
	if err := d.RemoveAll("missing/too"); err != nil {
		t.Errorf("RemoveAll of a missing path: %v", err)
	}
}

// TestAsInvoker: under sudo the files are the invoker's, and made with
// their rights only: a directory only root may write to is refused. In a
// child, since the invoker is read once per process.
func TestAsInvoker(t *testing.T) {
	if os.Getenv("OUTDIR_CHILD") != "" {
		asInvokerChild()
		return
	}
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755) // the invoker must reach it
	os.Chmod(base, 0o755)
	mine := filepath.Join(base, "mine")
	os.Mkdir(mine, 0o755)
	os.Chown(mine, nobody, nobody)
	v, content := victim(t)
	plant(t, v, filepath.Join(mine, "cpu.csv"))
	rootOnly := filepath.Join(base, "root-only")
	os.Mkdir(rootOnly, 0o755)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAsInvoker$")
	cmd.Env = append(os.Environ(), "OUTDIR_CHILD="+mine+":"+rootOnly,
		"SUDO_UID="+strconv.Itoa(nobody), "SUDO_GID="+strconv.Itoa(nobody))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child: %s", strings.TrimSpace(string(out)))
	checkVictim(t, v, content)
	for _, p := range []string{filepath.Join(mine, "cpu.csv"), filepath.Join(mine, "new"), filepath.Join(mine, "new", "f")} {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != nobody || s.Gid != nobody {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, s.Uid, s.Gid, nobody, nobody)
		}
	}
	if _, err := os.Stat(filepath.Join(rootOnly, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("root-only/x was created as the invoker: %v", err)
	}
}

func asInvokerChild() {
	mine, rootOnly, _ := strings.Cut(os.Getenv("OUTDIR_CHILD"), ":")
	d, err := Open(mine)
	if err != nil {
		panic(err)
	}
	if err := d.WriteFile("cpu.csv", []byte("x\n"), FilePerm); err != nil {
		panic(err)
	}
	if err := d.WriteFile("new/f", []byte("x\n"), FilePerm); err != nil {
		panic(err)
	}
	_, err = Open(filepath.Join(rootOnly, "x"))
	if !errors.Is(err, os.ErrPermission) {
		panic("root-only/x: " + errString(err) + ", want permission denied")
	}
	println("as the invoker:", err.Error())
	// An existing directory they may not write to fails at Open, before
	// anything is measured, not at the first file.
	if _, err := Open(rootOnly); !errors.Is(err, os.ErrPermission) {
		panic("root-only: " + errString(err) + ", want permission denied")
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestStreamNamedAtOnce: a streamed file has its name while it is
// written, replacing a planted link by rename; Create's only at Close.
func TestStreamNamedAtOnce(t *testing.T) {
	v, content := victim(t)
	out := t.TempDir()
	plant(t, v, filepath.Join(out, "sched.csv"))
	plant(t, v, filepath.Join(out, "meta.json"))
	d, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.Stream("sched.csv", FilePerm)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Create("meta.json", FilePerm)
	if err != nil {
		t.Fatal(err)
	}
	s.WriteString("row\n")
	c.WriteString("{}\n")
	if b, err := os.ReadFile(filepath.Join(out, "sched.csv")); err != nil || string(b) != "row\n" {
		t.Errorf("sched.csv while written: %q %v", b, err)
	}
	if st, err := os.Lstat(filepath.Join(out, "meta.json")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("meta.json before Close: %v %v, want the planted link still", st, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "meta.json")); err != nil || string(b) != "{}\n" {
		t.Errorf("meta.json: %q %v", b, err)
	}
	checkVictim(t, v, content)
	if ents, _ := os.ReadDir(out); len(ents) != 2 {
		t.Errorf("%d entries in the directory, want 2 (no temporary file left)", len(ents))
	}
}
