package report

import (
	"context"
	"testing"
	"time"

	"github.com/brokertrace/brokertrace/source"

	"github.com/brokertrace/brokertrace/capture"
	"github.com/brokertrace/brokertrace/collect"
	"github.com/brokertrace/brokertrace/internal/testbroker"
	"github.com/brokertrace/brokertrace/internal/testutil"
	"github.com/brokertrace/brokertrace/load"
	"github.com/brokertrace/brokertrace/probes/netstack"
	"github.com/brokertrace/brokertrace/probes/sched"
	"github.com/brokertrace/brokertrace/probes/sockq"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/record"
)

// The report is tested on real recordings: a Debian nats-server, recorded
// by record.Run with every source (scheduler, CPU, socket queue, packets,
// segments) while load.Run drives it and writes e2e.csv into the same
// directory, as `brokertrace record --out D` beside `brokertrace load --out D`
// would.

// recordRun records srv into recDir while load.Run sends cfg through it,
// writing e2e.csv and load.json into loadDir (which may be recDir).
func recordRun(t *testing.T, srv *testbroker.NATS, recDir, loadDir string, cfg load.Config) (*record.Result, *load.Result) {
	t.Helper()
	proc, err := process.ByPID(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attached := testutil.NewAttachedWatcher()
	done := make(chan struct{})
	var res *record.Result
	var rerr error
	go func() {
		defer close(done)
		res, rerr = record.Run(ctx, record.Config{
			Target: proc, SelectedBy: "pid", Out: recDir, KeepPrivileges: true,
			Live:         attached,
			LiveInterval: time.Second,
			Sources: []source.Source{
				sched.NewSource(sched.Options{}),
				collect.NewSource(collect.Options{}),
				sockq.NewSource(sockq.SourceOptions{}),
				capture.NewSource(capture.SourceOptions{}),
				netstack.NewSource(),
			},
		})
	}()
	select {
	case <-attached.Seen():
	case <-done:
		t.Fatalf("recording ended before attaching: %v", rerr)
	case <-time.After(60 * time.Second):
		t.Fatal("no attached line within 60s")
	}
	cfg.URL = srv.URL()
	lr, err := load.Run(context.Background(), cfg)
	if err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	// A window or two more of the sources' time series after the last message.
	time.Sleep(250 * time.Millisecond)
	cancel()
	<-done
	if rerr != nil {
		t.Fatalf("record.Run: %v", rerr)
	}
	if err := lr.WriteFiles(testutil.OutDir(t, loadDir)); err != nil {
		t.Fatal(err)
	}
	return res, lr
}
