package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// TestRingDropsLoss fills the ring while its reader is stalled, so that
// the kernel drops what does not fit. The reader blocks writing its first
// counted segment to the pcapng file, whose lock the test holds (the ring
// geometry is fixed, 128 blocks of 64 KiB, some 61 500 header-only
// segments). In a fresh namespace, on lo: 10 malformed segments (unparsed,
// read before the stall), then 100 000 RST segments to the port from a raw
// socket (a RST draws no answer). The truth is what was sent: the kernel
// accepts every one, the counted RSTs and the drops add up to the RSTs
// sent, and Snapshot, the warnings, meta.json and the pcapng statistics
// show the drops.
func TestRingDropsLoss(t *testing.T) {
	testutil.RequireRoot(t, "creates network namespaces, AF_PACKET and raw sockets")
	testutil.RequireTools(t, "ip")
	ns := newNetns(t, "drop", false)
	const port, rsts = 4335, 100_000
	pcap := filepath.Join(t.TempDir(), "drops.pcapng")
	capt, err := Start(context.Background(), Options{NetNS: nsPath(ns), Ports: []uint16{port}, PcapPath: pcap})
	if err != nil {
		t.Fatal(err)
	}
	capt.pcap.mu.Lock()
	unparsed := sendMalformed(t, ns, port)
	sendRSTs(t, ns, port, rsts)
	kernel := waitAccepted(t, capt, unparsed+rsts)
	snap := capt.Snapshot()
	capt.pcap.mu.Unlock()
	r, err := capt.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %d, counted %d, dropped %d, unparsed %d; snapshot drops %d", r.KernelPackets, r.Packets, r.Drops, r.Unparsed, snap.Drops)
	if kernel != unparsed+rsts || r.KernelPackets != unparsed+rsts {
		t.Errorf("kernel accepted %d (%d while stalled), sent %d", r.KernelPackets, kernel, unparsed+rsts)
	}
	if r.Drops == 0 || r.Unparsed != unparsed || r.Packets+r.Drops != rsts || r.KernelPackets != r.Packets+r.Drops+r.Unparsed {
		t.Errorf("counted %d + dropped %d = %d, want the %d RSTs sent; unparsed %d, want %d", r.Packets, r.Drops, r.Packets+r.Drops, rsts, r.Unparsed, unparsed)
	}
	if r.In.Packets != r.Packets || r.In.Sizes[0] != r.Packets || r.Out.Packets != 0 || r.In.PureACKs != 0 {
		t.Errorf("in %v (%d, %d pure ACKs), out %d: want every counted RST in, without payload", r.In.Sizes, r.In.Packets, r.In.PureACKs, r.Out.Packets)
	}
	if snap.Drops != r.Drops || len(r.PerIface) != 1 || r.PerIface[0].Drops != r.Drops {
		t.Errorf("snapshot drops %d, per interface %+v; want %d", snap.Drops, r.PerIface, r.Drops)
	}
	checkDropReports(t, capt, r, pcap)
}

// checkDropReports checks that the warnings, meta.json's capture part and
// the pcapng file's statistics carry the drops.
func checkDropReports(t *testing.T, capt *Capture, r *Result, pcap string) {
	t.Helper()
	want := fmt.Sprintf("%d packets were dropped by the kernel because a capture ring was full: packets.csv and net.csv miss them", r.Drops)
	if w := r.warnings(); len(w) == 0 || w[0] != want {
		t.Errorf("warnings %q, want first %q", w, want)
	}
	s := &Source{capt: capt, result: r, broker: &brokerNet{netns: capt.opts.NetNS, ports: capt.opts.Ports}}
	m := s.meta()
	if m.Drops != r.Drops || m.KernelPackets != r.KernelPackets || len(m.PerIface) != 1 || m.PerIface[0].Drops != r.Drops {
		t.Errorf("meta drops %d kernel %d per interface %+v; want %d and %d", m.Drops, m.KernelPackets, m.PerIface, r.Drops, r.KernelPackets)
	}
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ng, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var records uint64
	for {
		if _, _, err := ng.ReadPacketData(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		records++
	}
	intf, err := ng.Interface(0)
	if err != nil {
		t.Fatal(err)
	}
	if st := intf.Statistics; records != r.Packets || st.PacketsDropped != r.Drops || st.PacketsReceived != r.KernelPackets {
		t.Errorf("pcapng: %d records, statistics %d received %d dropped; want %d, %d, %d", records, st.PacketsReceived, st.PacketsDropped, r.Packets, r.KernelPackets, r.Drops)
	}
}

// sendRSTs sends n RST segments from a raw socket in ns to 127.0.0.1:port,
// as fast as the socket takes them; lo hands each to the packet taps
// before the send returns.
func sendRSTs(t *testing.T, ns string, port uint16, n uint64) {
	t.Helper()
	var fd int
	err := inNetNS(nsPath(ns), func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW) // IP_HDRINCL; stays in ns
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	pkt := []byte{0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, ipProtoTCP, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
		0x9c, 0x41, byte(port >> 8), byte(port), 0, 0, 0, 1, 0, 0, 0, 0, 5 << 4, tcpRST, 0xff, 0xff, 0, 0, 0, 0}
	for range n {
		if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAccepted waits, the readers stalled, until the kernel has accepted
// want segments through the capture's filters, and returns how many it
// accepted (stored or dropped).
func waitAccepted(t *testing.T, c *Capture, want uint64) uint64 {
	t.Helper()
	var got uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		got = 0
		for _, tp := range c.taps {
			if err := tp.pollStats(); err != nil {
				t.Fatal(err)
			}
			got += tp.kernel.Load()
		}
		if got >= want {
			break
		}
	}
	return got
}
