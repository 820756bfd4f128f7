package load

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brokertrace/brokertrace/marker"
)

// The NATSRaw* functions are test and diagnostic helpers: they speak the
// NATS text protocol on a plain TCP connection so a caller controls exactly
// how message bytes are cut into write system calls, which a client library
// hides. The kernel-probe tests use them to show that many markers in one
// write, and a marker split across two writes, are all found.

const rawTimeout = 10 * time.Second

// NATSRawBurst connects to the NATS server at addr (host:port), then
// publishes one message per id on subject — each body the marker followed by
// filler up to size bytes — with all the PUB commands in ONE write system
// call. It returns once the server has processed them (PING/PONG), or an
// error if the kernel would not take the whole burst in a single write.
func NATSRawBurst(addr, subject string, ids []uint64, size int) error {
	if err := checkRaw(subject, size); err != nil {
		return err
	}
	if len(ids) == 0 {
		return configErrorf("raw burst: no ids given")
	}
	body := make([]byte, size)
	fillBody(body)
	var burst []byte
	for _, id := range ids {
		marker.Put(body, id)
		burst = appendPub(burst, subject, body)
	}
	c, err := rawConnect(addr)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	// Room for the whole burst in the socket buffer is what lets one
	// non-blocking write take all of it.
	_ = c.conn.SetWriteBuffer(len(burst) + 64<<10)
	if err := writeOnce(c.conn, burst); err != nil {
		return fmt.Errorf("raw burst of %d messages (%d bytes) to %s: %w", len(ids), len(burst), addr, err)
	}
	return c.ping()
}

// NATSRawSplitMarker publishes one message with the given id like
// NATSRawBurst, but cuts it into two writes: the first ends after cut bytes
// of the marker (1 ≤ cut < marker.Len), the second, after pause, carries the
// rest of the message.
func NATSRawSplitMarker(addr, subject string, id uint64, size, cut int, pause time.Duration) error {
	if err := checkRaw(subject, size); err != nil {
		return err
	}
	if cut < 1 || cut >= marker.Len {
		return configErrorf("split marker: cut %d must be between 1 and %d bytes into the marker", cut, marker.Len-1)
	}
	body := make([]byte, size)
	fillBody(body)
	marker.Put(body, id)
	msg := appendPub(nil, subject, body)
	at := len(msg) - len(body) - 2 + cut // PUB line, then cut bytes of the body
	c, err := rawConnect(addr)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	if err := writeOnce(c.conn, msg[:at]); err != nil {
		return fmt.Errorf("split marker first write to %s: %w", addr, err)
	}
	time.Sleep(pause)
	if err := writeOnce(c.conn, msg[at:]); err != nil {
		return fmt.Errorf("split marker second write to %s: %w", addr, err)
	}
	return c.ping()
}

func checkRaw(subject string, size int) error {
	if subject == "" || strings.ContainsAny(subject, " \t\r\n") {
		return configErrorf("raw NATS: subject %q must be non-empty without whitespace", subject)
	}
	if size < marker.Len {
		return configErrorf("raw NATS: size %d bytes is too small: must be ≥ %d for the marker", size, marker.Len)
	}
	return nil
}

func appendPub(dst []byte, subject string, body []byte) []byte {
	dst = append(dst, "PUB "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, body...)
	return append(dst, "\r\n"...)
}

type rawConn struct {
	conn *net.TCPConn
	r    *bufio.Reader
	addr string
}

// rawConnect dials, reads the server's INFO and completes the handshake
// (CONNECT, then PING/PONG) so that later writes carry only the messages.
func rawConnect(addr string) (*rawConn, error) {
	conn, err := net.DialTimeout("tcp", addr, rawTimeout)
	if err != nil {
		return nil, unreachableErrorf("cannot connect to NATS server at %s: %v", addr, err)
	}
	c := &rawConn{conn: conn.(*net.TCPConn), r: bufio.NewReader(conn), addr: addr}
	_ = c.conn.SetDeadline(time.Now().Add(rawTimeout))
	line, err := c.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		conn.Close()
		return nil, fmt.Errorf("%s did not greet with NATS INFO (got %q, %v)", addr, strings.TrimSpace(line), err)
	}
	if err := writeOnce(c.conn, []byte("CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"brokertrace-raw\"}\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.ping(); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// ping sends PING and waits for PONG, failing on a -ERR from the server.
func (c *rawConn) ping() error {
	if err := writeOnce(c.conn, []byte("PING\r\n")); err != nil {
		return err
	}
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("NATS server at %s: waiting for PONG: %w", c.addr, err)
		}
		switch line = strings.TrimSpace(line); {
		case line == "PONG":
			return nil
		case line == "PING":
			if err := writeOnce(c.conn, []byte("PONG\r\n")); err != nil {
				return err
			}
		case strings.HasPrefix(line, "-ERR"):
			return fmt.Errorf("NATS server at %s: %s", c.addr, line)
		}
	}
}

// writeOnce puts b on the socket with exactly one successful write(2) (a
// would-block attempt that wrote nothing is retried when writable) and fails
// if the kernel took only part of it: the helpers' whole point is controlling
// write boundaries, and net.Conn.Write would silently loop.
func writeOnce(conn *net.TCPConn, b []byte) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var n int
	var werr error
	err = raw.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Write(int(fd), b)
			if werr == unix.EINTR {
				continue
			}
			return werr != unix.EAGAIN
		}
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	if n != len(b) {
		return fmt.Errorf("kernel took %d of %d bytes in one write; raise net.core.wmem_max or send fewer bytes", n, len(b))
	}
	return nil
}
