package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// redisDriver is a Redis pub/sub connection through go-redis.
//
// URL: redis://[[user]:password@]host[:port][/CHANNEL]. The channel is the
// URL path, or the run's subject without one (unlike go-redis's own URLs the
// path is not a database number: pub/sub ignores databases). The producer
// sends PUBLISH and waits for its reply before the next message, as
// go-redis does (a request/response client): at rates near one message per
// round trip the producer falls behind and the run reports it as lateness.
// Redis keeps no pub/sub message for a subscriber that is not connected.
type redisDriver struct {
	cl      *redis.Client
	ps      *redis.PubSub
	channel string
	role    string
	host    string
	errs    asyncErr

	ctx     context.Context // ends with Close, unblocking the receive loop
	cancel  context.CancelFunc
	closing atomic.Bool
}

// redisCommandTimeout bounds one PUBLISH round trip: a broker stalled
// longer ends the run with an error rather than hanging it.
const redisCommandTimeout = 10 * time.Second

var redisNames = protocolNames{proto: "Redis", broker: "Redis", server: "redis-server", listener: "a Redis listener"}

func dialRedis(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	if _, err := urlOptions(u); err != nil {
		return nil, err
	}
	channel := destination(u, opts.Subject)
	if channel == "" {
		return nil, configErrorf("Redis channel is empty: give it as the URL path or the subject")
	}
	addr := hostPort(u, "6379")
	user, pass := credentials(u)
	dialer := &netDialer{ctx: ctx}
	cl := redis.NewClient(&redis.Options{
		Addr:     addr,
		Username: user,
		Password: pass,
		// RESP2: the protocol every Redis speaks; go-redis would otherwise
		// try HELLO 3 first.
		Protocol:   2,
		ClientName: clientName(opts.Role),
		// CLIENT SETINFO, which Redis before 7.2 answers with an error.
		DisableIdentity: true,
		// A failed command must fail the run, not be retried on a new
		// connection to a possibly restarted broker.
		MaxRetries:   -1,
		PoolSize:     1,
		DialTimeout:  connectTimeout,
		ReadTimeout:  redisCommandTimeout,
		WriteTimeout: redisCommandTimeout,
		Dialer: func(_ context.Context, network, a string) (net.Conn, error) {
			return dialer.dial(network, a)
		},
	})
	d := &redisDriver{cl: cl, channel: channel, role: opts.Role, host: addr}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	// Connect (and authenticate) now: go-redis connects lazily. The
	// consumer's subscription has a connection of its own, so it is opened
	// here instead of a pool connection it would never use.
	var err error
	if opts.Role == "consumer" {
		d.ps = cl.Subscribe(d.ctx)
		err = d.ps.Ping(ctx)
	} else {
		err = cl.Ping(ctx).Err()
	}
	if err != nil {
		d.Close()
		return nil, dialer.connectFailure(redisNames, opts.Role, addr, err, redisRefusal(err, addr, opts.Role, user))
	}
	return d, nil
}

func (d *redisDriver) Err() error { return d.errs.get() }

// Publish returns once Redis answered: go-redis writes the command and reads
// the reply, so body is not kept. go-redis allocates its command per call.
func (d *redisDriver) Publish(body []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if err := d.cl.Publish(d.ctx, d.channel, body).Err(); err != nil {
		if errors.Is(err, redis.ErrClosed) || isConnErr(err) {
			return fmt.Errorf("Redis %s connection to %s lost: %v", d.role, d.host, err)
		}
		return fmt.Errorf("Redis PUBLISH to %q at %s: %w", d.channel, d.host, err)
	}
	return nil
}

func isConnErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "connection reset")
}

// Subscribe returns once Redis confirmed the SUBSCRIBE.
func (d *redisDriver) Subscribe(handler func(body []byte)) error {
	if d.ps == nil {
		return fmt.Errorf("Redis %s connection cannot subscribe", d.role)
	}
	if err := d.ps.Subscribe(d.ctx, d.channel); err != nil {
		return fmt.Errorf("Redis SUBSCRIBE %q at %s: %w", d.channel, d.host, err)
	}
	wctx, cancel := context.WithTimeout(d.ctx, connectTimeout)
	defer cancel()
	for {
		m, err := d.ps.Receive(wctx)
		if err != nil {
			return fmt.Errorf("Redis SUBSCRIBE %q at %s not confirmed: %w", d.channel, d.host, err)
		}
		if s, ok := m.(*redis.Subscription); ok && s.Kind == "subscribe" && s.Channel == d.channel {
			break
		}
	}
	go func() {
		for {
			m, err := d.ps.ReceiveMessage(d.ctx)
			if err != nil {
				// go-redis would reconnect and resubscribe on the next
				// call; a run must not silently span two connections, so
				// the first error ends delivery.
				if !d.closing.Load() {
					d.errs.set(fmt.Errorf("Redis %s connection to %s lost: %v", d.role, d.host, err))
				}
				return
			}
			handler(stringBytes(m.Payload))
		}
	}()
	return nil
}

// stringBytes views s as bytes without copying; the handler only reads.
func stringBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Flush has nothing to wait for: every PUBLISH already had its reply.
func (d *redisDriver) Flush(context.Context) error { return d.errs.get() }

// Dropped is 0: the receive loop takes every message go-redis reads.
// Messages Redis itself discards (a subscriber over its output buffer limit
// is disconnected) are missing, and the disconnect is reported.
func (d *redisDriver) Dropped() int { return 0 }

func (d *redisDriver) Close() error {
	d.closing.Store(true)
	d.cancel()
	if d.ps != nil {
		_ = d.ps.Close()
	}
	return d.cl.Close()
}

// redisRefusal is a refused login, if err is one: Redis says so only in
// the text of its error reply, which differs between versions.
func redisRefusal(err error, addr, role, user string) error {
	if msg := err.Error(); strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "AUTH <password> called without any password") {
		return authErrorf("Redis at %s refused %s login %s: %s (give redis://[USER]:PASSWORD@%s)", addr, role, loginName(user), msg, addr)
	}
	return nil
}
