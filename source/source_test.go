package source

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/spf13/pflag"
)

func TestTimelineCountsHalfOpen(t *testing.T) {
	tl := Timeline{In: []int64{30, 10, 20, 20}, Out: []int64{25, 15}}
	tl.Sort()
	for _, c := range []struct {
		from, to int64
		in, out  int
	}{{10, 20, 1, 1}, {10, 21, 3, 1}, {20, 30, 2, 1}, {0, 100, 4, 2}, {31, 40, 0, 0}} {
		if in, out := tl.InBetween(c.from, c.to), tl.OutBetween(c.from, c.to); in != c.in || out != c.out {
			t.Errorf("[%d, %d): in %d out %d, want %d %d", c.from, c.to, in, out, c.in, c.out)
		}
	}
}

func TestUnavailableKeepsWordsAndCause(t *testing.T) {
	err := Unavailable(fs.ErrNotExist)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, fs.ErrNotExist) || err.Error() != fs.ErrNotExist.Error() {
		t.Fatalf("%v", err)
	}
	if errors.Is(errors.New("x"), ErrUnavailable) {
		t.Fatal("any error is unavailable")
	}
}

type nop struct{ Source }

func TestSwitchTurnsOff(t *testing.T) {
	for _, c := range []struct {
		args []string
		on   bool
	}{{nil, true}, {[]string{"--x=false"}, false}} {
		sp := Switch("x", "x", "usage", func() Source { return nop{} })
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		sp.Flags(fl)
		if err := fl.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		src, err := sp.New(nil)
		if err != nil || (src != nil) != c.on {
			t.Errorf("%v: source %v, err %v", c.args, src, err)
		}
	}
}

func TestFormatNs(t *testing.T) {
	for ns, want := range map[int64]string{999: "999ns", 1500: "1.5µs", 2_500_000: "2.50ms", 3_000_000_000: "3.000s"} {
		if got := FormatNs(ns); got != want {
			t.Errorf("%d: %q, want %q", ns, got, want)
		}
	}
}
