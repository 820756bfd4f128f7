package load

import (
	"fmt"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
)

func TestMQTTMosquitto(t *testing.T) {
	m := testbroker.StartMosquitto(t)
	for _, qos := range []string{"0", "1"} {
		for _, bursty := range []bool{false, true} {
			name := fmt.Sprintf("qos%s/bursty=%v", qos, bursty)
			t.Run(name, func(t *testing.T) {
				runExact(t, fmt.Sprintf("%s/bt/exact/qos%s?qos=%s", m.URL(), qos, qos), "", bursty)
			})
		}
	}
}

// TestMQTTAuth: a broker that requires a password refuses a wrong one and
// none with ErrAuth, and takes the right one.
func TestMQTTAuth(t *testing.T) {
	m := testbroker.StartMosquitto(t, "bt:secret")
	wantDialErr(t, "mqtt://bt:wrong@"+m.Addr, ErrAuth, m.Addr, `user "bt"`, "refused")
	wantDialErr(t, "mqtt://"+m.Addr, ErrAuth, m.Addr, "refused")
	runExact(t, m.URL()+"?qos=1", "bt.auth", false)
}

func TestMQTTBrokerKilled(t *testing.T) {
	m := testbroker.StartMosquitto(t)
	killMidRun(t, m.URL()+"?qos=1", "bt.kill", m.Kill)
}

// TestMQTTOtherBrokers runs the MQTT driver against RabbitMQ's MQTT plugin.
// (Debian's ActiveMQ lacks its MQTT codec; see testbroker.ActiveMQ.)
func TestMQTTOtherBrokers(t *testing.T) {
	t.Run("rabbitmq", func(t *testing.T) {
		r := sharedRabbitMQ(t)
		runExact(t, fmt.Sprintf("mqtt://%s:%s@%s/bt/rmq?qos=1", testbroker.RabbitMQUser, testbroker.RabbitMQPassword, r.MQTTAddr), "", true)
	})
}
