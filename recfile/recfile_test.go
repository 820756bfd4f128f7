package recfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMessagesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	mw, err := CreateMessages(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{ID: 1<<63 + 1, TIn: 100, TOut: 250, Latency: 150, InTID: 3, OutTID: 4, InLPort: 4222, InRPort: 5000, OutLPort: 4222, OutRPort: 5001, Copy: 1},
		{ID: 2, TIn: 5, TOut: 6, Latency: 1, Copy: 2},
	}
	for i := range want {
		if err := mw.Write(&want[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMessages(filepath.Join(dir, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestEmptyMessagesHasHeader(t *testing.T) {
	dir := t.TempDir()
	mw, _ := CreateMessages(dir, nil)
	mw.Close()
	b, _ := os.ReadFile(filepath.Join(dir, MessagesFile))
	if string(b) != "id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n" {
		t.Fatalf("%q", b)
	}
	if m, err := ReadMessages(filepath.Join(dir, MessagesFile)); err != nil || len(m) != 0 {
		t.Fatal(m, err)
	}
}

func TestCreateMessagesUnwritable(t *testing.T) {
	if _, err := CreateMessages("/proc/version", nil); err == nil {
		t.Fatal("no error for an unwritable directory")
	}
}

// FuzzReadMessages: any file either parses into rows whose latency column
// agrees with the times, or is rejected with an error; never a panic.
func FuzzReadMessages(f *testing.F) {
	f.Add("id,t_in_ns,t_out_ns,latency_ns,in_tid,out_tid,in_lport,in_rport,out_lport,out_rport,copy\n1,2,3,1,4,5,6,7,8,9,1\n")
	f.Add("id\n1\n")
	f.Fuzz(func(t *testing.T, s string) {
		p := filepath.Join(t.TempDir(), "m.csv")
		os.WriteFile(p, []byte(s), 0o644)
		rows, err := ReadMessages(p)
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.Latency != r.TOut-r.TIn {
				t.Fatalf("row %+v: latency_ns disagrees with the times", r)
			}
		}
	})
}
