package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpDriver is an AMQP 0-9-1 connection (RabbitMQ) through amqp091-go, the
// client the RabbitMQ team maintains.
//
// URL: amqp://[user:password@]host[:port][/vhost][?ack=MODE&prefetch=N&confirm=0|1&exchange=NAME].
// The run's subject names a queue: the consumer declares it (non-durable,
// deleted with its last consumer) and consumes from it, the producer
// publishes transient messages to it through the default exchange. With
// exchange=NAME (an existing exchange: amq.direct, amq.topic) the producer
// publishes to that exchange with the subject as routing key, and each
// consumer binds a queue of its own (exclusive, server-named) with the
// subject as binding key: every consumer gets every message (fan-out). ack is
// the consumer's mode: auto (default: the broker forgets a message once
// sent) or manual (the consumer acknowledges each message); prefetch bounds
// unacknowledged deliveries with ack=manual (default 0: unbounded). confirm=1
// puts the producer's channel in confirm mode: the broker acknowledges every
// publish, and Flush waits for all confirms (a nack fails it).
type amqpDriver struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	queue    string // the subject: the queue, or with an exchange the routing key
	exchange string
	role     string
	host     string
	errs     asyncErr

	autoAck  bool
	prefetch int

	confirm   bool
	published int64 // producer goroutine only
	acked     atomic.Int64
	nacked    atomic.Int64
	confirmed chan struct{} // signalled on every confirmation

	closing atomic.Bool
}

// amqpOptions are the driver's own URL options.
type amqpOptions struct {
	autoAck  bool
	prefetch int
	confirm  bool
	exchange string
}

// dialAMQP checks the URL and subject before connecting, so that a
// configuration error never waits on the network, then connects and opens
// the channel.
func dialAMQP(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	o, err := parseAMQPOptions(u)
	if err != nil {
		return nil, err
	}
	if opts.Subject == "" || len(opts.Subject) > 255 {
		return nil, configErrorf("AMQP queue name %q is invalid: give a subject of 1..255 bytes", opts.Subject)
	}
	addr := hostPort(u, "5672")

	// The amqp091 URI without this driver's options.
	au := *u
	au.RawQuery = ""
	au.Host = addr
	uri, err := amqp.ParseURI(au.String())
	if err != nil {
		return nil, configErrorf("broker URL %s: %v", u.Redacted(), err)
	}
	d := &amqpDriver{queue: opts.Subject, exchange: o.exchange, role: opts.Role, host: addr, autoAck: o.autoAck, prefetch: o.prefetch, confirm: o.confirm}
	conn, err := connectAMQP(ctx, uri, addr, opts.Role)
	if err != nil {
		return nil, err
	}
	d.conn = conn
	go d.watch(conn.NotifyClose(make(chan *amqp.Error, 1)), "connection")
	if err := d.openChannel(); err != nil {
		conn.Close()
		return nil, err
	}
	return d, nil
}

// parseAMQPOptions reads ack, prefetch and confirm, refusing a prefetch
// without manual acks, where the broker would ignore it.
func parseAMQPOptions(u *url.URL) (amqpOptions, error) {
	q, err := urlOptions(u, "ack", "prefetch", "confirm", "exchange")
	if err != nil {
		return amqpOptions{}, err
	}
	ack, err := oneOf(u, q, "ack", "auto", "auto", "manual")
	if err != nil {
		return amqpOptions{}, err
	}
	confirm, err := oneOf(u, q, "confirm", "0", "0", "1")
	if err != nil {
		return amqpOptions{}, err
	}
	prefetch := 0
	if s := q.Get("prefetch"); s != "" {
		if prefetch, err = strconv.Atoi(s); err != nil || prefetch < 0 || prefetch > 65535 {
			return amqpOptions{}, configErrorf("broker URL %s: prefetch=%q is invalid: give 0..65535 messages", u.Redacted(), s)
		}
		if ack != "manual" {
			return amqpOptions{}, configErrorf("broker URL %s: prefetch only applies with ack=manual", u.Redacted())
		}
	}
	exchange := q.Get("exchange")
	if len(exchange) > 255 || q.Has("exchange") && exchange == "" {
		return amqpOptions{}, configErrorf("broker URL %s: exchange=%q is invalid: give an exchange name of 1..255 bytes", u.Redacted(), exchange)
	}
	return amqpOptions{autoAck: ack == "auto", prefetch: prefetch, confirm: confirm == "1", exchange: exchange}, nil
}

var amqpNames = protocolNames{proto: "AMQP", broker: "AMQP broker", server: "it", listener: "an AMQP 0-9-1 listener"}

// connectAMQP opens the connection through the run's dialer, so that a
// refused TCP connection is told apart from a refused login or another
// protocol on the port.
func connectAMQP(ctx context.Context, uri amqp.URI, addr, role string) (*amqp.Connection, error) {
	dialer := &netDialer{ctx: ctx}
	cfg := amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: amqp.NewConnectionProperties(),
		Dial: func(network, a string) (net.Conn, error) {
			c, err := dialer.dial(network, a)
			if err == nil {
				// amqp091 clears the deadline after the handshake.
				_ = c.SetDeadline(time.Now().Add(connectTimeout))
			}
			return c, err
		},
	}
	cfg.Properties.SetClientConnectionName(clientName(role))
	conn, err := amqp.DialConfig(uri.String(), cfg)
	if err != nil {
		return nil, dialer.connectFailure(amqpNames, role, addr, err, amqpRefusal(err, uri, addr, role))
	}
	return conn, nil
}

// openChannel opens the channel every message goes through and, for a
// producer asked for confirms, puts it in confirm mode.
func (d *amqpDriver) openChannel() error {
	ch, err := d.conn.Channel()
	if err != nil {
		return fmt.Errorf("AMQP %s channel on %s: %w", d.role, d.host, err)
	}
	d.ch = ch
	go d.watch(ch.NotifyClose(make(chan *amqp.Error, 1)), "channel")
	if !d.confirm || d.role != "producer" {
		return nil
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("AMQP broker at %s refused confirm mode: %w", d.host, err)
	}
	d.confirmed = make(chan struct{}, 1)
	// The confirmation channel must be drained at all times: amqp091
	// blocks its reader on it.
	go d.countConfirms(ch.NotifyPublish(make(chan amqp.Confirmation, 4096)))
	return nil
}

// countConfirms counts the broker's acks and nacks and wakes a waiting
// Flush after each.
func (d *amqpDriver) countConfirms(confirms <-chan amqp.Confirmation) {
	for c := range confirms {
		if c.Ack {
			d.acked.Add(1)
		} else {
			d.nacked.Add(1)
		}
		select {
		case d.confirmed <- struct{}{}:
		default:
		}
	}
}

// watch records why the broker closed the connection or channel.
func (d *amqpDriver) watch(c chan *amqp.Error, what string) {
	if e, ok := <-c; ok && e != nil && !d.closing.Load() {
		d.errs.set(fmt.Errorf("AMQP %s %s to %s closed by the broker: %s", d.role, what, d.host, e.Error()))
	}
}

func (d *amqpDriver) Err() error { return d.errs.get() }

// Publish writes the message's frames to the socket before returning (amqp091
// writes synchronously), so body is not kept. amqp091 allocates its frames.
func (d *amqpDriver) Publish(body []byte) error {
	return d.publish(amqp.Publishing{Body: body, DeliveryMode: amqp.Transient})
}

func (d *amqpDriver) publish(m amqp.Publishing) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	err := d.ch.PublishWithContext(context.Background(), d.exchange, d.queue, false, false, m)
	if err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		return fmt.Errorf("AMQP publish to queue %q at %s: %w", d.queue, d.host, err)
	}
	d.published++
	return nil
}

// amqpMarkerHeader carries the marker of payload "same" (see PublishMarked)
// in the message's headers table, a property of its content header.
const amqpMarkerHeader = "btid"

// PublishMarked publishes body with the marker in a header: the body, which
// matching by frame fingerprints, is alike for every message, while the
// marker still names the message.
func (d *amqpDriver) PublishMarked(body, marker []byte) error {
	return d.publish(amqp.Publishing{Body: body, DeliveryMode: amqp.Transient, Headers: amqp.Table{amqpMarkerHeader: string(marker)}})
}

// Subscribe declares the queue and returns once basic.consume-ok arrived:
// from then on every message routed to the queue is delivered here.
func (d *amqpDriver) Subscribe(handler func(body []byte)) error {
	queue, err := d.declare()
	if err != nil {
		return err
	}
	if !d.autoAck && d.prefetch > 0 {
		if err := d.ch.Qos(d.prefetch, 0, false); err != nil {
			return fmt.Errorf("AMQP prefetch %d at %s: %w", d.prefetch, d.host, err)
		}
	}
	deliveries, err := d.ch.Consume(queue, clientName(d.role), d.autoAck, false, false, false, nil)
	if err != nil {
		return configErrorf("AMQP broker at %s refused to consume from queue %q: %v", d.host, queue, err)
	}
	go func() {
		for m := range deliveries {
			if id, ok := m.Headers[amqpMarkerHeader].(string); ok {
				handler([]byte(id)) // a message of payload "same": the marker names it
			} else {
				handler(m.Body)
			}
			if !d.autoAck {
				if err := m.Ack(false); err != nil && !d.closing.Load() {
					d.errs.set(fmt.Errorf("AMQP ack to %s: %v", d.host, err))
				}
			}
		}
	}()
	return nil
}

// declare declares the queue the consumer consumes from: the run's, or
// with an exchange one of its own bound to the exchange by the subject.
// A queue of the run's name that exists is used as it is: an operator's
// durable or quorum queue, or a federated one, whose upstream copy must
// outlive the federation link's consumer (an auto-delete one went with
// it when the link paused, and the producer's messages were dropped until
// the link came back: 6 439 of 25 000 in one run).
func (d *amqpDriver) declare() (string, error) {
	if d.exchange == "" {
		if d.queueExists() {
			return d.queue, nil
		}
		if _, err := d.ch.QueueDeclare(d.queue, false, true, false, false, nil); err != nil {
			return "", configErrorf("AMQP broker at %s refused to declare queue %q: %v (a queue of that name with other properties exists? use another subject)", d.host, d.queue, err)
		}
		return d.queue, nil
	}
	q, err := d.ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return "", fmt.Errorf("AMQP broker at %s refused a queue of the consumer's own: %w", d.host, err)
	}
	if err := d.ch.QueueBind(q.Name, d.queue, d.exchange, false, nil); err != nil {
		return "", configErrorf("AMQP broker at %s refused to bind a queue to exchange %q with key %q: %v (no such exchange?)", d.host, d.exchange, d.queue, err)
	}
	return q.Name, nil
}

// queueExists asks the broker whether the run's queue exists, on a
// channel of its own: the broker closes the channel that asked for a queue
// it does not have.
func (d *amqpDriver) queueExists() bool {
	ch, err := d.conn.Channel()
	if err != nil {
		return false
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(d.queue, false, false, false, false, nil)
	return err == nil
}

// Flush waits for every confirm in confirm mode. Otherwise it makes a
// synchronous call (basic.qos, which changes nothing on a channel that does
// not consume) and waits for its answer: the broker handles a channel's
// methods in order, so the answer means every earlier publish was taken.
func (d *amqpDriver) Flush(ctx context.Context) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if d.confirm {
		for d.acked.Load()+d.nacked.Load() < d.published {
			select {
			case <-d.confirmed:
			case <-ctx.Done():
				if err := d.errs.get(); err != nil {
					return err
				}
				return fmt.Errorf("AMQP broker at %s confirmed %d of %d publishes: %w", d.host, d.acked.Load()+d.nacked.Load(), d.published, ctx.Err())
			}
		}
		if n := d.nacked.Load(); n > 0 {
			return fmt.Errorf("AMQP broker at %s nacked %d of %d publishes (it says it lost them)", d.host, n, d.published)
		}
		return nil
	}
	res := make(chan error, 1)
	go func() { res <- d.ch.Qos(0, 0, false) }()
	select {
	case err := <-res:
		if err != nil {
			if e := d.errs.get(); e != nil {
				return e
			}
			return fmt.Errorf("AMQP flush to %s: %w", d.host, err)
		}
		return nil
	case <-ctx.Done():
		if err := d.errs.get(); err != nil {
			return err
		}
		return fmt.Errorf("AMQP flush to %s: %w", d.host, ctx.Err())
	}
}

// Dropped is 0: amqp091 queues deliveries without bound rather than
// discarding.
func (d *amqpDriver) Dropped() int { return 0 }

func (d *amqpDriver) Close() error {
	d.closing.Store(true)
	_ = d.conn.CloseDeadline(time.Now().Add(2 * time.Second))
	return nil
}

// amqpRefusal is a refused login, if err is one (a failed SASL exchange
// is not: that is a client without a mechanism the broker offers).
func amqpRefusal(err error, uri amqp.URI, addr, role string) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) && ae != amqp.ErrSASL {
		return authErrorf("AMQP broker at %s refused %s login as user %q to vhost %q: %s (give amqp://USER:PASSWORD@%s/VHOST)", addr, role, uri.Username, uri.Vhost, ae.Reason, addr)
	}
	return nil
}
