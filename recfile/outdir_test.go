package recfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadersRefuseLinks: a link at a recording's file name is refused by
// every reader, and the error quotes nothing of its target.
func TestReadersRefuseLinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "shadow")
	os.WriteFile(secret, []byte("root:$6$SECRET:19000:0:99999:7:::\n"), 0o600)
	for _, name := range []string{MetaFile, MessagesFile} {
		os.Symlink(secret, filepath.Join(dir, name))
	}
	var m Meta
	errs := []error{ReadJSON(dir, MetaFile, &m)}
	_, err := ReadMessages(filepath.Join(dir, MessagesFile))
	errs = append(errs, err)
	for _, err := range errs {
		if !errors.Is(err, syscall.ELOOP) || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("reading through a link: %v, want ELOOP naming the link and quoting nothing", err)
		}
	}
}
