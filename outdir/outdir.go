// Package outdir is how brokertrace writes files. It runs as root, and the
// directories it is told to write into may be shared with users who could
// plant a symbolic link where a file is about to be written, and so make
// root overwrite any file on the host (CWE-59). A Dir is opened once; every
// file and subdirectory is then created relative to its descriptor without
// following any symbolic link (openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, or O_NOFOLLOW one component at a time), and a file
// takes its name only by rename from a temporary file created with
// O_EXCL|O_NOFOLLOW. An existing directory that another user can write to
// is refused.
//
// Under sudo every path is resolved and created as the user who asked (an
// OS thread with their fsuid, fsgid and groups does it, see owner.go): the
// outputs are theirs, and land only where they could have written them.
package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by the errors of a path brokertrace refuses to
// write through: a symbolic link it would have to follow, a directory
// another user can write to, or a name that leaves the directory.
var ErrUnsafe = errors.New("unsafe output path")

// Permissions of what a Dir creates; umask does not change them.
const (
	DirPerm    os.FileMode = 0o755
	FilePerm   os.FileMode = 0o644
	SecretPerm os.FileMode = 0o600 // files that hold a broker URL with credentials
)

// Dir is an open output directory.
type Dir struct {
	f    *os.File // O_DIRECTORY, never a symbolic link
	path string   // as given, for messages and for readers
	as   *thread  // who creates files; nil: this process's credentials
	null bool     // Discard: every file written goes to /dev/null
}

// Open opens the output directory at path, creating it and its missing
// parents. A symbolic link on the way is followed only when root or the
// invoking user owns it, never as the last component; the directory must
// belong to root or to the invoking user, and no other user may write to
// it (a group's write bit is allowed for the invoker's own group).
func Open(path string) (*Dir, error) {
	as, err := invokerThread()
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = as.do(func() error {
		var err error
		f, err = walk(path, true)
		if err == nil {
			err = trusted(f, path, false)
		}
		if err == nil {
			err = writable(f, path)
		}
		return err
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, explain(err)
	}
	return &Dir{f: f, path: path, as: as}, nil
}

// writable fails now, before anything is measured, where creating a file
// in f would fail later: the access check of the thread's file system
// credentials (AT_EACCESS), the invoker's under sudo.
func writable(f *os.File, path string) error {
	if err := unix.Faccessat(int(f.Fd()), ".", unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return &os.PathError{Op: "write to", Path: path, Err: err}
	}
	return nil
}

// explain adds to a permission error under sudo whose rights were used:
// writing as root would have worked, and the user may not expect that it
// was not tried.
func explain(err error) error {
	inv, ok := Invoker()
	if !ok || !errors.Is(err, os.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w (under sudo brokertrace writes as the user who ran it, uid %d: choose a directory they can write to)", err, inv.UID)
}

// Discard is a Dir that writes nothing: every file created in it is
// /dev/null, so a source writes exactly as in a recording and nothing
// reaches a disk.
func Discard() *Dir { return &Dir{path: os.DevNull, null: true} }

// Path is the directory's path as given to Open.
func (d *Dir) Path() string { return d.path }

// Join is the path of rel inside the directory, for messages and readers.
func (d *Dir) Join(rel string) string { return filepath.Join(d.path, rel) }

// Discarding reports whether the Dir is Discard's.
func (d *Dir) Discarding() bool { return d.null }

// Close closes the directory's descriptor; files created in it stay open.
func (d *Dir) Close() error {
	if d.f == nil {
		return nil
	}
	return d.f.Close()
}

// Sub opens the subdirectory rel, creating what is missing with
// DirPerm. No component may be a symbolic link.
func (d *Dir) Sub(rel string) (*Dir, error) {
	if d.null {
		return d, nil
	}
	var f *os.File
	err := d.as.do(func() error {
		var err error
		f, err = d.sub(rel)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, path: filepath.Join(d.path, rel), as: d.as}, nil
}

// local checks that rel names something inside the directory.
func local(rel string) error {
	if rel == "" || !filepath.IsLocal(rel) {
		return fmt.Errorf("%w: %q is not a name inside the output directory", ErrUnsafe, rel)
	}
	return nil
}

// sub opens rel beneath d: in one openat2 where the kernel has it, else
// (or when a part is missing) one component at a time, creating the
// missing ones. Runs on d's thread.
func (d *Dir) sub(rel string) (*os.File, error) {
	if rel == "." {
		return dup(d.f)
	}
	if err := local(rel); err != nil {
		return nil, err
	}
	fd, err := unix.Openat2(int(d.f.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), d.Join(rel)), nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
		return nil, linkError(d.Join(rel))
	}
	return d.steps(rel, true)
}

// steps opens rel beneath d one component at a time, without following a
// link, creating the missing ones when create is set.
func (d *Dir) steps(rel string, create bool) (*os.File, error) {
	f, err := dup(d.f)
	if err != nil {
		return nil, err
	}
	for _, name := range splitPath(rel) {
		next, err := step(f, name, create, filepath.Join(f.Name(), name))
		f.Close()
		if err != nil {
			return nil, err
		}
		f = next
	}
	return f, nil
}

// splitPath is rel's components.
func splitPath(rel string) []string { return strings.Split(filepath.Clean(rel), "/") }

// dup is a second descriptor of the directory f, for a walk to close.
func dup(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// step opens the directory name in parent without following a symbolic
// link, creating it when create is set and it is missing.
func step(parent *os.File, name string, create bool, path string) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	for range 2 {
		fd, err := unix.Openat(int(parent.Fd()), name, flags, 0)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case errors.Is(err, unix.ELOOP):
			return nil, linkError(path)
		case errors.Is(err, unix.ENOTDIR) && isLink(parent, name):
			return nil, linkError(path)
		case !errors.Is(err, unix.ENOENT) || !create:
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		err = unix.Mkdirat(int(parent.Fd()), name, uint32(DirPerm))
		if err == nil {
			// Mkdir's mode passes through umask; the directory is ours.
			_ = unix.Fchmodat(int(parent.Fd()), name, uint32(DirPerm), unix.AT_SYMLINK_NOFOLLOW)
		} else if !errors.Is(err, unix.EEXIST) {
			return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
		}
	}
	return nil, &os.PathError{Op: "open", Path: path, Err: unix.ENOENT}
}

// isLink reports whether name in parent is a symbolic link.
func isLink(parent *os.File, name string) bool {
	var st unix.Stat_t
	err := unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func linkError(path string) error {
	return fmt.Errorf("%w: %s is a symbolic link; brokertrace does not write through links (give the directory itself, or remove the link)", ErrUnsafe, path)
}
