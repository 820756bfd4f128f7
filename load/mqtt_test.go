package load

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

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

// TestOneCPU: a load pinned to one CPU (GOMAXPROCS 1) still receives each
// message within milliseconds. With one P, the consumer waited behind the
// producer's paced sleeps and messages piled up in its socket for seconds.
func TestOneCPU(t *testing.T) {
	m := testbroker.StartMosquitto(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res, err := Run(context.Background(), Config{URL: m.URL() + "/bt/onecpu", Rate: 6000, Count: 12000, Warmup: 500 * time.Millisecond, Drain: 5 * time.Second})
	if err != nil || res.Received != 12000 {
		t.Fatalf("received %v of 12000: %v", res, err)
	}
	lat := make([]int64, 0, len(res.Recv))
	for i, r := range res.Recv {
		lat = append(lat, r-res.Intended[i])
	}
	slices.Sort(lat)
	if p99 := lat[len(lat)*99/100]; p99 > int64(50*time.Millisecond) {
		t.Errorf("e2e p99 %v at 6000 msg/s with GOMAXPROCS 1: the consumer starved", time.Duration(p99))
	}
	if runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("Run left GOMAXPROCS at %d", runtime.GOMAXPROCS(0))
	}
}

// TestMQTT5Mosquitto runs the MQTT 5 driver against mosquitto: every
// message exactly once, at QoS 0 and 1 (where the broker's Receive Maximum
// bounds the messages in flight), regular and in bursts; and payload
// "same", whose marker travels in a user property.
func TestMQTT5Mosquitto(t *testing.T) {
	m := testbroker.StartMosquitto(t)
	for _, qos := range []string{"0", "1"} {
		for _, bursty := range []bool{false, true} {
			t.Run(fmt.Sprintf("qos%s/bursty=%v", qos, bursty), func(t *testing.T) {
				runExact(t, fmt.Sprintf("%s/bt/exact5/qos%s?qos=%s&version=5", m.URL(), qos, qos), "", bursty)
			})
		}
	}
	t.Run("same", func(t *testing.T) {
		res, err := Run(context.Background(), Config{URL: m.URL() + "/bt/same5?qos=1&version=5", Rate: 5000, Count: 5000,
			Payload: PayloadSame, Drain: 5 * time.Second})
		if err != nil || res.Received != 5000 || res.Missing != 0 {
			t.Fatalf("payload same over MQTT 5: %+v, %v", res, err)
		}
	})
	t.Run("3.1.1 names same by order", func(t *testing.T) {
		runSameByOrder(t, m.URL()+"/bt/same4?qos=1")
	})
}

// TestMQTT5Auth: an MQTT 5 login refused is ErrAuth naming the user.
func TestMQTT5Auth(t *testing.T) {
	m := testbroker.StartMosquitto(t, "bt:secret")
	wantDialErr(t, "mqtt://bt:wrong@"+m.Addr+"?version=5", ErrAuth, m.Addr, `user "bt"`, "refused")
	runExact(t, "mqtt://bt:secret@"+m.Addr+"/bt/auth5?qos=1&version=5", "", false)
}
