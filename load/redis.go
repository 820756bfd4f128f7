package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// redisDriver is a Redis pub/sub connection through go-redis.
//
// URL: redis://[[user]:password@]host[:port][/CHANNEL][?pipeline=N]. The
// channel is the URL path, or the run's subject without one (unlike
// go-redis's own URLs the path is not a database number: pub/sub ignores
// databases). The producer sends PUBLISH and waits for its reply before the
// next message, as go-redis does (a request/response client): at rates near
// one message per round trip the producer falls behind and the run reports
// it as lateness. With pipeline=N it sends N at once and then waits for
// their N replies, as redis-benchmark -P N does: N messages are in flight
// together, and a message waits in the client until its batch is full (or
// the run's end flushes it), which a paced run reports as the latency it is.
// Redis keeps no pub/sub message for a subscriber that is not connected.
type redisDriver struct {
	cl      *redis.Client
	ps      *redis.PubSub
	pipe    redis.Pipeliner // nil without pipeline=N (N > 1)
	depth   int
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

// redisMaxPipeline bounds pipeline=N: Redis reads a client's commands
// 16 KiB at a time, and a batch far beyond what it takes in one read
// measures the client's buffer, not the broker.
const redisMaxPipeline = 1024

func dialRedis(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	q, err := urlOptions(u, "pipeline")
	if err != nil {
		return nil, err
	}
	depth := 1
	if s := q.Get("pipeline"); s != "" {
		if depth, err = strconv.Atoi(s); err != nil || depth < 1 || depth > redisMaxPipeline {
			return nil, configErrorf("broker URL %s: pipeline=%q is invalid: give 1..%d commands in flight", u.Redacted(), s, redisMaxPipeline)
		}
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
	d := &redisDriver{cl: cl, channel: channel, role: opts.Role, host: addr, depth: depth}
	if depth > 1 {
		d.pipe = cl.Pipeline()
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	// Connect (and authenticate) now: go-redis connects lazily. The
	// consumer's subscription has a connection of its own, so it is opened
	// here instead of a pool connection it would never use.
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
// Pipelined, it keeps a copy of body in the batch, and the batch's last
// message sends them all and waits for their replies.
func (d *redisDriver) Publish(body []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if d.pipe == nil {
		return d.publishErr(d.cl.Publish(d.ctx, d.channel, body).Err())
	}
	d.pipe.Publish(d.ctx, d.channel, slices.Clone(body))
	if d.pipe.Len() < d.depth {
		return nil
	}
	return d.exec()
}

// exec sends the pipeline's batch and waits for its replies; the first
// failed command is the error.
func (d *redisDriver) exec() error {
	_, err := d.pipe.Exec(d.ctx)
	return d.publishErr(err)
}

func (d *redisDriver) publishErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.ErrClosed) || isConnErr(err) {
		return fmt.Errorf("Redis %s connection to %s lost: %v", d.role, d.host, err)
	}
	return fmt.Errorf("Redis PUBLISH to %q at %s: %w", d.channel, d.host, err)
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

// Flush sends a pipeline's last, partial batch and waits for its replies;
// without one every PUBLISH already had its reply.
func (d *redisDriver) Flush(context.Context) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if d.pipe != nil && d.pipe.Len() > 0 {
		return d.exec()
	}
	return nil
}

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
