package outdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File is a file being written. It has a temporary name until Close
// renames it into place, so a reader sees the old file or the whole new
// one, and an existing name (a planted link among them) is replaced, never
// written through.
// Give a child process File.File as its output, not the File: exec.Cmd
// writes to an *os.File directly, to anything else through a pipe.
type File struct {
	*os.File
	parent *os.File // the directory it is in; nil under Discard
	as     *thread
	tmp    string
	name   string
	path   string
}

// Create creates the file rel with mode perm; it takes its name at Close,
// so a reader sees the old file or the whole new one. Missing directories
// on the way are created.
func (d *Dir) Create(rel string, perm os.FileMode) (*File, error) {
	return d.create(rel, perm, false)
}

// Stream creates the file rel with mode perm for a file read while it is
// written (a recording's table, a log, a capture): it takes its name at
// once, by rename from the temporary file, so `tail -f` follows it and a
// process killed mid-way leaves it under its name.
func (d *Dir) Stream(rel string, perm os.FileMode) (*File, error) {
	return d.create(rel, perm, true)
}

func (d *Dir) create(rel string, perm os.FileMode, now bool) (*File, error) {
	if d.null {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		return &File{File: f, path: os.DevNull}, err
	}
	if err := local(rel); err != nil {
		return nil, err
	}
	f := &File{as: d.as, name: filepath.Base(rel), path: d.Join(rel)}
	err := d.as.do(func() error {
		var err error
		if f.parent, err = d.sub(filepath.Dir(rel)); err != nil {
			return err
		}
		f.tmp = "." + f.name + ".tmp-" + token()
		fd, err := unix.Openat(int(f.parent.Fd()), f.tmp,
			unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return &os.PathError{Op: "create", Path: f.path, Err: err}
		}
		f.File = os.NewFile(uintptr(fd), f.path)
		if err := f.File.Chmod(perm); err != nil || !now {
			return err
		}
		return f.rename()
	})
	if err != nil {
		f.Abort()
		return nil, err
	}
	return f, nil
}

// token is a random suffix for temporary names.
func token() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Name is the file's final path.
func (f *File) Name() string { return f.path }

// Close closes the file and renames it into place.
func (f *File) Close() error {
	err := f.File.Close()
	if f.parent == nil {
		return err
	}
	defer func() { f.parent.Close(); f.parent = nil }()
	if f.tmp == "" { // Stream's, named already: what it holds stays
		return err
	}
	if err != nil {
		f.remove()
		return err
	}
	if err = f.as.do(f.rename); err != nil {
		f.remove()
	}
	return err
}

// rename gives the file its name; on f's thread.
func (f *File) rename() error {
	if err := unix.Renameat(int(f.parent.Fd()), f.tmp, int(f.parent.Fd()), f.name); err != nil {
		return &os.PathError{Op: "rename", Path: f.path, Err: err}
	}
	f.tmp = ""
	return nil
}

// Abort closes and removes the file: Create's name is left as it was,
// Stream's is removed.
func (f *File) Abort() {
	if f.File != nil {
		f.File.Close()
	}
	if f.parent != nil {
		f.remove()
		f.parent.Close()
		f.parent = nil
	}
}

// remove unlinks the file: its temporary name, or Stream's final one.
func (f *File) remove() {
	name := f.tmp
	if name == "" {
		name = f.name
	}
	f.as.do(func() error { return unix.Unlinkat(int(f.parent.Fd()), name, 0) })
}

// WriteFile writes data to rel, atomically, with mode perm.
func (d *Dir) WriteFile(rel string, data []byte, perm os.FileMode) error {
	f, err := d.Create(rel, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// Remove removes the file or empty directory rel; a symbolic link is
// removed itself. A missing rel is not an error.
func (d *Dir) Remove(rel string) error {
	if d.null {
		return nil
	}
	return d.at(rel, func(parent *os.File, name string) error {
		err := unix.Unlinkat(int(parent.Fd()), name, 0)
		if errors.Is(err, unix.EISDIR) {
			err = unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
		}
		return err
	})
}

// RemoveAll removes rel and everything below it, following no link.
func (d *Dir) RemoveAll(rel string) error {
	if d.null {
		return nil
	}
	return d.at(rel, removeAll)
}

// at runs op on rel's directory and base name, on d's thread; a missing
// rel or parent is not an error.
func (d *Dir) at(rel string, op func(parent *os.File, name string) error) error {
	if err := local(rel); err != nil {
		return err
	}
	return d.as.do(func() error {
		parent, err := d.subNoCreate(filepath.Dir(rel))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer parent.Close()
		err = op(parent, filepath.Base(rel))
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return &os.PathError{Op: "remove", Path: d.Join(rel), Err: err}
		}
		return nil
	})
}

// subNoCreate opens rel beneath d without creating anything.
func (d *Dir) subNoCreate(rel string) (*os.File, error) {
	if rel == "." {
		return dup(d.f)
	}
	return d.steps(rel, false)
}

// removeAll removes name in parent and, if it is a directory, its
// contents first, opening every directory with O_NOFOLLOW.
func removeAll(parent *os.File, name string) error {
	err := unix.Unlinkat(int(parent.Fd()), name, 0)
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	dir, err := step(parent, name, false, filepath.Join(parent.Name(), name))
	if err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	for _, n := range names {
		if e := removeAll(dir, n); e != nil && !errors.Is(e, unix.ENOENT) && err == nil {
			err = e
		}
	}
	dir.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
}
