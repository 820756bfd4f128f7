package record

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/recfile"
)

// TestEndDuration: a recording with a duration ends by itself after it,
// says so, and holds every message sent during it.
func TestEndDuration(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	srv := testbroker.StartNATS(t)
	const d = 1500 * time.Millisecond
	rec := startRecordingConfig(t, srv, Config{Out: t.TempDir(), Path: sockio.PathAuto, Duration: d})
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.duration", Rate: 1000, Count: 300})
	if err != nil || lr.Received != 300 {
		t.Fatalf("load: %v, %d of 300 received", err, lr.Received)
	}
	select {
	case <-rec.done:
	case <-time.After(d + 10*time.Second):
		t.Fatal("the recording did not end after its duration")
	}
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	m := rec.res.Meta
	if m.EndReason != "duration" || m.EndNs-m.StartNs < int64(d) || m.EndNs-m.StartNs > int64(d+2*time.Second) {
		t.Fatalf("end reason %q after %v, want duration after %v", m.EndReason, time.Duration(m.EndNs-m.StartNs), d)
	}
	msgs, err := recfile.ReadMessages(filepath.Join(rec.dir, recfile.MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, row := range msgs {
		ids = append(ids, row.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, lr.SentIDs()) || m.Rows != 300 {
		t.Fatalf("%d rows (meta %d), want the 300 ids sent", len(ids), m.Rows)
	}
}

// TestOutputFull: messages.csv on a file system that fills up. The
// recording goes on, then ends with an error wrapping ErrOutput that names
// messages.csv, and meta.json (written once room was made) says so.
func TestOutputFull(t *testing.T) {
	testutil.RequireRoot(t, "mounts a tmpfs and loads eBPF programs")
	srv := testbroker.StartNATS(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=128k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rec")
	rec := startRecordingConfig(t, srv, Config{Out: out, Path: sockio.PathAuto})
	// 4000 rows of about 110 bytes: the writer's first 256 KiB flush
	// cannot fit in the 64 KiB left.
	lr, err := load.Run(context.Background(), load.Config{URL: srv.URL(), Subject: "bt.full", Rate: 8000, Count: 4000})
	if err != nil || lr.Received != 4000 {
		t.Fatalf("load: %v, %d of 4000 received", err, lr.Received)
	}
	waitFull(t, dir)
	os.Remove(filler) // room for meta.json
	rec.cancel()
	<-rec.done
	if !errors.Is(rec.err, ErrOutput) || !strings.Contains(rec.err.Error(), "messages.csv") || rec.res == nil {
		t.Fatalf("Run: %v (result %v), want ErrOutput for messages.csv with a result", rec.err, rec.res != nil)
	}
	var meta recfile.Meta
	if err := recfile.ReadJSON(out, recfile.MetaFile, &meta); err != nil {
		t.Fatalf("meta.json: %v", err)
	}
	warned := slices.ContainsFunc(meta.Warnings, func(w string) bool { return strings.Contains(w, "writing messages.csv failed") })
	if !warned || meta.EndReason != "signal" {
		t.Fatalf("meta.json end reason %q, warnings %q", meta.EndReason, meta.Warnings)
	}
}

// waitFull waits until the file system at dir has no free block left.
func waitFull(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Bfree == 0 {
			return
		}
	}
	t.Fatal("the recording never filled its file system")
}
