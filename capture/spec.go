package capture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the packet capture's entry in the table of sources (--capture,
// --iface, --pcap: packets.csv, net.csv). It finds the broker's listening
// ports and network namespace itself at the start.
func Spec() source.Spec {
	var (
		on     bool
		ifaces []string
		pcap   string
	)
	return source.Spec{
		Name: "capture",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "capture", true, "capture TCP/IP headers of the broker's listening ports (packets.csv, net.csv)")
			fl.StringSliceVar(&ifaces, "iface", nil, "capture on these interfaces of the broker's network namespace (default: those its listening addresses are reached over, lo included)")
			fl.StringVar(&pcap, "pcap", "", "also write the captured headers (no payload) to this pcapng file")
		},
		New: func(target *process.Process) (source.Source, error) {
			if !on {
				if len(ifaces) > 0 || pcap != "" {
					return nil, errors.New("record: --iface and --pcap need the capture; drop --capture=false")
				}
				return nil, nil
			}
			return newCaptureSource(target, ifaces, pcap)
		},
	}
}

func newCaptureSource(target *process.Process, names []string, pcap string) (source.Source, error) {
	var ifaces []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "" {
			return nil, errors.New("record: empty interface name in --iface")
		}
		ifaces = append(ifaces, n)
	}
	if len(ifaces) > 0 {
		if err := CheckIfaces(process.NetNSPath(target.PID), ifaces); err != nil && IsBadInput(err) {
			return nil, fmt.Errorf("record: --iface: %s", strings.TrimPrefix(err.Error(), "capture: "))
		}
		// A namespace that cannot be entered is left to the source: it says
		// so as unavailable, and the recording goes on.
	}
	if pcap != "" {
		if fi, err := os.Stat(filepath.Dir(pcap)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("record: --pcap %s: directory %s does not exist", pcap, filepath.Dir(pcap))
		}
		if fi, err := os.Stat(pcap); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("record: --pcap %s is a directory: give a file name", pcap)
		}
	}
	return NewSource(SourceOptions{Ifaces: ifaces, PcapPath: pcap}), nil
}
