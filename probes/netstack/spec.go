package netstack

import "github.com/brokertrace/brokertrace/source"

// Spec is the netstack probe's entry in the table of sources (--gso:
// gso.csv). The source finds the broker's ports and network namespace
// itself at the start.
func Spec() source.Spec {
	return source.Switch("netstack", "gso",
		"count TCP segments per skb at the devices: GSO/TSO on send, GRO on receive (gso.csv)",
		func() source.Source { return NewSource() })
}
