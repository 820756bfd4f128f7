package load

import (
	"fmt"
	"strings"
	"testing"
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
