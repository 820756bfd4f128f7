package privs

import (
	"strings"

	"golang.org/x/sys/unix"
)

// A Need is something a program goes on doing after it drops its
// capabilities that may need some of them: Check does it (or its cheapest
// equivalent) and returns its error, and Caps are the capabilities that
// may let it, in the order to try them.
type Need struct {
	Caps []Cap
	// Why says in one line what needs them, for the person who reads
	// which capabilities were kept.
	Why   string
	Check func() error // nil: always needs every one of Caps
}

// Needed finds, on this host and now, which capabilities needs need: each
// Check runs with the effective set cut to what is kept so far (see
// WithEffective); one that fails is tried again with its Caps added one by
// one, and keeps the fewest of them that let it pass. A need that fails
// even with all of them keeps none: it would fail as well before the drop,
// and reports that itself. The result maps each capability kept to why.
// It must not run at the same time as Drop.
func Needed(needs []Need) map[Cap]string {
	kept := map[Cap]string{}
	var have Set
	keep := func(add Set, why string) {
		for _, c := range add.Caps() {
			if kept[c] == "" {
				kept[c] = why
			} else if !strings.Contains(kept[c], why) {
				kept[c] += "; " + why
			}
		}
		have |= add
	}
	for _, n := range needs {
		if n.Check == nil {
			keep(SetOf(n.Caps...), n.Why)
			continue
		}
		if WithEffective(have, n.Check) == nil {
			// It may pass only thanks to what another need kept.
			if shared := have & SetOf(n.Caps...); shared != 0 && WithEffective(have&^shared, n.Check) != nil {
				keep(shared, n.Why)
			}
			continue
		}
		if add, ok := fewest(have, n); ok {
			keep(add, n.Why)
		}
	}
	return kept
}

// fewest returns the fewest of n.Caps that, added to have, let n.Check
// pass: added in order until it passes, then each left out again if it
// passes without.
func fewest(have Set, n Need) (Set, bool) {
	var add Set
	for _, c := range n.Caps {
		add |= SetOf(c)
		if WithEffective(have|add, n.Check) == nil {
			for _, d := range add.Caps() {
				if WithEffective(have|add&^SetOf(d), n.Check) == nil {
					add &^= SetOf(d)
				}
			}
			return add &^ have, true
		}
	}
	return 0, false
}

// Writable is a Need's check that the calling thread can create files in
// the directory path (or write the file path) with its effective
// credentials, as the kernel judges them after a drop: faccessat(2) with
// AT_EACCESS.
func Writable(path string) error {
	mode := uint32(unix.W_OK)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		mode |= unix.X_OK
	}
	return unix.Faccessat(unix.AT_FDCWD, path, mode, unix.AT_EACCESS)
}
