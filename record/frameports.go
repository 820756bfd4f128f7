package record

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/brokertrace/brokertrace/frame"
	"github.com/brokertrace/brokertrace/probes/sockio"
	"github.com/brokertrace/brokertrace/process"
	"github.com/brokertrace/brokertrace/recfile"
)

// framePorts resolves the ports whose protocol frames are parsed with
// --match frame: those given, else the target's listeners on well-known
// broker ports.
func (r *recorder) framePorts() (map[uint16]frame.Proto, error) {
	if r.cfg.Match != sockio.MatchFrame && r.cfg.Match != MatchBoth {
		return nil, nil
	}
	ports := r.cfg.FramePorts
	if len(ports) == 0 {
		var err error
		if ports, err = defaultFramePorts(r.cfg.Target); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// ErrNoFramePorts: --match frame (or both) found no port whose protocol
// it knows.
var ErrNoFramePorts = errors.New("record: --match frame or both: the broker listens on no port of a known protocol; say which with --frame-port PORT=PROTO")

// kindProtos are the protocols of brokers that speak one only.
var kindProtos = map[string]frame.Proto{"nats": frame.NATS, "mosquitto": frame.MQTT, "redis": frame.Redis}

// defaultFramePorts are the target's listeners on well-known ports; else,
// for a broker that speaks one protocol and listens on one port, that port.
func defaultFramePorts(p *process.Process) (map[uint16]frame.Proto, error) {
	ls, err := process.Listeners(p.PID)
	if err != nil {
		return nil, fmt.Errorf("record: --match frame: the broker's ports: %w", err)
	}
	all := process.Ports(ls)
	ports := map[uint16]frame.Proto{}
	for _, port := range all {
		if proto, err := frame.ParseProto(process.Protocols[port]); err == nil {
			ports[port] = proto
		}
	}
	if proto, ok := kindProtos[process.Kind(p)]; ok && len(ports) == 0 && len(all) == 1 {
		ports[all[0]] = proto
	}
	if len(ports) == 0 {
		return nil, ErrNoFramePorts
	}
	return ports, nil
}

// portNames is the ports' table as meta.json records it: "4222": "nats".
func portNames(ports map[uint16]frame.Proto) map[string]string {
	if len(ports) == 0 {
		return nil
	}
	out := map[string]string{}
	for p, proto := range ports {
		out[strconv.Itoa(int(p))] = proto.String()
	}
	return out
}

// frameWarnings says in words, through warnings' add, what the frame
// parser could not parse.
func frameWarnings(add func(n uint64, format string, args ...any), f *recfile.FrameCounters) {
	add(f.Bad[0]+f.Bad[1], "--match frame: %d bad frames (%d read, %d written): %d bytes skipped to the next frame boundary, their messages not matched (meta.json probe.counters.frame)",
		f.Bad[0]+f.Bad[1], f.Bad[0], f.Bad[1], f.Skipped[0]+f.Skipped[1])
	add(f.Joined, "--match frame: %d connections were open before the recording: parsed from their first frame boundary on", f.Joined)
	add(f.TLS, "--match frame: %d connections are encrypted (TLS): %d bytes not parsed, their messages not matched", f.TLS, f.Encrypted[0]+f.Encrypted[1])
	add(f.Unparsed[0]+f.Unparsed[1], "--match frame: %d bytes on connections of the broker's other ports (no protocol given) were not parsed", f.Unparsed[0]+f.Unparsed[1])
	add(f.Lost, "--match frame: %d calls were not parsed: no room for their connection's parser state", f.Lost)
	add(f.Interleaved[0]+f.Interleaved[1], "--match frame: %d AMQP messages not matched: another content began on their connection before their body was complete",
		f.Interleaved[0]+f.Interleaved[1])
}
