package load

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Driver is one client connection to a broker, speaking the broker's own
// protocol through its usual client library. A run opens two — one that only
// publishes and one that only subscribes — so the producer's pacing never
// waits on consumer work and vice versa.
//
// Keeping the interface this small is what lets MQTT, STOMP, AMQP, Redis and
// raw TCP drivers be added without touching the pacing, timing and reporting
// code.
// headerPublisher is a driver that can carry the marker in a message
// header instead of the body (payload "same": every body alike).
type headerPublisher interface {
	PublishMarked(body, marker []byte) error
}

type Driver interface {
	// Publish sends one message body to the run's destination. The caller
	// rewrites body for the next message as soon as Publish returns, so a
	// driver must copy (or finish writing) it before returning. It must not
	// allocate per call where the client library allows: it is on the
	// measured send path.
	Publish(body []byte) error

	// Subscribe delivers every message that arrives on the run's
	// destination to handler, on a goroutine of the driver's choosing (one
	// at a time). When Subscribe returns nil the subscription must already
	// be in effect at the broker, so that messages published afterwards
	// cannot be missed.
	Subscribe(handler func(body []byte)) error

	// Flush returns once the broker has taken everything published so far
	// (for NATS: a PING/PONG round trip after the buffered writes).
	Flush(ctx context.Context) error

	// Dropped is the number of messages the client library received but
	// discarded before they reached the handler (e.g. slow-consumer
	// limits), so that such losses are attributed, not just "missing".
	Dropped() int

	// Err returns the first asynchronous error the connection reported
	// (connection lost, protocol or permission error), or nil.
	Err() error

	// Close releases the connection. Messages in flight to the handler may
	// still be delivered while it runs.
	Close() error
}

// DialOptions says what a driver connection is for.
type DialOptions struct {
	// Subject is the destination: a NATS subject, an MQTT topic, a queue.
	Subject string
	// Size is the body size the run will publish; drivers reject sizes the
	// broker announces it cannot take, before the run starts.
	Size int
	// Role names the connection ("producer" or "consumer") in the broker's
	// client list and in error messages.
	Role string
}

// ErrAuth marks a broker that was reached but refused the credentials (or
// the user's access to the virtual host). It is a kind of its own, not
// ErrUnreachable: retrying later does not help, fixing the URL's user:password
// does. The CLI maps it to exit code 1 (the measurement could not be made),
// keeping 3 for a broker that is not there.
var ErrAuth = errors.New("broker refused the credentials")

// DialFunc connects to the broker at u. Errors must wrap ErrUnreachable when
// the broker could not be reached, ErrAuth when it refused the credentials and
// ErrConfig when the options are wrong, so callers can tell them apart.
type DialFunc func(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error)

// drivers maps a URL scheme to the driver that speaks it.
var drivers = map[string]DialFunc{
	"nats":  dialNATS,
	"mqtt":  dialMQTT,
	"stomp": dialSTOMP,
	"amqp":  dialAMQP,
	"redis": dialRedis,
	"tcp":   dialTCP,
}

// Schemes returns the URL schemes Run supports, sorted.
func Schemes() []string {
	s := make([]string, 0, len(drivers))
	for k := range drivers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// parseURL checks a broker URL and returns it with the driver for its scheme.
func parseURL(raw string) (*url.URL, DialFunc, error) {
	supported := strings.Join(Schemes(), ", ")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, nil, configErrorf("broker URL %q is not SCHEME://HOST:PORT (e.g. nats://127.0.0.1:4222); supported schemes: %s", raw, supported)
	}
	dial, ok := drivers[strings.ToLower(u.Scheme)]
	if !ok {
		return nil, nil, configErrorf("broker URL %q: unsupported scheme %q; supported schemes: %s", raw, u.Scheme, supported)
	}
	return u, dial, nil
}

// kindError tags an error with one of the package's error kinds while
// keeping the underlying message as the whole one-line text.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

func configErrorf(format string, args ...any) error {
	return &kindError{kind: ErrConfig, err: fmt.Errorf(format, args...)}
}

func unreachableErrorf(format string, args ...any) error {
	return &kindError{kind: ErrUnreachable, err: fmt.Errorf(format, args...)}
}

func authErrorf(format string, args ...any) error {
	return &kindError{kind: ErrAuth, err: fmt.Errorf(format, args...)}
}
