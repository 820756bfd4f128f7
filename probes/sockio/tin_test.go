package sockio

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/events"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/marker"
)

// relaySource reads its socket (fd 3) and logs, right after each read()
// returns, CLOCK_MONOTONIC and the bytes read: the broker's own post-read
// clock that t_in must not be after.
const relaySource = `#include <stdio.h>
#include <time.h>
#include <unistd.h>
static char buf[1 << 17];
int main(void) {
	for (;;) {
		ssize_t n = read(3, buf, sizeof buf);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (n <= 0)
			return 0;
		printf("%lld %zd\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, n);
	}
}
`

// relayRead is one read of the relay: when it returned and the stream
// offset just past its bytes.
type relayRead struct {
	t   int64
	end int
}

// startRelay builds the relay, hands it fd and returns it started.
func startRelay(t *testing.T, fd int) (*exec.Cmd, *strings.Builder) {
	testutil.RequireTools(t, "cc")
	bin := filepath.Join(t.TempDir(), "relay")
	src := bin + ".c"
	if err := os.WriteFile(src, []byte(relaySource), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	dup, err := unix.Dup(fd) // the child's copy; fd stays open until tcpPair's cleanup
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "relay-sock")
	cmd := exec.Command(bin)
	cmd.ExtraFiles = []*os.File{f}
	var out strings.Builder
	cmd.Stdout = &out
	err = cmd.Start()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

func parseRelay(t *testing.T, out string) []relayRead {
	var reads []relayRead
	end := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		ts, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("relay line %q", sc.Text())
		}
		end += n
		reads = append(reads, relayRead{ts, end})
	}
	return reads
}

// TestTinAfterScan: t_in is when the read returned, so it is never after
// the relay's clock read right after read() returned, and not far before
// it (in the median). Messages of 1 KiB one per read, and of 50 KiB (the scan of a large
// read takes longest), each with its marker at its end.
func TestTinAfterScan(t *testing.T) {
	for _, size := range []int{1 << 10, 50 << 10} {
		for _, path := range kernelPaths(t) {
			t.Run(string(path)+"/"+strconv.Itoa(size), func(t *testing.T) {
				client, server := tcpPair(t)
				relay, out := startRelay(t, server)
				c := attachProbe(t, Options{PID: relay.Process.Pid, Path: path})
				const n = 200
				ends := make(map[uint64]int, n)
				for i := range n {
					id := uint64(0x7100 + i)
					msg := lossPayload(size, size-marker.Len, id)
					ends[id] = (i + 1) * size
					if _, err := unix.Write(client, msg); err != nil {
						t.Fatal(err)
					}
					time.Sleep(500 * time.Microsecond) // one message per read
				}
				unix.Shutdown(client, unix.SHUT_WR)
				relay.Wait()
				evs := c.stop(t)
				reads := parseRelay(t, out.String())
				var leads []int64
				for _, e := range evs {
					for _, m := range e.Markers {
						if e.Dir != events.In {
							continue
						}
						i, _ := slices.BinarySearchFunc(reads, ends[m.ID], func(r relayRead, end int) int { return r.end - end })
						if i == len(reads) {
							t.Fatalf("marker %x: no read reached offset %d", m.ID, ends[m.ID])
						}
						lead := reads[i].t - e.Time
						if lead < 0 {
							t.Fatalf("marker %x: t_in %d is %d ns after the relay's clock (scan %d ns)", m.ID, e.Time, -lead, e.ScanNs)
						}
						leads = append(leads, lead)
					}
				}
				if len(leads) != n {
					t.Fatalf("%d markers read, want %d", len(leads), n)
				}
				slices.Sort(leads)
				// A generous bound: the relay may be preempted between its
				// read and its clock on a busy machine, but not most times.
				if leads[n/2] > int64(time.Millisecond) {
					t.Errorf("median t_in %d ns before the relay's clock, want ≤ 1 ms", leads[n/2])
				}
				t.Logf("t_in before the relay's clock: median %d ns, p90 %d ns", leads[n/2], leads[n*9/10])
			})
		}
	}
}
