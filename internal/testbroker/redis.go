package testbroker

import (
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisServerBin is where Debian's redis-server package installs the server.
const RedisServerBin = "/usr/bin/redis-server"

// Redis is a running redis-server.
type Redis struct {
	*Process
	Addr     string // host:port
	Password string // of the default user, when started with --requirepass
}

// URL is the redis:// URL of the server with channel as its path.
func (r *Redis) URL(channel string) string {
	u := url.URL{Scheme: "redis", Host: r.Addr, Path: "/" + channel}
	if r.Password != "" {
		u.User = url.UserPassword("", r.Password)
	}
	return u.String()
}

// StartRedis runs redis-server on a free loopback port with persistence off
// (an empty --save, --appendonly no) and waits until it accepts connections; it is
// killed at cleanup. extraArgs are added to the command line (e.g.
// "--requirepass", "secret", which also sets Password).
func StartRedis(tb testing.TB, extraArgs ...string) *Redis {
	tb.Helper()
	need(tb, RedisServerBin)
	dir := tb.TempDir()
	r, err := retryPorts(func() (*Redis, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		for i, a := range extraArgs {
			if a == "--requirepass" && i+1 < len(extraArgs) {
				r.Password = extraArgs[i+1]
			}
		}
		args := append([]string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir, "--logfile", ""}, extraArgs...)
		p, err := startProcess("redis-server", exec.Command(RedisServerBin, args...), "", func(line string) bool {
			return strings.Contains(line, "Ready to accept connections")
		})
		if err != nil {
			return nil, err
		}
		r.Process = p
		if err := p.waitServing(r.Addr, 15*time.Second); err != nil {
			return nil, err
		}
		return r, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r
}
