package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// natsDriver is a NATS connection through nats.go, the client applications
// use, so the broker sees the same protocol traffic as from a real producer
// or consumer.
type natsDriver struct {
	nc      *nats.Conn
	subject string
	sub     *nats.Subscription

	mu  sync.Mutex
	err error // first asynchronous error
}

// ctxDialer makes nats.Connect honour the run's context while dialling, so
// Ctrl-C during a slow connect returns at once.
// It also keeps the dial error, which nats.go replaces by a generic "no
// servers available".
type ctxDialer struct {
	ctx     context.Context
	d       net.Dialer
	lastErr error
}

func (c *ctxDialer) Dial(network, address string) (net.Conn, error) {
	conn, err := c.d.DialContext(c.ctx, network, address)
	if err != nil {
		c.lastErr = err
	}
	return conn, err
}

const natsConnectTimeout = 5 * time.Second

func dialNATS(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	d := &natsDriver{subject: opts.Subject}
	dialer := &ctxDialer{ctx: ctx, d: net.Dialer{Timeout: natsConnectTimeout}}
	nc, err := nats.Connect(u.String(),
		nats.Name("brokertrace-load-"+opts.Role),
		nats.Timeout(natsConnectTimeout),
		nats.SetCustomDialer(dialer),
		// A run that silently survived a broker restart would report
		// latencies and losses of two different brokers as one; losing the
		// connection ends the run instead, with the error reported.
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			d.setErr(fmt.Errorf("NATS %s connection: %w", opts.Role, err))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				d.setErr(fmt.Errorf("NATS %s connection lost: %w", opts.Role, err))
			}
		}),
	)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, nats.ErrNoServers) && dialer.lastErr != nil {
			err = dialer.lastErr
		}
		return nil, unreachableErrorf("cannot connect %s to NATS broker at %s: %v (is nats-server running and listening there?)", opts.Role, u.Host, err)
	}
	if max := nc.MaxPayload(); int64(opts.Size) > max {
		nc.Close()
		return nil, configErrorf("message size %d bytes exceeds the NATS broker's max_payload of %d bytes at %s", opts.Size, max, u.Host)
	}
	d.nc = nc
	return d, nil
}

func (d *natsDriver) setErr(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

func (d *natsDriver) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Publish hands body to nats.go, which copies it into its write buffer
// without allocating; a background flusher writes it to the socket.
func (d *natsDriver) Publish(body []byte) error {
	if err := d.nc.Publish(d.subject, body); err != nil {
		if e := d.Err(); e != nil {
			return e
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("connection to the NATS broker lost: %w", err)
		}
		return err
	}
	return nil
}

// markerHeader carries the marker of payload "same" (see PublishMarked).
const markerHeader = "Bt-Id"

// PublishMarked publishes body with the marker in a header (HPUB): the
// payload is the body alone, alike for every message, as matching by
// frame fingerprints it, while the marker still names the message.
func (d *natsDriver) PublishMarked(body, marker []byte) error {
	m := nats.NewMsg(d.subject)
	m.Data = body
	m.Header.Set(markerHeader, string(marker))
	if err := d.nc.PublishMsg(m); err != nil {
		if e := d.Err(); e != nil {
			return e
		}
		return err
	}
	return nil
}

func (d *natsDriver) Subscribe(handler func(body []byte)) error {
	sub, err := d.nc.Subscribe(d.subject, func(m *nats.Msg) {
		if id := m.Header.Get(markerHeader); id != "" {
			handler([]byte(id)) // a message of payload "same": the marker names it
			return
		}
		handler(m.Data)
	})
	if err != nil {
		return configErrorf("cannot subscribe to NATS subject %q: %v", d.subject, err)
	}
	// nats.go's default pending limits (64k messages) would make a briefly
	// descheduled consumer drop messages inside this process; the load
	// generator's handler is trivial, so let the queue grow instead and keep
	// losses to what the broker itself does.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return fmt.Errorf("NATS subscription pending limits: %w", err)
	}
	d.sub = sub
	// The SUB is only in effect once the server has processed it: a
	// PING/PONG round trip guarantees that.
	if err := d.nc.FlushTimeout(natsConnectTimeout); err != nil {
		return fmt.Errorf("NATS subscribe to %q not confirmed by the broker: %w", d.subject, err)
	}
	if err := d.nc.LastError(); err != nil {
		return configErrorf("NATS broker refused subscription to %q: %v", d.subject, err)
	}
	return nil
}

func (d *natsDriver) Flush(ctx context.Context) error {
	if err := d.nc.FlushWithContext(ctx); err != nil {
		if e := d.Err(); e != nil {
			return e
		}
		return fmt.Errorf("NATS flush: %w", err)
	}
	return nil
}

// Dropped must be read before Close: a closed subscription has no counters.
func (d *natsDriver) Dropped() int {
	if d.sub == nil {
		return 0
	}
	n, err := d.sub.Dropped()
	if err != nil {
		return 0
	}
	return n
}

func (d *natsDriver) Close() error {
	if d.sub != nil {
		_ = d.sub.Unsubscribe()
	}
	d.nc.Close()
	return nil
}
