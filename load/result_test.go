package load

import (
	"bufio"
	"bytes"
	"strconv"
	"testing"
	"time"
)

// e2eHeader is e2e.csv's first line, as docs/formats.md gives it.
const e2eHeader = "id,t_intended_ns,t_send_ns,t_recv_ns,warmup"

// oldE2E is how e2e.csv was formatted by hand before it was written
// through recfile.E2ERow; the two must agree byte for byte.
func oldE2E(r *Result) []byte {
	b := []byte(e2eHeader + "\n")
	for i := 0; i < r.Sent; i++ {
		b = strconv.AppendUint(b, r.Config.IDBase+uint64(i), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Intended[i], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Send[i], 10)
		b = append(b, ',')
		if t := r.Recv[i]; t != 0 {
			b = strconv.AppendInt(b, t, 10)
		}
		if r.IsWarmup(i) {
			b = append(b, ",1\n"...)
		} else {
			b = append(b, ",0\n"...)
		}
	}
	return b
}

// TestE2EBytes: received and lost, warm-up and not, large ids and times,
// and planned-but-unsent slots (not written) give the same bytes as the
// hand-written format.
func TestE2EBytes(t *testing.T) {
	r := &Result{Config: Config{IDBase: 1<<63 + 5, Warmup: 3 * time.Millisecond}, StartNs: 1e9, Sent: 6,
		Intended: []int64{1e9, 1e9 + 1e6, 1e9 + 2e6, 1e9 + 3e6, 1e9 + 4e6, 1<<62 + 1, 7},
		Send:     []int64{1e9 + 10, 1e9 + 1e6 + 3, 1e9 + 2e6, 1e9 + 3e6 + 999, 1e9 + 4e6 + 1, 1<<62 + 2, 8},
		Recv:     []int64{1e9 + 500, 0, 1e9 + 2e6 + 1, 0, 1e9 + 5e6, 1<<62 + 3, 9},
	}
	var got bytes.Buffer
	w := bufio.NewWriter(&got)
	if err := r.writeCSV(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if want := oldE2E(r); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("e2e.csv:\n%s\nwant:\n%s", got.Bytes(), want)
	}
}
