package frame

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestFrameWords: each hash the kernel parser compares a word with is
// Hash of the word its comment names.
func TestFrameWords(t *testing.T) {
	src, err := os.ReadFile("../bpf/frame.bpf.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#define (\w+_H_\w+) 0x([0-9a-f]{16})ULL\s+/\* "([^"]+)" \*/`)
	defs := re.FindAllStringSubmatch(string(src), -1)
	if len(defs) != 22 {
		t.Fatalf("%d word hashes in bpf/frame.bpf.h, want 22 (17 STOMP, 5 Redis)", len(defs))
	}
	for _, d := range defs {
		h, _ := strconv.ParseUint(d[2], 16, 64)
		if h != Hash([]byte(d[3])) {
			t.Errorf("%s: %#x is not the hash of %q (%#x)", d[1], h, d[3], Hash([]byte(d[3])))
		}
	}
}
