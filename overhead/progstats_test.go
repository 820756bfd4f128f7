package overhead

import "testing"

// TestFdinfoProgID reads program ids the way the kernel prints them for a
// program's and a link's descriptor, and none for a map's.
func TestFdinfoProgID(t *testing.T) {
	for _, c := range []struct {
		text string
		id   uint32
		ok   bool
	}{
		{"pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\nprog_type:\t26\nprog_jited:\t1\nprog_tag:\tc0ffee\nmemlock:\t4096\nprog_id:\t4242\nrun_time_ns:\t0\n", 4242, true},
		{"pos:\t0\nflags:\t02000000\nlink_type:\ttracing\nlink_id:\t7\nprog_tag:\tc0ffee\nprog_id:\t17\nattach_type:\t24\n", 17, true},
		{"pos:\t0\nflags:\t02000002\nmap_type:\t27\nkey_size:\t0\nmap_id:\t99\n", 0, false},
	} {
		id, ok := fdinfoProgID([]byte(c.text))
		if uint32(id) != c.id || ok != c.ok {
			t.Errorf("fdinfoProgID(%q) = %d, %v; want %d, %v", c.text, id, ok, c.id, c.ok)
		}
	}
}
