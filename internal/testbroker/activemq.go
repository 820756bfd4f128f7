package testbroker

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Debian's activemq package: the launcher jar (its lib/ and lib/optional/
// next to it hold the broker) and the Java runtime it depends on.
const (
	ActiveMQHome = "/usr/share/activemq"
	ActiveMQJar  = ActiveMQHome + "/bin/activemq.jar"
	JavaBin      = "/usr/bin/java"
)

// The one user StartActiveMQ's broker accepts.
const (
	ActiveMQUser     = "brokertrace"
	ActiveMQPassword = "brokertrace-secret"
)

// ActiveMQ is a running ActiveMQ 5 broker: in-memory store, no JMX, a STOMP
// connector on a loopback port the broker chose, and authentication required
// (ActiveMQUser / ActiveMQPassword). Its configuration lives in a directory
// of its own, independent of /etc/activemq and /var/lib/activemq.
//
// There is no MQTT connector: Debian's activemq package does not depend on
// the MQTT codec (libmqtt-client-java), so its MQTT transport fails every
// connection with NoClassDefFoundError.
type ActiveMQ struct {
	*Process       // the JVM
	STOMPAddr      string
	User, Password string
}

// STOMPURL is the stomp:// URL of destination (e.g. "/queue/x") with the
// broker's credentials.
func (a *ActiveMQ) STOMPURL(destination string) string {
	u := url.URL{Scheme: "stomp", User: url.UserPassword(a.User, a.Password), Host: a.STOMPAddr, Path: destination}
	return u.String()
}

// StartActiveMQ runs an ActiveMQ broker and waits until its STOMP connector
// listens (a few seconds); it is killed at cleanup.
func StartActiveMQ(tb testing.TB) *ActiveMQ {
	tb.Helper()
	need(tb, ActiveMQJar)
	need(tb, JavaBin)
	a, err := LaunchActiveMQ()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Stop)
	return a
}

// activemqListenRE matches the broker's "Listening for connections at:
// stomp://localhost:41403" log line.
var activemqListenRE = regexp.MustCompile(`Listening for connections at: stomp://[^:/\s]+:(\d+)`)

// activemqXML is the broker's configuration; its arguments are the data
// directory and the one user's name and password. Port 0: the broker binds
// free ports itself and logs them, so no race with other processes picking
// ports.
const activemqXML = `<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="brokertrace" useJmx="false"
      persistent="false" useShutdownHook="false" dataDirectory="%s">
    <plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="false">
        <users>
          <authenticationUser username="%s" password="%s" groups="users,admins"/>
        </users>
      </simpleAuthenticationPlugin>
    </plugins>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:0"/>
    </transportConnectors>
  </broker>
</beans>
`

// activemqLog4j sends the broker's log to stdout, where readiness is read:
// Debian builds ActiveMQ against log4j 1.2, which reads log4j.properties
// from the classpath (the conf directory).
const activemqLog4j = `log4j.rootLogger=INFO, stdout
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%-5p | %m%n
`

// activemqArgs is what Debian's /usr/bin/activemq runs, minus its daemon
// handling, for a broker whose base directory is dir.
func activemqArgs(dir, conf, data string) []string {
	return []string{"-Xms128m", "-Xmx512m",
		// IPv4 sockets, like the other test brokers, rather than
		// IPv4-mapped IPv6 ones.
		"-Djava.net.preferIPv4Stack=true",
		"--add-reads=java.xml=java.logging",
		"--add-opens", "java.base/java.security=ALL-UNNAMED",
		"--add-opens", "java.base/java.net=ALL-UNNAMED",
		"--add-opens", "java.base/java.lang=ALL-UNNAMED",
		"--add-opens", "java.base/java.util=ALL-UNNAMED",
		"--add-opens", "java.naming/javax.naming.spi=ALL-UNNAMED",
		"--add-opens", "java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
		"--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
		"--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
		"-Dactivemq.classpath=" + conf,
		"-Dactivemq.home=" + ActiveMQHome,
		"-Dactivemq.base=" + dir,
		"-Dactivemq.conf=" + conf,
		"-Dactivemq.data=" + data,
		"-jar", ActiveMQJar, "start", "xbean:file:" + filepath.Join(conf, "activemq.xml"),
	}
}

// LaunchActiveMQ is StartActiveMQ for callers without a testing.TB; they must
// call Stop.
func LaunchActiveMQ() (*ActiveMQ, error) {
	dir, err := mkTemp("activemq")
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "conf")
	data := filepath.Join(dir, "data")
	err = fillDir(dir, []string{"conf", "data"}, map[string]string{
		"conf/activemq.xml":     fmt.Sprintf(activemqXML, data, ActiveMQUser, ActiveMQPassword),
		"conf/log4j.properties": activemqLog4j,
	})
	if err != nil {
		return nil, err
	}
	a := &ActiveMQ{User: ActiveMQUser, Password: ActiveMQPassword}
	cmd := exec.Command(JavaBin, activemqArgs(dir, conf, data)...)
	cmd.Dir = dir
	p, err := startProcess("activemq", cmd, dir, func(line string) bool {
		return activemqListenRE.MatchString(line)
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a.Process = p
	line, err := p.waitReady(60 * time.Second)
	if err != nil {
		p.Stop()
		return nil, err
	}
	a.STOMPAddr = net.JoinHostPort("127.0.0.1", activemqListenRE.FindStringSubmatch(line)[1])
	if err := waitListening(p, a.STOMPAddr, 10*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return a, nil
}
