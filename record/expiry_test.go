package record

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/process"
)

// TestIDExpiry records a relay (a real process) that echoes some messages
// at once, holds some past the id TTL and drops others, and checks the
// matcher's counts exactly. With --id-ttl 600ms an id is forgotten at the
// first event 600 ms after it was read and a copy is late until 1.2 s: the
// held copies, written 0.9 s after the read, are late, every one; the
// dropped ones, followed 1.5 s later by more traffic, expired.
func TestIDExpiry(t *testing.T) {
	testutil.RequireRoot(t, "loads eBPF programs")
	testutil.RequireTools(t, "python3")
	relay := exec.Command("python3", "testdata/holdrelay.py", "0.9")
	stdout, _ := relay.StdoutPipe()
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Process.Kill(); relay.Wait() })
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	proc, err := process.ByPID(relay.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecordingOf(t, proc, Config{Out: t.TempDir(), IDTTL: 600 * time.Millisecond})
	c, err := net.Dial("tcp", "127.0.0.1:"+strings.TrimSpace(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := uint64(0x5eed0000)
	send := func(cmd byte, n int) {
		body := make([]byte, 0, n*64)
		for range n {
			m := make([]byte, 64)
			marker.Put(m[8:], id)
			id++
			body = append(body, m...)
		}
		frame := append([]byte{cmd, 0, 0, 0, 0}, body...)
		binary.BigEndian.PutUint32(frame[1:], uint32(len(body)))
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if cmd != 'D' {
			if _, err := io.ReadFull(c, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	send('E', 100)
	send('L', 30)
	send('D', 20)
	time.Sleep(1500 * time.Millisecond)
	send('E', 50)
	res, msgs := rec.stop(t)
	got := res.Meta.Messages
	if got.Messages != 200 || got.Copies != 150 || len(msgs) != 150 || got.LateOut != 30 || got.Expired != 20 ||
		got.InWithoutOut != 0 || got.OutWithoutIn != 0 || got.DuplicateIn != 0 {
		t.Fatalf("counts %+v, %d rows; want 200 read, 150 rows, 30 late, 20 expired", got, len(msgs))
	}
	if !hasWarning(res.Meta.Warnings, "20 messages were read and had no copy written within --id-ttl") ||
		!hasWarning(res.Meta.Warnings, "30 copies were written after their id expired") {
		t.Fatalf("warnings %q", res.Meta.Warnings)
	}
}

// startRecordingOf starts Run with cfg on proc and waits until it attached.
func startRecordingOf(t *testing.T, proc *process.Process, cfg Config) *recording {
	t.Helper()
	r := &recording{dir: cfg.Out, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	live := testutil.NewAttachedWatcher()
	cfg.Target, cfg.SelectedBy, cfg.Live, cfg.LiveInterval = proc, "pid", live, 200*time.Millisecond
	// Dropping would be for the whole test process and for good.
	cfg.KeepPrivileges = true
	go func() {
		defer close(r.done)
		r.res, r.err = Run(ctx, cfg)
	}()
	select {
	case <-live.Seen():
	case <-r.done:
		t.Fatalf("recording ended before attaching: %v", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no attached line within 30s")
	}
	return r
}

func hasWarning(ws []string, prefix string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}
