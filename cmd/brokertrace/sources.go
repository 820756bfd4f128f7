package main

import (
	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/peers"
	"github.com/brokertrace/brokertrace/probes/netstack"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/source"
)

// sourceTable is the table of every source a recording runs beside the
// socket probe: record and run build their flags from it and hand the
// sources it makes to record.Run. Its order is the order of the sources' columns in messages.csv,
// of their warnings and of their headlines. Each call returns fresh specs
// whose flags bind to options of their own.
func sourceTable() []source.Spec {
	return []source.Spec{
		capture.Spec(),
		netstack.Spec(),
		collect.Spec(),
		sched.Spec(),
		sockq.Spec(),
		peers.Spec(),
	}
}
