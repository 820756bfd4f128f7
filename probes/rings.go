package probes

import (
	"slices"
	"sync"

	"github.com/cilium/ebpf"
)

// rings are the ring buffer maps of every probe loaded in this process,
// for a watcher that tells when any of them fills (process.Boost).
var rings struct {
	sync.Mutex
	live []*ebpf.Map
}

func addRing(m *ebpf.Map) {
	rings.Lock()
	defer rings.Unlock()
	rings.live = append(rings.live, m)
}

func removeRing(m *ebpf.Map) {
	rings.Lock()
	defer rings.Unlock()
	rings.live = slices.DeleteFunc(rings.live, func(r *ebpf.Map) bool { return r == m })
}

// Rings are the ring buffer maps of the probes loaded in this process now.
func Rings() []*ebpf.Map {
	rings.Lock()
	defer rings.Unlock()
	return slices.Clone(rings.live)
}
