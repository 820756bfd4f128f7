package netstack

import (
	"github.com/spf13/pflag"

	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/source"
)

// Spec is the netstack probe's entry in the table of sources (--gso:
// gso.csv). The source finds the broker's ports and network namespace
// itself at the start.
func Spec() source.Spec {
	var on bool
	return source.Spec{
		Name: "netstack",
		Flags: func(fl *pflag.FlagSet) {
			fl.BoolVar(&on, "gso", true, "count TCP segments per skb at the devices: GSO/TSO on send, GRO on receive (gso.csv)")
		},
		New: func(*process.Process) (source.Source, error) {
			if !on {
				return nil, nil
			}
			return NewSource(), nil
		},
	}
}
