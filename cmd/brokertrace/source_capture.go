package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/record"
	"github.com/brokertrace/brokertrace/target"
)

// Packets in every recording: the "capture" source (packets.csv, net.csv,
// --pcap) and the "netstack" source (gso.csv). Both find the broker's
// listening ports and network namespace themselves at the start.
var (
	captureOn     bool
	captureIfaces []string
	capturePcap   string
	gsoOn         bool
)

func init() {
	sourceSpecs = append(sourceSpecs,
		sourceSpec{
			flags: func(fl *pflag.FlagSet) {
				fl.BoolVar(&captureOn, "capture", true, "capture TCP/IP headers of the broker's listening ports (packets.csv, net.csv)")
				fl.StringSliceVar(&captureIfaces, "iface", nil, "capture on these interfaces of the broker's network namespace (default: those its listening addresses are reached over, lo included)")
				fl.StringVar(&capturePcap, "pcap", "", "also write the captured headers (no payload) to this pcapng file")
			},
			make: makeCaptureSource,
		},
		sourceSpec{
			flags: func(fl *pflag.FlagSet) {
				fl.BoolVar(&gsoOn, "gso", true, "count TCP segments per skb at the devices: GSO/TSO on send, GRO on receive (gso.csv)")
			},
			make: func(*target.Process, *recordFlags) (record.Source, error) {
				if !gsoOn {
					return nil, nil
				}
				return capture.NewNetstackSource(), nil
			},
		},
	)
}

func makeCaptureSource(proc *target.Process, _ *recordFlags) (record.Source, error) {
	if !captureOn {
		if len(captureIfaces) > 0 || capturePcap != "" {
			return nil, errors.New("record: --iface and --pcap need the capture; drop --capture=false")
		}
		return nil, nil
	}
	var ifaces []string
	for _, n := range captureIfaces {
		if n = strings.TrimSpace(n); n == "" {
			return nil, errors.New("record: empty interface name in --iface")
		}
		ifaces = append(ifaces, n)
	}
	if len(ifaces) > 0 {
		if err := capture.CheckIfaces(fmt.Sprintf("/proc/%d/ns/net", proc.PID), ifaces); err != nil {
			if capture.IsBadInput(err) {
				return nil, fmt.Errorf("record: --iface: %s", strings.TrimPrefix(err.Error(), "capture: "))
			}
			// The namespace cannot be entered: the capture source will say
			// so as unavailable, and the recording goes on.
		}
	}
	if capturePcap != "" {
		if fi, err := os.Stat(filepath.Dir(capturePcap)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("record: --pcap %s: directory %s does not exist", capturePcap, filepath.Dir(capturePcap))
		}
		if fi, err := os.Stat(capturePcap); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("record: --pcap %s is a directory: give a file name", capturePcap)
		}
	}
	return capture.NewSource(capture.SourceOptions{Ifaces: ifaces, PcapPath: capturePcap}), nil
}
