package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLineWatcher(t *testing.T) {
	w := NewAttachedWatcher()
	fmt.Fprint(w, "brokertrace: starting\n")
	select {
	case <-w.Seen():
		t.Fatal("seen before the attached line")
	default:
	}
	fmt.Fprint(w, "x\nbrokertrace: attached to pid 1\n")
	fmt.Fprint(w, "brokertrace: attached again\n") // closes nothing twice
	<-w.Seen()
	want := []string{"brokertrace: starting", "x", "brokertrace: attached to pid 1", "brokertrace: attached again"}
	if !slices.Equal(w.Lines(), want) {
		t.Fatalf("lines %q, want %q", w.Lines(), want)
	}
}

func TestReadCSVMaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.csv")
	if err := os.WriteFile(path, []byte("a,b\n1,\"x,y\"\n2,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := ReadCSVMaps(t, path)
	if len(rows) != 2 || rows[0]["b"] != "x,y" || rows[1]["a"] != "2" || rows[1]["b"] != "" {
		t.Fatalf("rows %v", rows)
	}
}

func TestPorts(t *testing.T) {
	p := FreePort(t, "127.0.0.1")
	if p <= 0 || PortOf(t, fmt.Sprintf("127.0.0.1:%d", p)) != p {
		t.Fatalf("port %d", p)
	}
}
