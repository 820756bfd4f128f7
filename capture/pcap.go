package capture

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/brokertrace/brokertrace/outdir"
)

// pcapFile is the optional header dump, shared by all readers.
type pcapFile struct {
	mu sync.Mutex
	f  *outdir.File
	w  *pcapgo.NgWriter
}

func createPcap(path string, taps []*tap, snap int) (*pcapFile, error) {
	f, err := outdir.CreateFile(path, outdir.FilePerm)
	if errors.Is(err, outdir.ErrUnsafe) {
		return nil, badInput{fmt.Errorf("capture: --pcap: %w", err)}
	}
	if err != nil {
		return nil, badInput{fmt.Errorf("capture: cannot create pcap file: %v", err)}
	}
	intf := func(t *tap) pcapgo.NgInterface {
		return pcapgo.NgInterface{
			Name:                t.name,
			Description:         "TCP/IP headers only, cut at the TCP header end",
			OS:                  "linux",
			LinkType:            layers.LinkTypeRaw,
			TimestampResolution: 9,
			SnapLength:          uint32(snap),
		}
	}
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo.Application = "brokertrace capture"
	w, err := pcapgo.NewNgWriterInterface(f, intf(taps[0]), opts)
	if err == nil {
		for _, t := range taps[1:] {
			if _, err = w.AddInterface(intf(t)); err != nil {
				break
			}
		}
	}
	if err != nil {
		f.Abort()
		return nil, fmt.Errorf("capture: cannot write pcap file %s: %v", path, err)
	}
	return &pcapFile{f: f, w: w}, nil
}

func (p *pcapFile) write(ci gopacket.CaptureInfo, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.w.WritePacket(ci, data); err != nil {
		return fmt.Errorf("capture: writing pcap file %s: %v", p.f.Name(), err)
	}
	return nil
}

// close records each interface's kernel counters, so a reader of the file
// sees the drops too, and closes the file.
func (p *pcapFile) close(st []IfaceStats) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	now := time.Now()
	for i, s := range st {
		if err := p.w.WriteInterfaceStats(i, pcapgo.NgInterfaceStatistics{
			LastUpdate:      now,
			PacketsReceived: s.KernelPackets,
			PacketsDropped:  s.Drops,
		}); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.w.Flush(), p.f.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("capture: writing pcap file %s: %v", p.f.Name(), err)
	}
	return nil
}
