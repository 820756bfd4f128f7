#!/usr/bin/env bash
# A RabbitMQ node of its own: its files under BASE, AMQP on 127.0.0.1:15672
# (guest/guest, from loopback and beyond), node bench@localhost on
# distribution port 14370, its epmd on 14369 (started by the caller:
# epmd -port 14369 -address 127.0.0.1 -daemon), the Erlang VM in the
# foreground (exec'd by rabbitmq-server). Writes the configuration under
# BASE and prints the command that runs the node, one word per line (for
# mapfile).
#
#   scripts/rabbitmq.sh BASE
set -euo pipefail
base=${1:?usage: rabbitmq.sh BASE}
rm -rf "$base/mnesia"
mkdir -p "$base/home" "$base/mnesia" "$base/log"
printf 'listeners.tcp.default = 127.0.0.1:15672\nloopback_users = none\n' >"$base/rabbitmq.conf"
echo '[].' >"$base/enabled_plugins"
: >"$base/rabbitmq-env.conf"
printf '%s\n' env "HOME=$base/home" ERL_EPMD_PORT=14369 \
	"RABBITMQ_CONF_ENV_FILE=$base/rabbitmq-env.conf" RABBITMQ_NODENAME=bench@localhost RABBITMQ_DIST_PORT=14370 \
	"RABBITMQ_MNESIA_BASE=$base/mnesia" "RABBITMQ_LOG_BASE=$base/log" RABBITMQ_LOGS=- \
	"RABBITMQ_CONFIG_FILE=$base/rabbitmq.conf" "RABBITMQ_ENABLED_PLUGINS_FILE=$base/enabled_plugins" \
	RUNNING_UNDER_SYSTEMD=1 "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false" /usr/lib/rabbitmq/bin/rabbitmq-server
