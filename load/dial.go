package load

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What the drivers other than NATS share: the first-asynchronous-error slot,
// a context-aware dialer that keeps the real dial error, and URL option
// parsing with one-line errors.

// connectTimeout bounds connecting and each protocol handshake.
const connectTimeout = 5 * time.Second

// asyncErr keeps the first error a connection reports from its library's
// goroutines. Publish checks it on every message, hence the atomic fast path.
type asyncErr struct {
	has atomic.Bool
	mu  sync.Mutex
	err error
}

func (a *asyncErr) set(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
		a.has.Store(true)
	}
	a.mu.Unlock()
}

func (a *asyncErr) get() error {
	if !a.has.Load() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// netDialer dials TCP honouring the run's context (Ctrl-C during a slow
// connect returns at once) and remembers the last dial error, which client
// libraries tend to replace by something generic.
type netDialer struct {
	ctx     context.Context
	mu      sync.Mutex
	lastErr error
}

func (d *netDialer) dial(network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: connectTimeout}
	c, err := nd.DialContext(d.ctx, network, addr)
	if err != nil {
		d.mu.Lock()
		d.lastErr = err
		d.mu.Unlock()
	}
	return c, err
}

func (d *netDialer) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastErr
}

// protocolNames name a protocol in the errors of a failed connect.
type protocolNames struct {
	proto    string // "MQTT", in "MQTT handshake of producer …"
	broker   string // "MQTT broker", in "cannot connect producer to MQTT broker at …"
	server   string // "it" or "redis-server", in "(is it running and listening there?)"
	listener string // "an MQTT 3.1.1 listener", in "(is it an MQTT 3.1.1 listener?)"
}

// connectFailure explains why a client library could not connect, checking
// causes in the order a user should: a cancelled run; the broker's own
// refusal, which only the protocol can tell from err (nil when it is
// none); no TCP connection, which this dialer saw even when the library
// reports something generic; else a failed handshake, most likely another
// protocol listening on that port.
func (d *netDialer) connectFailure(p protocolNames, role, addr string, err, refusal error) error {
	if e := d.ctx.Err(); e != nil {
		return e
	}
	if refusal != nil {
		return refusal
	}
	if e := d.err(); e != nil {
		return unreachableErrorf("cannot connect %s to %s at %s: %v (is %s running and listening there?)", role, p.broker, addr, e, p.server)
	}
	return unreachableErrorf("%s handshake of %s with %s failed: %v (is it %s?)", p.proto, role, addr, err, p.listener)
}

// hostPort is u's host:port, with the protocol's default port when the URL
// names none.
func hostPort(u *url.URL, defPort string) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), defPort)
}

// urlOptions returns u's query parameters after checking that each is one of
// known and given at most once, so a typo fails the run before it starts
// instead of being silently ignored.
func urlOptions(u *url.URL, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, configErrorf("broker URL %s: query %q: %v", u.Redacted(), u.RawQuery, err)
	}
	for k, v := range q {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return nil, configErrorf("broker URL %s: unknown option %q: %s URLs take no options", u.Redacted(), k, u.Scheme)
			}
			return nil, configErrorf("broker URL %s: unknown option %q; %s URLs take: %s", u.Redacted(), k, u.Scheme, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return nil, configErrorf("broker URL %s: option %q given %d times", u.Redacted(), k, len(v))
		}
	}
	return q, nil
}

// oneOf checks an option's value against its allowed values; "" gives def.
func oneOf(u *url.URL, q url.Values, key, def string, allowed ...string) (string, error) {
	v := q.Get(key)
	if v == "" {
		return def, nil
	}
	if !slices.Contains(allowed, v) {
		return "", configErrorf("broker URL %s: %s=%q is invalid: use one of %s", u.Redacted(), key, v, strings.Join(allowed, ", "))
	}
	return v, nil
}

// destination is the URL path without its leading slash (unescaped), or
// subject when the URL has no path.
func destination(u *url.URL, subject string) string {
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		return p
	}
	return subject
}

// credentials returns the URL's user and password ("" when absent).
func credentials(u *url.URL) (user, pass string) {
	if u.User == nil {
		return "", ""
	}
	pass, _ = u.User.Password()
	return u.User.Username(), pass
}

// clientName names a connection in the broker's client list, unique per
// process and connection so two runs (or two roles) never collide on
// brokers that key state on it (MQTT client ids).
func clientName(role string) string {
	return fmt.Sprintf("brokertrace-%s-%d-%d", role, os.Getpid(), connSeq.Add(1))
}

var connSeq atomic.Uint64

// loginName describes a login for an error message.
func loginName(user string) string {
	if user == "" {
		return "without a user name"
	}
	return fmt.Sprintf("as user %q", user)
}

// URLForms documents the broker URL of every driver, one per line, for the
// CLI's help. Options go in the query; a URL path, where a driver takes
// one, overrides the run's subject as destination.
const URLForms = `nats://HOST[:4222]                                   subject = NATS subject
mqtt://[USER:PASS@]HOST[:1883][/TOPIC][?qos=0|1&version=3.1.1|5]
                                                     MQTT 3.1.1 (or 5); qos 1: broker and consumer acknowledge every message
stomp://[USER:PASS@]HOST[:61613][/queue/NAME|/topic/NAME][?ack=auto|client|client-individual&vhost=V]
                                                     STOMP; default destination /queue/SUBJECT
amqp://[USER:PASS@]HOST[:5672][/VHOST][?ack=auto|manual&prefetch=N&confirm=0|1&exchange=NAME]
                                                     AMQP 0-9-1; queue = subject (an existing one as it is, else
                                                     declared auto-delete); confirm=1: publisher confirms;
                                                     exchange: routing key = subject, a queue per consumer (fan-out)
redis://[[USER]:PASS@]HOST[:6379][/CHANNEL][?pipeline=N]
                                                     Redis pub/sub; default channel = subject; pipeline: N PUBLISH
                                                     sent at once, then their N replies awaited (redis-benchmark -P)
tcp://HOST:PORT[?framing=len|line]                   raw TCP to a relay that forwards every frame to its other connections`
