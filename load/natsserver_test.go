package load

import (
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
)

// startNATS runs a real nats-server for the test and returns its host:port.
func startNATS(tb testing.TB) string { return testbroker.StartNATS(tb).Addr }
