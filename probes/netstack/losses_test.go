package netstack

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// fakeIfindex is far above any interface index a fresh namespace hands out.
const fakeIfindex = 1 << 30

// TestMapFullLoss fills the histogram map from user space with interface
// and direction pairs no device has, all but one entry, then runs a small
// exchange on lo in the target namespace: the first skb counted (the SYN
// arriving at the port: the client's SYN leaves from its own port) takes
// the last entry, lo "in", and every skb the server sends finds the map
// full. Each skb carries one segment, so the truths are the server
// socket's own counts: Matched = segs_in, MapFull = segs_out + 1 (the
// listener's SYN-ACK).
func TestMapFullLoss(t *testing.T) {
	testutil.RequireRoot(t, "loads BPF programs and creates network namespaces")
	testutil.RequireTools(t, "ip")
	ns := newNetns(t)
	const port = 4336
	tr := openIn(t, ns, port)
	m := tr.Probe.Map(netstackMapHists)
	limit := int(m.MaxEntries())
	vals := make([]netstackGsoHist, ebpf.MustPossibleCPU())
	for i := range limit - 1 {
		key := netstackGsoKey{Ifindex: uint32(fakeIfindex + i/2), Dir: uint32(i % 2)}
		if err := m.Update(&key, vals, ebpf.UpdateNoExist); err != nil {
			t.Fatalf("filling entry %d of %d: %v", i, limit, err)
		}
	}
	_, server := exchange(t, ns, port, 1000, 1000)
	st, real := readReal(t, tr, limit)
	t.Logf("map of %d; %+v; server received %d, sent %d+1", limit, st, server.Segs_in, server.Segs_out)
	if len(real) != 1 || real[0].Dir != In || real[0].Ifindex != 1 || real[0].Total != st.Matched || real[0].Segments != st.Matched {
		t.Errorf("histograms of real devices %+v, want lo in only, with the %d matched skbs", real, st.Matched)
	}
	if st.MapFull == 0 || st.Matched != uint64(server.Segs_in) || st.MapFull != uint64(server.Segs_out)+1 || st.Unparsed != 0 || st.Missed != 0 {
		t.Errorf("stats %+v; want matched %d (segs_in), map full %d (segs_out + SYN-ACK)", st, server.Segs_in, server.Segs_out+1)
	}
}

// openIn opens the probe for port in the namespace at ns.
func openIn(t *testing.T, ns string, port uint16) *Tracer {
	t.Helper()
	ino, err := NetNSInode(ns)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Options{Ports: []uint16{port}, NetNS: ino})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// detachRead detaches the probe and reads its stats and histograms.
func detachRead(t *testing.T, tr *Tracer) (Stats, []Hist) {
	t.Helper()
	if err := tr.Detach(); err != nil {
		t.Fatal(err)
	}
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := tr.Read()
	if err != nil {
		t.Fatal(err)
	}
	return st, hs
}

// readReal detaches and reads, checking that the map holds limit entries
// and dropping those of the fake interfaces, which must be empty.
func readReal(t *testing.T, tr *Tracer, limit int) (Stats, []Hist) {
	t.Helper()
	st, hs := detachRead(t, tr)
	if len(hs) != limit {
		t.Errorf("%d histograms, want the map full with %d", len(hs), limit)
	}
	var real []Hist
	for _, h := range hs {
		if h.Ifindex < fakeIfindex {
			real = append(real, h)
		} else if h.Total != 0 {
			t.Errorf("fake entry %d %s counted %d skbs", h.Ifindex, h.Dir, h.Total)
		}
	}
	return st, real
}

// malformed are IP packets on the broker's port whose headers the probe
// cannot read, with their EtherType: an IPv4 header length below 5 words,
// a version other than 4, a TCP header cut after 10 bytes behind IPv4 and
// behind IPv6, and an IPv6 packet shorter than its header.
func malformed(port uint16) (pkts [][]byte, protos []uint16) {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], port)
	binary.BigEndian.PutUint16(tcp[2:], port)
	tcp[12], tcp[13] = 5<<4, 0x04 // RST: nothing answers
	v4 := func(verIHL byte, tcp []byte) []byte {
		ip := []byte{verIHL, 0, 0, 0, 0, 0, 0x40, 0, 64, unix.IPPROTO_TCP, 0, 0, 10, 232, 0, 1, 10, 232, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(tcp)))
		return append(ip, tcp...)
	}
	v6 := func(tcp []byte) []byte {
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, unix.IPPROTO_TCP, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
		return append(ip, tcp...)
	}
	pkts = [][]byte{v4(0x44, tcp), v4(0x65, tcp), v4(0x45, tcp[:10]), v6(tcp[:10]), v6(nil)[:30]}
	protos = []uint16{unix.ETH_P_IP, unix.ETH_P_IP, unix.ETH_P_IP, unix.ETH_P_IPV6, unix.ETH_P_IPV6}
	return pkts, protos
}

// TestUnparsedLoss sends the malformed packets over a veth pair, from a
// packet socket in the other namespace into the target's (counted on
// receive) and from one in the target's out (counted on send), each
// several times, beside one well-formed segment each way: Unparsed is
// exactly the malformed packets sent, Matched the two good ones.
func TestUnparsedLoss(t *testing.T) {
	testutil.RequireRoot(t, "loads BPF programs and creates network namespaces")
	testutil.RequireTools(t, "ip")
	target, other := newNetns(t), newNetns(t)
	ifT, ifO := vethPair(t, target, other)
	const port, times = 4337, 3
	tr := openIn(t, target, port)
	pkts, protos := malformed(port)
	good, _ := malformed(port)
	good[0][0] = 0x45 // the first one with a proper header length
	var sent uint64
	for _, side := range []struct{ ns, dev string }{{other, ifO}, {target, ifT}} {
		for range times {
			sent += sendFrames(t, side.ns, side.dev, pkts, protos)
		}
		sendFrames(t, side.ns, side.dev, good[:1], protos[:1])
	}
	waitCounted(t, tr, sent+2)
	st, hs := detachRead(t, tr)
	t.Logf("sent %d malformed; %+v", sent, st)
	if sent != 2*times*uint64(len(pkts)) || st.Unparsed != sent || st.Matched != 2 || st.MapFull != 0 || st.Missed != 0 {
		t.Errorf("stats %+v; want %d unparsed, 2 matched", st, sent)
	}
	if len(hs) != 2 || hs[0].Dir != In || hs[0].Total != 1 || hs[1].Dir != Out || hs[1].Total != 1 {
		var got []string
		for _, h := range hs {
			got = append(got, fmt.Sprintf("%s@%d: %d skbs", h.Dir, h.Ifindex, h.Total))
		}
		t.Errorf("histograms %v, want one skb in and one out", got)
	}
}

// waitCounted waits until the probe has seen n skbs (unparsed or matched):
// a receiving veth may hand them up after the send returned.
func waitCounted(t *testing.T, tr *Tracer, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := tr.Stats(); err != nil || st.Unparsed+st.Matched >= n {
			return
		}
	}
}

// vethPair joins namespaces a and b (paths) with a veth pair, both ends up,
// and returns the ends' names.
func vethPair(t *testing.T, a, b string) (ifA, ifB string) {
	t.Helper()
	na, nb := strings.TrimPrefix(a, "/run/netns/"), strings.TrimPrefix(b, "/run/netns/")
	ifA, ifB = "vt"+na[len(na)-6:], "vo"+na[len(na)-6:]
	for _, args := range [][]string{
		{"link", "add", ifA, "netns", na, "type", "veth", "peer", "name", ifB, "netns", nb},
		{"-n", na, "link", "set", ifA, "up"},
		{"-n", nb, "link", "set", ifB, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return ifA, ifB
}

// sendFrames sends each packet from a packet socket in ns on dev, to the
// broadcast address with the packet's EtherType, and returns how many.
func sendFrames(t *testing.T, ns, dev string, pkts [][]byte, protos []uint16) (sent uint64) {
	t.Helper()
	inNetNS(t, ns, func() {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			var fd int
			if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0); err == nil {
				defer unix.Close(fd)
				for i, p := range pkts {
					to := &unix.SockaddrLinklayer{Protocol: htons(protos[i]), Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
					if err = unix.Sendto(fd, p, 0, to); err != nil {
						break
					}
					sent++
				}
			}
		}
		if err != nil {
			t.Error(fmt.Errorf("sending on %s: %w", dev, err))
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return sent
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
