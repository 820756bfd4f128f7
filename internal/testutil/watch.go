package testutil

import (
	"strings"
	"sync"
)

// AttachedPrefix begins the line a recording prints once every probe is
// live: tests start their load only after it.
const AttachedPrefix = "brokertrace: attached"

// LineWatcher is an io.Writer that keeps every line written to it and
// closes Seen once a line begins with its prefix. It is safe for
// concurrent writes.
type LineWatcher struct {
	mu     sync.Mutex
	prefix string
	seen   chan struct{}
	once   sync.Once
	lines  []string
}

// NewLineWatcher watches for a line that begins with prefix.
func NewLineWatcher(prefix string) *LineWatcher {
	return &LineWatcher{prefix: prefix, seen: make(chan struct{})}
}

// NewAttachedWatcher watches for the recording's attached line.
func NewAttachedWatcher() *LineWatcher { return NewLineWatcher(AttachedPrefix) }

// Write implements io.Writer.
func (w *LineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.lines = append(w.lines, l)
		if strings.HasPrefix(l, w.prefix) {
			w.once.Do(func() { close(w.seen) })
		}
	}
	return len(p), nil
}

// Seen is closed once a line with the prefix has been written.
func (w *LineWatcher) Seen() <-chan struct{} { return w.seen }

// Lines are the lines written so far.
func (w *LineWatcher) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}
