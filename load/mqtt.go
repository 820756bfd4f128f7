package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// mqttDriver is an MQTT 3.1.1 connection through Eclipse Paho, the Go client
// applications use.
//
// URL: mqtt://[user:password@]host[:port][/topic][?qos=0|1][&version=3.1.1|5].
// The topic is the URL path, or the run's subject without one. qos
// (default 0) applies to both the publish and the subscription: 1 makes the
// broker acknowledge every message (PUBACK to the producer, PUBACK from the
// consumer), which is the broker's work the measurement then includes. QoS
// 2 is not offered. version=5 speaks MQTT 5.0 instead (mqtt5Driver).
type mqttDriver struct {
	c     mqtt.Client
	topic string
	qos   byte
	role  string
	host  string
	errs  asyncErr
}

// mqttMaxPayload is MQTT's largest remaining length minus the publish
// header for a short topic.
const mqttMaxPayload = 268435455 - 1024

var mqttNames = protocolNames{proto: "MQTT", broker: "MQTT broker", server: "it", listener: "an MQTT 3.1.1 listener"}

func dialMQTT(ctx context.Context, u *url.URL, opts DialOptions) (Driver, error) {
	q, err := urlOptions(u, "qos", "version")
	if err != nil {
		return nil, err
	}
	qos, err := oneOf(u, q, "qos", "0", "0", "1")
	if err != nil {
		return nil, err
	}
	version, err := oneOf(u, q, "version", "3.1.1", "3.1.1", "5")
	if err != nil {
		return nil, err
	}
	topic := destination(u, opts.Subject)
	if topic == "" || strings.ContainsAny(topic, "+#\x00") {
		return nil, configErrorf("MQTT topic %q is invalid: give a topic without the wildcards + and # (URL path or subject)", topic)
	}
	if opts.Size > mqttMaxPayload {
		return nil, configErrorf("message size %d bytes exceeds MQTT's maximum payload of about %d bytes", opts.Size, mqttMaxPayload)
	}
	addr := hostPort(u, "1883")
	if version == "5" {
		return dialMQTT5(ctx, u, opts, topic, qos[0]-'0', addr)
	}
	d := &mqttDriver{topic: topic, qos: qos[0] - '0', role: opts.Role, host: addr}

	dialer := &netDialer{ctx: ctx}
	o := mqtt.NewClientOptions()
	o.AddBroker("tcp://" + addr)
	o.SetClientID(clientName(opts.Role))
	o.SetProtocolVersion(4) // 3.1.1, no fallback to 3.1
	o.SetCleanSession(true)
	// A run that silently survived a reconnect would mix two broker
	// sessions and lose messages in between without saying so.
	o.SetAutoReconnect(false)
	o.SetConnectRetry(false)
	o.SetConnectTimeout(connectTimeout)
	o.SetWriteTimeout(30 * time.Second)
	o.SetKeepAlive(30 * time.Second)
	// Deliveries reach the handler one at a time, in order, on paho's
	// router goroutine, as Driver.Subscribe asks.
	o.SetOrderMatters(true)
	if user, pass := credentials(u); user != "" {
		o.SetUsername(user)
		o.SetPassword(pass)
	}
	o.SetCustomOpenConnectionFn(func(uri *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
		return dialer.dial("tcp", uri.Host)
	})
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		d.errs.set(fmt.Errorf("MQTT %s connection to %s lost: %v", opts.Role, addr, err))
	})
	d.c = mqtt.NewClient(o)
	tok := d.c.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		d.c.Disconnect(0)
		return nil, ctx.Err()
	}
	if err := tok.Error(); err != nil {
		return nil, dialer.connectFailure(mqttNames, opts.Role, addr, err, mqttRefusal(err, u, addr, opts.Role))
	}
	return d, nil
}

func (d *mqttDriver) Err() error { return d.errs.get() }

// Publish hands paho a copy of body: paho queues the packet for its writer
// goroutine (and, at QoS 1, keeps it until the PUBACK), so the caller's
// buffer cannot be lent. That copy is the one allocation per message.
func (d *mqttDriver) Publish(body []byte) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	tok := d.c.Publish(d.topic, d.qos, false, bytes.Clone(body))
	select {
	case <-tok.Done(): // failed at once (not connected) or QoS 0 already written
		if err := tok.Error(); err != nil {
			if e := d.errs.get(); e != nil {
				return e
			}
			return fmt.Errorf("MQTT publish to %s: %w", d.host, err)
		}
	default:
	}
	return nil
}

// Subscribe returns once the broker's SUBACK granted the subscription.
func (d *mqttDriver) Subscribe(handler func(body []byte)) error {
	tok := d.c.Subscribe(d.topic, d.qos, func(_ mqtt.Client, m mqtt.Message) { handler(m.Payload()) })
	if !tok.WaitTimeout(connectTimeout) {
		return fmt.Errorf("MQTT subscribe to %q at %s: no SUBACK within %v", d.topic, d.host, connectTimeout)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("MQTT subscribe to %q at %s: %w", d.topic, d.host, err)
	}
	if st, ok := tok.(*mqtt.SubscribeToken).Result()[d.topic]; !ok || st > 2 {
		return configErrorf("MQTT broker at %s refused the subscription to %q (SUBACK return code %#x): check the user's ACL", d.host, d.topic, st)
	}
	return nil
}

// Flush sends an UNSUBSCRIBE for a topic nobody uses and waits for its
// UNSUBACK: brokers handle one connection's packets in order, so the answer
// means every earlier PUBLISH was processed — without putting an extra
// message on any topic.
func (d *mqttDriver) Flush(ctx context.Context) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	tok := d.c.Unsubscribe(d.topic + "/brokertrace-flush")
	select {
	case <-tok.Done():
	case <-ctx.Done():
		if err := d.errs.get(); err != nil {
			return err
		}
		return fmt.Errorf("MQTT flush to %s: %w", d.host, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		return fmt.Errorf("MQTT flush to %s: %w", d.host, err)
	}
	return nil
}

// Dropped is 0: paho hands every message to the handler, blocking its reader
// rather than discarding.
func (d *mqttDriver) Dropped() int { return 0 }

func (d *mqttDriver) Close() error {
	d.c.Disconnect(250)
	return nil
}

// mqttRefusal is the broker's refusal in a CONNACK, if err is one.
func mqttRefusal(err error, u *url.URL, addr, role string) error {
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		user, _ := credentials(u)
		return authErrorf("MQTT broker at %s refused %s login %s: %v (give mqtt://USER:PASSWORD@%s)", addr, role, loginName(user), err, addr)
	case errors.Is(err, packets.ErrorRefusedIDRejected), errors.Is(err, packets.ErrorRefusedServerUnavailable),
		errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return fmt.Errorf("MQTT broker at %s refused the %s connection: %v", addr, role, err)
	}
	return nil
}
