package load

import (
	"fmt"
	"sync"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testbroker"
)

// stompCases are the destination kinds and ack modes each STOMP broker is
// run with, regular and bursty.
var stompCases = []struct{ dest, ack string }{
	{"/queue/bt.stomp.q1", "auto"},
	{"/queue/bt.stomp.q2", "client"},
	{"/topic/bt.stomp.t1", "client-individual"},
	{"/topic/bt.stomp.t2", "auto"},
}

func TestSTOMPRabbitMQ(t *testing.T) {
	r := sharedRabbitMQ(t)
	for i, c := range stompCases {
		bursty := i%2 == 1
		t.Run(fmt.Sprintf("%s/ack=%s/bursty=%v", c.dest, c.ack, bursty), func(t *testing.T) {
			runExact(t, r.STOMPURL(c.dest)+"?ack="+c.ack, "", bursty)
		})
	}
}

func TestSTOMPActiveMQ(t *testing.T) {
	a := sharedActiveMQ(t)
	for i, c := range stompCases {
		bursty := i%2 == 0
		t.Run(fmt.Sprintf("%s/ack=%s/bursty=%v", c.dest, c.ack, bursty), func(t *testing.T) {
			runExact(t, a.STOMPURL(c.dest)+"?ack="+c.ack, "", bursty)
		})
	}
	// No path: /queue/SUBJECT.
	t.Run("subject", func(t *testing.T) {
		runExact(t, fmt.Sprintf("stomp://%s:%s@%s", a.User, a.Password, a.STOMPAddr), "bt.stomp.subject", false)
	})
}

func TestSTOMPAuth(t *testing.T) {
	t.Run("rabbitmq", func(t *testing.T) {
		r := sharedRabbitMQ(t)
		wantDialErr(t, "stomp://guest:wrong@"+r.STOMPAddr+"/queue/x", ErrAuth, r.STOMPAddr, `user "guest"`, "refused")
	})
	t.Run("activemq", func(t *testing.T) {
		a := sharedActiveMQ(t)
		wantDialErr(t, "stomp://"+a.User+":wrong@"+a.STOMPAddr+"/queue/x", ErrAuth, a.STOMPAddr, `user "brokertrace"`)
		wantDialErr(t, "stomp://"+a.STOMPAddr+"/queue/x", ErrAuth, a.STOMPAddr)
	})
}

func TestActiveMQKilledMidRun(t *testing.T) {
	a := testbroker.StartActiveMQ(t)
	runExact(t, a.STOMPURL("/queue/bt.warmup"), "", false) // a cold JVM is slow to take its first connections
	killMidRun(t, a.STOMPURL("/queue/bt.kill")+"?ack=client", "", a.Kill)
}

// TestRabbitMQKilledMidRun kills one RabbitMQ node under an AMQP and a
// STOMP run at once (a node takes seconds to start: one for both).
func TestRabbitMQKilledMidRun(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, "rabbitmq_stomp")
	runExact(t, r.AMQPURL(), "bt.warmup", false)
	var once sync.Once
	kill := func() { once.Do(r.Kill) }
	t.Run("both", func(t *testing.T) {
		t.Run("amqp", func(t *testing.T) {
			t.Parallel()
			killMidRun(t, r.AMQPURL()+"?ack=manual", "bt.kill", kill)
		})
		t.Run("stomp", func(t *testing.T) {
			t.Parallel()
			killMidRun(t, r.STOMPURL("/queue/bt.kill.stomp"), "", kill)
		})
	})
}
