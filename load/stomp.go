package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// stompDriver is a STOMP connection (1.2, or the highest version the broker
// offers) through go-stomp.
//
// URL: stomp://[user:password@]host[:port][/DESTINATION][?ack=MODE&vhost=V].
// DESTINATION is the broker's destination name, e.g. /queue/orders or
// /topic/prices; without a path it is /queue/SUBJECT. ack is the consumer's
// acknowledgement mode: auto (default: the broker forgets a message once
// sent), client or client-individual (the consumer sends an ACK frame for
// every message, the broker keeps it until then). vhost is the CONNECT
// frame's host header, which RabbitMQ takes as the virtual host (default
// "/"; ActiveMQ ignores it).
type stompDriver struct {
	c    *stomp.Conn
	dest string
	ack  stomp.AckMode
	role string
	host string
	errs asyncErr

	sub     *stomp.Subscription
	closing atomic.Bool
	done    chan struct{} // closed when the delivery loop ended
}

const (
	// stompSendTimeout bounds how long a Send may wait for go-stomp's
	// writer: without it a Send blocked on a full queue while the
	// connection dies would hold go-stomp's lock forever.
	stompSendTimeout = 10 * time.Second
	// stompReceiptTimeout bounds the wait for a RECEIPT.
	stompReceiptTimeout = 30 * time.Second
)

// stompAuthRE recognises a refused login in the ERROR frame that answers
// CONNECT: brokers put free text there (RabbitMQ "Access refused for user",
// ActiveMQ "User name [x] or password is invalid").
var stompAuthRE = regexp.MustCompile(`(?i)access refused|password|authenticat|credential|login|not authori[sz]ed|unauthori[sz]ed|security`)

var stompNames = protocolNames{proto: "STOMP", broker: "STOMP broker", server: "it", listener: "a STOMP listener"}

func dialSTOMP(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	q, err := urlOptions(u, "ack", "vhost")
	if err != nil {
		return nil, err
	}
	ackName, err := oneOf(u, q, "ack", "auto", "auto", "client", "client-individual")
	if err != nil {
		return nil, err
	}
	ack := map[string]stomp.AckMode{"auto": stomp.AckAuto, "client": stomp.AckClient, "client-individual": stomp.AckClientIndividual}[ackName]
	dest := u.Path
	if dest == "" || dest == "/" {
		dest = "/queue/" + opts.Subject
	}
	if strings.ContainsAny(dest, "\r\n:") {
		return nil, configErrorf("STOMP destination %q is invalid: it must not contain ':' or line breaks", dest)
	}
	vhost := q.Get("vhost")
	if vhost == "" {
		vhost = "/"
	}
	addr := hostPort(u, "61613")

	dialer := &netDialer{ctx: ctx}
	conn, err := dialer.dial("tcp", addr)
	if err != nil {
		return nil, dialer.connectFailure(stompNames, opts.Role, addr, err, nil)
	}
	copts := []func(*stomp.Conn) error{
		stomp.ConnOpt.Host(vhost),
		stomp.ConnOpt.MsgSendTimeout(stompSendTimeout),
		stomp.ConnOpt.RcvReceiptTimeout(stompReceiptTimeout),
		stomp.ConnOpt.DisconnectReceiptTimeout(2 * time.Second),
		stomp.ConnOpt.Logger(quietLogger{}),
		stomp.ConnOpt.Header("client-id", clientName(opts.Role)),
	}
	user, pass := credentials(u)
	if user != "" {
		copts = append(copts, stomp.ConnOpt.Login(user, pass))
	}
	hctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := stomp.ConnectWithContext(hctx, conn, copts...)
	if err != nil {
		conn.Close()
		return nil, dialer.connectFailure(stompNames, opts.Role, addr, err, stompRefusal(err, addr, opts.Role, user))
	}
	return &stompDriver{c: c, dest: dest, ack: ack, role: opts.Role, host: addr}, nil
}

// stompErrorText is an ERROR frame's message header plus the first line of
// its body, where brokers put the details.
func stompErrorText(se stomp.Error) string {
	text := se.Message
	if body, _, _ := bytes.Cut(se.Frame.Body, []byte("\n")); len(bytes.TrimSpace(body)) > 0 {
		if b := strings.TrimSpace(string(body)); !strings.Contains(text, b) {
			text += ": " + b
		}
	}
	return text
}

func (d *stompDriver) Err() error { return d.errs.get() }

// Publish hands go-stomp a copy of body: go-stomp queues the frame for its
// writer goroutine, so the caller's buffer cannot be lent. That copy (and
// go-stomp's frame) are the allocations per message.
func (d *stompDriver) Publish(body []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if err := d.c.Send(d.dest, "", bytes.Clone(body)); err != nil {
		return d.sendError(err)
	}
	return nil
}

// sendError is the error of a failed SEND in words.
func (d *stompDriver) sendError(err error) error {
	if e := d.errs.get(); e != nil {
		return e
	}
	if errors.Is(err, stomp.ErrAlreadyClosed) || errors.Is(err, stomp.ErrClosedUnexpectedly) {
		return fmt.Errorf("STOMP %s connection to %s closed by the broker", d.role, d.host)
	}
	return fmt.Errorf("STOMP send to %s at %s: %w", d.dest, d.host, err)
}

// stompMarkerHeader carries the marker of payload "same" (see
// PublishMarked); a broker passes a SEND's own headers on to its MESSAGEs.
const stompMarkerHeader = "btid"

// PublishMarked sends body with the marker in a header: the body, which
// matching by frame fingerprints, is alike for every message, while the
// marker still names the message.
func (d *stompDriver) PublishMarked(body, marker []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if err := d.c.Send(d.dest, "", bytes.Clone(body), stomp.SendOpt.Header(stompMarkerHeader, string(marker))); err != nil {
		return d.sendError(err)
	}
	return nil
}

// Subscribe sends SUBSCRIBE and then waits for a RECEIPT of a later frame
// (see barrier): go-stomp cannot put a receipt on the SUBSCRIBE itself, and
// a broker answers one connection's frames in order.
func (d *stompDriver) Subscribe(handler func(body []byte)) error {
	sub, err := d.c.Subscribe(d.dest, d.ack)
	if err != nil {
		return fmt.Errorf("STOMP subscribe to %s at %s: %w", d.dest, d.host, err)
	}
	d.sub = sub
	d.done = make(chan struct{})
	go d.deliver(handler)
	if err := d.barrier(context.Background()); err != nil {
		if e := d.errs.get(); e != nil {
			err = e
		}
		return configErrorf("STOMP broker at %s refused the subscription to %s: %v", d.host, d.dest, err)
	}
	return nil
}

func (d *stompDriver) deliver(handler func(body []byte)) {
	defer close(d.done)
	for m := range d.sub.C {
		if m.Err != nil {
			if !d.closing.Load() {
				d.errs.set(fmt.Errorf("STOMP %s connection to %s: %v", d.role, d.host, m.Err))
			}
			return
		}
		if id := m.Header.Get(stompMarkerHeader); id != "" {
			handler([]byte(id)) // a message of payload "same": the marker names it
		} else {
			handler(m.Body)
		}
		if d.ack != stomp.AckAuto {
			if err := d.c.Ack(m); err != nil && !d.closing.Load() {
				d.errs.set(fmt.Errorf("STOMP ACK to %s: %v", d.host, err))
				return
			}
		}
	}
}

// barrier sends BEGIN and ABORT of an empty transaction, the second with a
// receipt, and waits for it: once the broker answers, it has processed every
// earlier frame of this connection. No message is sent, so no destination
// sees anything extra.
func (d *stompDriver) barrier(ctx context.Context) error {
	res := make(chan error, 1)
	go func() {
		tx, err := d.c.BeginWithError()
		if err == nil {
			err = tx.AbortWithReceipt()
		}
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(stompReceiptTimeout):
		return fmt.Errorf("no RECEIPT within %v", stompReceiptTimeout)
	}
}

func (d *stompDriver) Flush(ctx context.Context) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if err := d.barrier(ctx); err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		if errors.Is(err, stomp.ErrAlreadyClosed) || errors.Is(err, stomp.ErrClosedUnexpectedly) {
			return fmt.Errorf("STOMP %s connection to %s closed by the broker", d.role, d.host)
		}
		return fmt.Errorf("STOMP flush to %s: %w", d.host, err)
	}
	return nil
}

// Dropped is 0: go-stomp blocks its reader rather than discarding.
func (d *stompDriver) Dropped() int { return 0 }

func (d *stompDriver) Close() error {
	d.closing.Store(true)
	err := d.c.Disconnect()
	if err != nil {
		_ = d.c.MustDisconnect()
	}
	return nil
}

// quietLogger keeps go-stomp from printing to the process's stderr; the
// errors it logs reach the driver through return values and the
// subscription channel.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...interface{})   {}
func (quietLogger) Infof(string, ...interface{})    {}
func (quietLogger) Warningf(string, ...interface{}) {}
func (quietLogger) Errorf(string, ...interface{})   {}
func (quietLogger) Debug(string)                    {}
func (quietLogger) Info(string)                     {}
func (quietLogger) Warning(string)                  {}
func (quietLogger) Error(string)                    {}

// stompRefusal is the broker's ERROR frame in answer to CONNECT, if err
// carries one.
func stompRefusal(err error, addr, role, user string) error {
	var se stomp.Error
	if !errors.As(err, &se) || se.Frame == nil {
		return nil
	}
	text := stompErrorText(se)
	if stompAuthRE.MatchString(text) {
		return authErrorf("STOMP broker at %s refused %s login %s: %s (give stomp://USER:PASSWORD@%s/...)", addr, role, loginName(user), text, addr)
	}
	return fmt.Errorf("STOMP broker at %s refused the %s connection: %s", addr, role, text)
}
