package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links a walk follows, as the kernel's 40.
const maxLinks = 40

// walk opens the directory path from the root, one component at a time,
// creating the missing ones when create is set. A symbolic link is
// followed only when root or the invoker owns it, and never as the last
// component: that one is what will be written into. Runs on the invoker's
// thread.
func walk(path string, create bool) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	for links := 0; ; links++ {
		f, target, err := walkOnce(abs, create)
		if target == "" || err != nil {
			return f, err
		}
		if links == maxLinks {
			return nil, &os.PathError{Op: "open", Path: path, Err: unix.ELOOP}
		}
		abs = target
	}
}

// walkOnce walks abs; where it meets a link it may follow, it returns the
// path to walk instead.
func walkOnce(abs string, create bool) (f *os.File, restart string, err error) {
	f, err = os.Open("/")
	if err != nil {
		return nil, "", err
	}
	names := splitPath(strings.TrimPrefix(abs, "/"))
	done := "/"
	for i, name := range names {
		if name == "" || name == "." {
			continue
		}
		path := filepath.Join(done, name)
		next, err := step(f, name, create, path)
		if errors.Is(err, ErrUnsafe) && i < len(names)-1 {
			restart, err = follow(f, name, done, names[i+1:])
		}
		f.Close()
		if err != nil || restart != "" {
			return nil, restart, err
		}
		f, done = next, path
	}
	return f, "", nil
}

// follow reads the link name in dir (at path done) if its owner may be
// trusted, and returns the path that replaces it and the rest.
func follow(dir *os.File, name, done string, rest []string) (string, error) {
	path := filepath.Join(done, name)
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if !trustedUID(int(st.Uid)) {
		return "", fmt.Errorf("%w: %s is a symbolic link owned by uid %d, neither root nor the user who ran brokertrace", ErrUnsafe, path, st.Uid)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: path, Err: err}
	}
	target := string(buf[:n])
	if !filepath.IsAbs(target) {
		target = filepath.Join(done, target)
	}
	return filepath.Join(append([]string{target}, rest...)...), nil
}

// trustedUID reports whether files of uid may be trusted: root's, and the
// invoking user's.
func trustedUID(uid int) bool {
	inv, ok := Invoker()
	return uid == 0 || ok && uid == inv.UID
}

// trusted checks that no user but root and the invoker can change the
// directory f: its owner is one of them, and it is not writable by others
// or by a group other than root's or the invoker's. A sticky directory
// (/tmp) is accepted when sticky is set: only its entries' owners may
// replace them, which is enough for a single file renamed into it.
func trusted(f *os.File, path string, sticky bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if !trustedUID(int(st.Uid)) {
		return fmt.Errorf("%w: %s belongs to uid %d, neither root nor the user who ran brokertrace: choose another --out", ErrUnsafe, path, st.Uid)
	}
	if sticky && st.Mode&unix.S_ISVTX != 0 {
		return nil
	}
	inv, _ := Invoker()
	switch {
	case st.Mode&0o002 != 0:
		return fmt.Errorf("%w: %s is writable by every user (mode %o): choose another --out", ErrUnsafe, path, st.Mode&0o7777)
	case st.Mode&0o020 != 0 && st.Gid != 0 && (inv.UID == 0 || int(st.Gid) != inv.GID):
		return fmt.Errorf("%w: %s is writable by group %d (mode %o): choose another --out", ErrUnsafe, path, st.Gid, st.Mode&0o7777)
	}
	return nil
}

// CreateFile creates the file at path, outside any output directory (a
// capture given by --pcap, a trace by --perfetto), as Stream does: its
// directory must exist and be trusted as Open's, or be sticky like /tmp.
func CreateFile(path string, perm os.FileMode) (*File, error) {
	as, err := invokerThread()
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%w: %q names no file", ErrUnsafe, path)
	}
	var f *os.File
	err = as.do(func() error {
		var err error
		if f, err = walk(filepath.Clean(dir+"."), false); err == nil {
			err = trusted(f, dir, true)
		}
		return err
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, explain(err)
	}
	d := &Dir{f: f, path: filepath.Dir(path), as: as}
	defer d.Close()
	return d.Stream(base, perm)
}
