package load

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
)

// mqtt5Driver is an MQTT 5.0 connection through Eclipse Paho's paho.golang,
// the Go client of MQTT 5 (mqtt://…?version=5). It differs from 3.1.1 where
// a broker's work does: every PUBLISH has a properties field, and a QoS 1
// publisher may have only as many unacknowledged messages in flight as the
// broker's Receive Maximum allows. Payload "same" puts the marker in a user
// property, outside the payload, which brokers pass on to subscribers.
type mqtt5Driver struct {
	c     *paho.Client
	topic string
	qos   byte
	role  string
	host  string
	errs  asyncErr
}

// mqttMarkerProperty is the user property that carries the marker of
// payload "same" (see PublishMarked).
const mqttMarkerProperty = "btid"

var mqtt5Names = protocolNames{proto: "MQTT 5", broker: "MQTT broker", server: "it", listener: "an MQTT 5 listener"}

// dialMQTT5 connects as dialMQTT's URL says; topic and qos are checked.
func dialMQTT5(ctx context.Context, u *url.URL, opts DialOptions, topic string, qos byte, addr string) (Driver, error) {
	d := &mqtt5Driver{topic: topic, qos: qos, role: opts.Role, host: addr}
	dialer := &netDialer{ctx: ctx}
	conn, err := dialer.dial("tcp", addr)
	if err != nil {
		return nil, dialer.connectFailure(mqtt5Names, opts.Role, addr, err, nil)
	}
	d.c = paho.NewClient(paho.ClientConfig{
		ClientID: clientName(opts.Role),
		// Publishes, acknowledgements and pings are written from several
		// goroutines: each packet must go out whole.
		Conn:          packets.NewThreadSafeConn(conn),
		PacketTimeout: 30 * time.Second,
		OnClientError: func(err error) {
			d.errs.set(fmt.Errorf("MQTT 5 %s connection to %s lost: %v", opts.Role, addr, err))
		},
		OnServerDisconnect: func(dc *paho.Disconnect) {
			d.errs.set(fmt.Errorf("MQTT 5 broker at %s disconnected the %s: reason %#x", addr, opts.Role, dc.ReasonCode))
		},
	})
	cp := &paho.Connect{ClientID: clientName(opts.Role), KeepAlive: 30, CleanStart: true}
	if user, pass := credentials(u); user != "" {
		cp.Username, cp.UsernameFlag = user, true
		cp.Password, cp.PasswordFlag = []byte(pass), pass != ""
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	ca, err := d.c.Connect(cctx, cp)
	if err != nil {
		conn.Close()
		return nil, dialer.connectFailure(mqtt5Names, opts.Role, addr, err, mqtt5Refusal(ca, u, addr, opts.Role))
	}
	return d, nil
}

// mqtt5Refusal is the broker's refusal in a CONNACK, if it sent one.
func mqtt5Refusal(ca *paho.Connack, u *url.URL, addr, role string) error {
	switch {
	case ca == nil || ca.ReasonCode < 0x80:
		return nil
	case ca.ReasonCode == packets.ConnackBadUsernameOrPassword, ca.ReasonCode == packets.ConnackNotAuthorized:
		user, _ := credentials(u)
		return authErrorf("MQTT 5 broker at %s refused %s login %s: reason %#x (give mqtt://USER:PASSWORD@%s?version=5)", addr, role, loginName(user), ca.ReasonCode, addr)
	}
	return fmt.Errorf("MQTT 5 broker at %s refused the %s connection: reason %#x", addr, role, ca.ReasonCode)
}

func (d *mqtt5Driver) Err() error { return d.errs.get() }

// Publish sends a copy of body: at QoS 1 paho keeps the packet until its
// PUBACK, and waits only while the broker's Receive Maximum is reached.
func (d *mqtt5Driver) Publish(body []byte) error {
	return d.publish(&paho.Publish{Topic: d.topic, QoS: d.qos, Payload: bytes.Clone(body)})
}

// PublishMarked sends body with the marker in a user property: the body,
// which matching by frame fingerprints, is alike for every message, while
// the marker still names the message.
func (d *mqtt5Driver) PublishMarked(body, marker []byte) error {
	return d.publish(&paho.Publish{Topic: d.topic, QoS: d.qos, Payload: bytes.Clone(body),
		Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: mqttMarkerProperty, Value: string(marker)}}}})
}

func (d *mqtt5Driver) publish(p *paho.Publish) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	_, err := d.c.PublishWithOptions(context.Background(), p, paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	if err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		return fmt.Errorf("MQTT 5 publish to %s: %w", d.host, err)
	}
	return nil
}

// Subscribe returns once the broker's SUBACK granted the subscription;
// deliveries reach handler one at a time, in order, on paho's router
// goroutine. A delivery with the marker property is named by the marker.
func (d *mqtt5Driver) Subscribe(handler func(body []byte)) error {
	d.c.AddOnPublishReceived(func(pr paho.PublishReceived) (bool, error) {
		if p := pr.Packet.Properties; p != nil {
			if id := p.User.Get(mqttMarkerProperty); id != "" {
				handler([]byte(id))
				return true, nil
			}
		}
		handler(pr.Packet.Payload)
		return true, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	sa, err := d.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: d.topic, QoS: d.qos}}})
	switch {
	case sa != nil && len(sa.Reasons) == 1 && sa.Reasons[0] >= 0x80:
		return configErrorf("MQTT 5 broker at %s refused the subscription to %q (SUBACK reason %#x): check the user's ACL", d.host, d.topic, sa.Reasons[0])
	case err != nil:
		return fmt.Errorf("MQTT 5 subscribe to %q at %s: %w", d.topic, d.host, err)
	}
	return nil
}

// Flush unsubscribes from a topic nobody uses and waits for the UNSUBACK,
// as the 3.1.1 driver does: its answer means every earlier PUBLISH of the
// connection was processed.
func (d *mqtt5Driver) Flush(ctx context.Context) error {
	if err := d.errs.get(); err != nil {
		return err
	}
	if _, err := d.c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{d.topic + "/brokertrace-flush"}}); err != nil {
		if e := d.errs.get(); e != nil {
			return e
		}
		return fmt.Errorf("MQTT 5 flush to %s: %w", d.host, err)
	}
	return nil
}

// Dropped is 0: paho hands every message to the handler in turn.
func (d *mqtt5Driver) Dropped() int { return 0 }

func (d *mqtt5Driver) Close() error {
	return d.c.Disconnect(&paho.Disconnect{ReasonCode: 0})
}
