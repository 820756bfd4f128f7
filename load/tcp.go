package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// tcpDriver speaks no broker protocol: it writes framed message bodies on
// one TCP connection and reads framed bodies on another, for a user's own
// protocol or a relay in front of one.
//
// URL: tcp://host:port[?framing=len|line]. framing=len (default) puts a
// 4-byte big-endian body length before each body; framing=line ends each
// body with '\n' (load's bodies never contain one).
//
// What the server at host:port must do: forward every frame it reads on one
// connection, unchanged, to its other connections (a relay or fan-out). The
// driver opens the consumer connection first and never writes on it, then
// the producer connection and never reads from it. There is no subscribe
// handshake, so the server must start forwarding to a connection as soon as
// it accepts it, and must accept connections in order (the consumer before
// the producer) — a server that accepts the producer and reads its data
// before it has the consumer loses the first messages, which the run then
// counts as missing.
type tcpDriver struct {
	conn *net.TCPConn
	line bool
	role string
	host string
	errs asyncErr

	buf     []byte // producer: one frame, reused
	closing atomic.Bool
}

// tcpMaxFrame bounds an announced frame length, so a peer that is not
// speaking length-prefixed framing fails the run instead of making it
// allocate gigabytes.
const tcpMaxFrame = 64 << 20

func dialTCP(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	q, err := urlOptions(u, "framing")
	if err != nil {
		return nil, err
	}
	framing, err := oneOf(u, q, "framing", "len", "len", "line")
	if err != nil {
		return nil, err
	}
	if u.Port() == "" {
		return nil, configErrorf("broker URL %s has no port: raw TCP has no default, give tcp://HOST:PORT", u.Redacted())
	}
	if u.Path != "" && u.Path != "/" {
		return nil, configErrorf("broker URL %s: raw TCP has no destinations, drop the path %q", u.Redacted(), u.Path)
	}
	if opts.Size > tcpMaxFrame {
		return nil, configErrorf("message size %d bytes exceeds the raw TCP driver's frame limit of %d bytes", opts.Size, tcpMaxFrame)
	}
	dialer := &netDialer{ctx: ctx}
	c, err := dialer.dial("tcp", u.Host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unreachableErrorf("cannot connect %s to %s: %v (is the relay running and listening there?)", opts.Role, u.Host, err)
	}
	d := &tcpDriver{conn: c.(*net.TCPConn), line: framing == "line", role: opts.Role, host: u.Host}
	_ = d.conn.SetNoDelay(true)
	if opts.Role == "producer" {
		d.buf = make([]byte, 0, opts.Size+4)
		// The producer never reads: a server writing to it would fill
		// the receive buffer unnoticed, so watch for that and for the
		// server closing the connection.
		go d.watchProducer()
	}
	return d, nil
}

// watchProducer turns anything the server does on the producer connection
// into an error: data (the server echoes instead of relaying) or EOF.
func (d *tcpDriver) watchProducer() {
	var b [1]byte
	n, err := d.conn.Read(b[:])
	if d.closing.Load() {
		return
	}
	if n > 0 {
		d.errs.set(fmt.Errorf("raw TCP server at %s sent data on the producer connection: it must relay frames to the other connections, not echo them", d.host))
		return
	}
	d.errs.set(fmt.Errorf("raw TCP producer connection to %s closed by the server: %v", d.host, err))
}

func (d *tcpDriver) Err() error { return d.errs.get() }

// Publish writes one frame with one write(2), built in a reused buffer: no
// allocation.
func (d *tcpDriver) Publish(body []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	b := d.buf[:0]
	if d.line {
		if bytes.IndexByte(body, '\n') >= 0 {
			return configErrorf("raw TCP line framing: message body contains a newline")
		}
		b = append(append(b, body...), '\n')
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	d.buf = b
	if _, err := d.conn.Write(b); err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		return fmt.Errorf("raw TCP %s connection to %s: %w", d.role, d.host, err)
	}
	return nil
}

// Subscribe starts reading frames; the connection is already open, which is
// all a relay offers as "subscribed" (see tcpDriver).
func (d *tcpDriver) Subscribe(handler func(body []byte)) error {
	go d.read(handler)
	return nil
}

func (d *tcpDriver) read(handler func(body []byte)) {
	r := bufio.NewReaderSize(d.conn, 64<<10)
	var frame []byte
	fail := func(err error) {
		if !d.closing.Load() {
			d.errs.set(err)
		}
	}
	for {
		if d.line {
			b, err := r.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A line longer than the buffer: collect it.
				frame = append(frame[:0], b...)
				for errors.Is(err, bufio.ErrBufferFull) && len(frame) <= tcpMaxFrame {
					b, err = r.ReadSlice('\n')
					frame = append(frame, b...)
				}
				b = frame
			}
			if err != nil {
				fail(d.readErr(err))
				return
			}
			handler(b[:len(b)-1])
			continue
		}
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			fail(d.readErr(err))
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > tcpMaxFrame {
			fail(fmt.Errorf("raw TCP server at %s announced a %d-byte frame (limit %d): is it relaying 4-byte big-endian length-prefixed frames unchanged?", d.host, n, tcpMaxFrame))
			return
		}
		if cap(frame) < int(n) {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(r, frame); err != nil {
			fail(d.readErr(err))
			return
		}
		handler(frame)
	}
}

func (d *tcpDriver) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("raw TCP consumer connection to %s closed by the server", d.host)
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("raw TCP server at %s sent a line over %d bytes: is it relaying newline-terminated frames?", d.host, tcpMaxFrame)
	}
	return fmt.Errorf("raw TCP consumer connection to %s: %v", d.host, err)
}

// Flush waits until the server's TCP stack has acknowledged every byte
// written (the socket's send queue, SIOCOUTQ, is empty): the most a protocol
// without replies can tell about the server having taken the messages.
func (d *tcpDriver) Flush(ctx context.Context) error {
	rc, err := d.conn.SyscallConn()
	if err != nil {
		return err
	}
	for {
		if err := d.errs.get(); err != nil {
			return err
		}
		var queued int
		var ierr error
		if err := rc.Control(func(fd uintptr) { queued, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
			return fmt.Errorf("raw TCP flush: %w", err)
		}
		if ierr != nil {
			return fmt.Errorf("raw TCP flush: SIOCOUTQ: %w", ierr)
		}
		if queued == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raw TCP server at %s has not acknowledged %d bytes: %w", d.host, queued, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Dropped is 0: nothing between the socket and the handler discards.
func (d *tcpDriver) Dropped() int { return 0 }

func (d *tcpDriver) Close() error {
	d.closing.Store(true)
	return d.conn.Close()
}
