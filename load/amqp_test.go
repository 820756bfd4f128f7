package load

import (
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestAMQPRabbitMQ(t *testing.T) {
	r := sharedRabbitMQ(t)
	for i, opts := range []string{"", "?ack=manual", "?ack=manual&prefetch=50", "?confirm=1", "?ack=manual&confirm=1", "?exchange=amq.direct"} {
		for _, bursty := range []bool{false, true} {
			if i >= 2 && !bursty {
				continue // the option mix matters, not both patterns each time
			}
			t.Run(fmt.Sprintf("%s/bursty=%v", strings.TrimPrefix(opts, "?"), bursty), func(t *testing.T) {
				runExact(t, r.AMQPURL()+opts, fmt.Sprintf("bt.amqp.%d.%v", i, bursty), bursty)
			})
		}
	}
}

func TestAMQPAuth(t *testing.T) {
	r := sharedRabbitMQ(t)
	wantDialErr(t, "amqp://guest:wrong@"+r.AMQPAddr+"/", ErrAuth, r.AMQPAddr, `user "guest"`, "refused")
	wantDialErr(t, "amqp://guest:guest@"+r.AMQPAddr+"/no-such-vhost", ErrAuth, `vhost "no-such-vhost"`)
}

// TestAMQPExistingQueue: a durable queue an operator declared is used as
// it is (declaring it auto-delete was refused), and outlives the run with
// none of its messages left behind.
func TestAMQPExistingQueue(t *testing.T) {
	r := sharedRabbitMQ(t)
	const queue = "bt.amqp.durable"
	conn, err := amqp.Dial(r.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-max-length": 1 << 20}); err != nil {
		t.Fatal(err)
	}
	defer ch.QueueDelete(queue, false, false, false)
	runExact(t, r.AMQPURL(), queue, false)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil || q.Messages != 0 || q.Consumers != 0 {
		t.Fatalf("the queue after the run: %+v, %v; want it there, empty, without consumers", q, err)
	}
}
