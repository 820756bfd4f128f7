package frame

import (
	"encoding/binary"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestFrameWords: each word the kernel parser compares a command, key or
// verb with is the word its comment names: Redis's as Hash of it, STOMP's
// as its length and its last 16 bytes shifted in one at a time (st_shift).
func TestFrameWords(t *testing.T) {
	src, err := os.ReadFile("../bpf/frame.bpf.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#define (\w+_H_\w+) 0x([0-9a-f]{16})ULL\s+/\* "([^"]+)" \*/`)
	defs := re.FindAllStringSubmatch(string(src), -1)
	if len(defs) != 5 {
		t.Fatalf("%d word hashes in bpf/frame.bpf.h, want 5 (Redis)", len(defs))
	}
	for _, d := range defs {
		h, _ := strconv.ParseUint(d[2], 16, 64)
		if h != Hash([]byte(d[3])) {
			t.Errorf("%s: %#x is not the hash of %q (%#x)", d[1], h, d[3], Hash([]byte(d[3])))
		}
	}
	re = regexp.MustCompile(`(?m)^#define (ST_K_\w+) ST_W\((\d+), 0x([0-9a-f]{16})ULL, 0x([0-9a-f]{16})ULL\)\s+/\* "([^"]+)" \*/`)
	defs = re.FindAllStringSubmatch(string(src), -1)
	if len(defs) != 17 {
		t.Fatalf("%d STOMP words in bpf/frame.bpf.h, want 17", len(defs))
	}
	for _, d := range defs {
		n, _ := strconv.Atoi(d[2])
		lo, _ := strconv.ParseUint(d[3], 16, 64)
		hi, _ := strconv.ParseUint(d[4], 16, 64)
		wantLo, wantHi := shifted(d[5])
		if n != len(d[5]) || lo != wantLo || hi != wantHi {
			t.Errorf("%s: (%d, %#x, %#x), want (%d, %#x, %#x) for %q", d[1], n, lo, hi, len(d[5]), wantLo, wantHi, d[5])
		}
	}
}

// shifted is what st_shift leaves of s: its last 8 bytes and the 8 before,
// the first of each highest.
func shifted(s string) (lo, hi uint64) {
	var b [16]byte
	copy(b[16-min(len(s), 16):], s[max(0, len(s)-16):])
	return binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[:8])
}
