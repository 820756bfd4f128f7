package load

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/brokertrace/brokertrace/marker"
	"github.com/brokertrace/brokertrace/monotime"
)

// Payload kinds (Config.Payload).
const (
	PayloadFixed  = "fixed"  // the marker, then '.' filler: every body alike but for its id
	PayloadJSON   = "json"   // a JSON event, new per message, the marker last
	PayloadRandom = "random" // random bytes, new per message, the marker last
	// PayloadSame: every body alike ('.' filler), the marker in a header
	// (NATS, STOMP, AMQP, MQTT 5): identical payloads, each message still
	// named. A protocol with no header for it (Redis, MQTT 3.1.1) sends no
	// marker: each consumer names the messages by their order of arrival,
	// as these brokers keep one publisher's order (Result.NamedByOrder).
	PayloadSame = "same"
)

// Payloads are the payload kinds.
var Payloads = []string{PayloadFixed, PayloadJSON, PayloadRandom, PayloadSame}

// CheckPayload returns a configuration error unless p is a payload kind:
// for the commands that pass a kind on to a load before it runs.
func CheckPayload(p string) error {
	if slices.Contains(Payloads, p) {
		return nil
	}
	return configErrorf("payload %q is unknown: use %s", p, strings.Join(Payloads, ", "))
}

// fill writes message id's body. json and random bodies are new per
// message, as production traffic is (matching by frame fingerprints the
// payload), and end with the marker, so that the call that completes a
// message also completes its marker.
func (p *producer) fill(id uint64) {
	b := p.body
	switch p.cfg.Payload {
	case PayloadJSON:
		p.fillJSON(b[:len(b)-marker.Len], id)
	case PayloadRandom:
		for i := range len(b) - marker.Len {
			// No NUL: STOMP frames without content-length end at one.
			b[i] = byte(1 + p.rnd.IntN(255))
		}
	default:
		marker.Put(b, id)
		return
	}
	marker.Put(b[len(b)-marker.Len:], id)
}

var events = []string{"page_view", "add_to_cart", "checkout", "login", "search", "payment_authorised"}

// fillJSON writes a JSON event of exactly len(b) bytes: a timestamp, the
// sequence number, a user and session id, an event name and an amount,
// padded with a note of random letters; cut short if b is too small.
func (p *producer) fillJSON(b []byte, id uint64) {
	r := p.rnd
	j := append(b[:0], `{"ts":`...)
	j = strconv.AppendInt(j, monotime.Now(), 10)
	j = append(j, `,"seq":`...)
	j = strconv.AppendUint(j, id, 10)
	j = append(j, `,"user":"u-`...)
	j = strconv.AppendUint(j, r.Uint64N(1e6), 10)
	j = append(j, `","session":"`...)
	j = strconv.AppendUint(j, r.Uint64(), 16)
	j = append(j, `","event":"`...)
	j = append(j, events[r.IntN(len(events))]...)
	j = append(j, `","amount":`...)
	j = strconv.AppendFloat(j, float64(r.IntN(100000))/100, 'f', 2, 64)
	j = append(j, `,"note":"`...)
	const letters = "abcdefghijklmnopqrstuvwxyz "
	for len(j) < len(b)-2 {
		j = append(j, letters[r.IntN(len(letters))])
	}
	j = append(j, `"}`...)
	// j is b unless the event did not fit; then b holds its first bytes.
	copy(b, j)
}

// publish sends the body filled last; payload "same" carries its marker in
// a header, or — a protocol with no header for it (Redis, MQTT 3.1.1) — no
// marker at all: its consumers name the messages by their order.
func (p *producer) publish() error {
	if p.cfg.Payload != PayloadSame {
		return p.drv.Publish(p.body)
	}
	if h, ok := p.drv.(headerPublisher); ok {
		return h.PublishMarked(p.body[marker.Len:], p.body[:marker.Len])
	}
	return p.drv.Publish(p.body[marker.Len:])
}

// isFiller says whether body is payload "same"'s: filler alone.
func isFiller(body []byte) bool { return len(bytes.Trim(body, ".")) == 0 }
