package probes

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/privs"
)

// MapAccessNeed is what every probe goes on doing once attached — reading
// its counters and maps, updating the ports sockq watches — as a
// privs.Need. Kernels before 5.19 with kernel.unprivileged_bpf_disabled set
// (most distributions' default) refuse every bpf(2) call without CAP_BPF
// (CAP_SYS_ADMIN before 5.8), not only loading; later ones refuse loading
// and creating maps only (the kernel matrix: Debian's 5.10 keeps CAP_BPF,
// its 6.1 does not).
func MapAccessNeed() privs.Need {
	return privs.Need{
		Caps:  []privs.Cap{privs.CAP_BPF, privs.CAP_SYS_ADMIN},
		Why:   "reading the probes' counters and maps (bpf(2)): this kernel refuses every bpf() call without it (kernel.unprivileged_bpf_disabled, before Linux 5.19)",
		Check: checkMapAccess,
	}
}

// checkMapAccess asks the kernel to look up an element of no map (fd -1):
// a kernel that lets the calling thread use bpf(2) answers EBADF, one that
// does not answers EPERM before it looks at the map.
func checkMapAccess() error {
	var attr [32]byte // union bpf_attr for BPF_MAP_LOOKUP_ELEM: map_fd, key, value, flags
	*(*int32)(unsafe.Pointer(&attr[0])) = -1
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_LOOKUP_ELEM, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
	if errors.Is(errno, unix.EPERM) {
		return fmt.Errorf("bpf(BPF_MAP_LOOKUP_ELEM): %w", errno)
	}
	return nil
}
