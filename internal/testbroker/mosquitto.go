package testbroker

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Programs of Debian's mosquitto package.
const (
	MosquittoBin       = "/usr/sbin/mosquitto"
	MosquittoPasswdBin = "/usr/bin/mosquitto_passwd"
)

// Mosquitto is a running mosquitto MQTT broker.
type Mosquitto struct {
	*Process
	Addr string // host:port of its MQTT listener
	// User and Password are the first "user:password" given to
	// StartMosquitto ("" when the broker allows anonymous clients).
	User, Password string
}

// URL is the mqtt:// URL of the broker, with the first user's credentials.
func (m *Mosquitto) URL() string {
	u := url.URL{Scheme: "mqtt", Host: m.Addr}
	if m.User != "" {
		u.User = url.UserPassword(m.User, m.Password)
	}
	return u.String()
}

// StartMosquitto runs mosquitto on a free loopback port, without
// persistence, and waits until it accepts connections; it is killed at
// cleanup. With users ("name:password"), only those may connect; without,
// anyone may.
func StartMosquitto(tb testing.TB, users ...string) *Mosquitto {
	tb.Helper()
	need(tb, MosquittoBin)
	dir := tb.TempDir()
	m, err := retryPorts(func() (*Mosquitto, error) { return launchMosquitto(dir, users) })
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Stop)
	return m
}

func launchMosquitto(dir string, users []string) (*Mosquitto, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	m := &Mosquitto{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	conf := []string{
		fmt.Sprintf("listener %d 127.0.0.1", ports[0]),
		"persistence false",
		// QoS 1 messages for a consumer briefly descheduled are queued
		// without bound (the default drops past 1000): a test's load
		// loses nothing on a busy machine.
		"max_queued_messages 0",
		"log_dest stderr", // unbuffered: the readiness line arrives at once
		"log_type error", "log_type warning", "log_type notice", "log_type information",
		// Stay root: dropping to the mosquitto user would lose access
		// to the test's files.
		"user root",
	}
	if len(users) == 0 {
		conf = append(conf, "allow_anonymous true")
	} else {
		pw := filepath.Join(dir, "passwd")
		for i, up := range users {
			name, pass, ok := strings.Cut(up, ":")
			if !ok || name == "" {
				return nil, fmt.Errorf("mosquitto user %q is not NAME:PASSWORD", up)
			}
			if i == 0 {
				m.User, m.Password = name, pass
			}
			args := []string{"-b", pw, name, pass}
			if i == 0 {
				args = append([]string{"-c"}, args...)
			}
			if out, err := exec.Command(MosquittoPasswdBin, args...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("mosquitto_passwd: %v: %s", err, out)
			}
		}
		conf = append(conf, "allow_anonymous false", "password_file "+pw)
	}
	cf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(cf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess("mosquitto", exec.Command(MosquittoBin, "-c", cf), "", func(line string) bool {
		return strings.Contains(line, " running")
	})
	if err != nil {
		return nil, err
	}
	m.Process = p
	if err := p.waitServing(m.Addr, 15*time.Second); err != nil {
		return nil, err
	}
	return m, nil
}
