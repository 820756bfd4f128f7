package capture

import "testing"

// TestDirectionDialPorts: a dialed connection's local port decides the
// direction before the listening ports do. The route a NATS node dialed
// runs from an ephemeral port to the peer's 6222, which the node listens
// on too: by the listening ports alone it would count as in.
func TestDirectionDialPorts(t *testing.T) {
	var c Capture
	c.ports.add(4222)
	c.ports.add(6222)
	c.dial.add(40000)
	for _, tc := range []struct {
		src, dst uint16
		want     int
	}{
		{40000, 6222, out}, // the dialed route, leaving
		{6222, 40000, in},  // and arriving
		{50000, 4222, in},  // a client's segment to the broker
		{4222, 50000, out},
		{6222, 6222, in}, // both listening ports: in, as before
		{1, 2, -1},
	} {
		if got := c.direction(&segment{src: tc.src, dst: tc.dst}); got != tc.want {
			t.Errorf("%d → %d: direction %d, want %d", tc.src, tc.dst, got, tc.want)
		}
	}
}
