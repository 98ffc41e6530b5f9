#!/usr/bin/env bash
# kafka.sh — a single-node Apache Kafka (KRaft, broker + controller) on
# 127.0.0.1 for lanes' real-broker tests. Needs Java 17+ and Maven.
#
#   kafka.sh start     fetch the jars (once), format storage, start, wait until it answers
#   kafka.sh stop      stop it and delete its data
#   kafka.sh restart   stop and start again, keeping its data (broker-restart tests)
#   kafka.sh status    say whether it runs
#   kafka.sh env       print LANES_BROKERS=..., LANES_KAFKA_CLASSPATH=... and the
#                      secured listeners' addresses and credentials (below)
#   kafka.sh logs      print the broker log
#
# Cluster mode (LANES_KAFKA_NODES=3): three KRaft nodes, each broker and
# controller (a three-voter quorum), PLAINTEXT and CONTROLLER listeners only.
# Node N (1..3) has node.id N, its plaintext listener on $PORT+100*(N-1) and
# its controller on the next port, its data and log in $STATE/node-N. Created
# topics default to replication factor 3 and min.insync.replicas=2 (the
# internal topics too). The commands above act on every node; and:
#
#   kafka.sh stop-node N    stop node N gracefully (SIGTERM, controlled shutdown), keeping its data
#   kafka.sh kill-node N    kill node N with SIGKILL, keeping its data
#   kafka.sh start-node N   start node N again and wait until the cluster lists it
#   kafka.sh leader TOPIC PART   print the node.id of the partition's leader
#   kafka.sh controller     print the node.id of the active controller
#
# Listeners: PLAINTEXT on $PORT; the controller on $PORT+1; TLS on $PORT+2
# (mutual: the client presents a certificate); SASL_PLAINTEXT on $PORT+3
# with SCRAM-SHA-512 and PLAIN. The certificates (a throwaway CA, the
# broker's and a client's, made with openssl) and the user (SCRAM
# credentials written when the storage is formatted, PLAIN in the JAAS
# configuration) live in the state directory and die with it.
#
# Settings (environment): LANES_KAFKA_PORT (19092: below Linux's ephemeral
# port range, 32768-60999, so that no client's outgoing connection can take
# one of the four ports while the broker restarts), LANES_KAFKA_CACHE (jar
# cache, default ~/.cache/lanes), LANES_KAFKA_STATE (data, logs, pid; default
# $TMPDIR/lanes-kafka-$PORT, in cluster mode $TMPDIR/lanes-kafka-cluster-$PORT),
# LANES_KAFKA_READY_TIMEOUT (seconds, 120), LANES_KAFKA_NODES (1, or 3 for
# cluster mode), LANES_KAFKA_HEAP (the JVM's -Xmx: 512m for one node, 384m
# per node in cluster mode).
set -euo pipefail

KAFKA_VERSION=4.3.1
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=${LANES_KAFKA_PORT:-19092}
CTRL_PORT=$((PORT + 1))
TLS_PORT=$((PORT + 2))
SASL_PORT=$((PORT + 3))
SASL_USER=lanes
SASL_PASSWORD=lanes-secret
CACHE=${LANES_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lanes}/kafka-$KAFKA_VERSION
READY_TIMEOUT=${LANES_KAFKA_READY_TIMEOUT:-120}
NODES=${LANES_KAFKA_NODES:-1}
case "$NODES" in
1) HEAP=${LANES_KAFKA_HEAP:-512m} STATE=${LANES_KAFKA_STATE:-${TMPDIR:-/tmp}/lanes-kafka-$PORT} ;;
3) HEAP=${LANES_KAFKA_HEAP:-384m} STATE=${LANES_KAFKA_STATE:-${TMPDIR:-/tmp}/lanes-kafka-cluster-$PORT} ;;
*) echo "kafka.sh: LANES_KAFKA_NODES=$NODES: want 1 (one node) or 3 (cluster mode)" >&2; exit 2 ;;
esac
CONF=$STATE/server.properties
LOG=$STATE/kafka.log
PIDFILE=$STATE/kafka.pid

say() { echo "kafka.sh: $*" >&2; }

fetch() {
	[ -f "$CACHE/.complete" ] && return
	command -v mvn >/dev/null || { say "Maven (mvn) is required to fetch Apache Kafka $KAFKA_VERSION"; exit 1; }
	say "fetching Apache Kafka $KAFKA_VERSION from Maven Central into $CACHE"
	mkdir -p "$CACHE"
	mvn -q -B -f "$HERE/pom.xml" dependency:copy-dependencies \
		-Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$CACHE"
	touch "$CACHE/.complete"
}

kjava() {
	command -v java >/dev/null || { say "Java 17+ is required"; exit 1; }
	java -Xms256m -Xmx512m -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-Dslf4j.internal.verbosity=WARN -cp "$CACHE/*" "$@"
}

# certs makes a throwaway CA and, signed by it, the broker's certificate
# (for 127.0.0.1 and localhost) and a client's, as PEM files in $STATE/tls.
certs() {
	local d=$STATE/tls
	[ -f "$d/client.pem" ] && return
	command -v openssl >/dev/null || { say "openssl is required for the TLS listener"; exit 1; }
	mkdir -p "$d"
	(
		cd "$d"
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lanes test CA" \
			-keyout ca.key -out ca.pem
		for who in broker client; do
			openssl req -newkey rsa:2048 -nodes -subj "/CN=lanes $who" -keyout "$who.key.pkcs1" -out "$who.csr"
			printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$who.ext"
			openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-extfile "$who.ext" -out "$who.pem"
			openssl pkcs8 -topk8 -nocrypt -in "$who.key.pkcs1" -out "$who.key"
		done
		cat broker.key broker.pem >broker-keystore.pem
	) >"$STATE/certs.log" 2>&1 || { cat "$STATE/certs.log" >&2; say "making certificates failed"; exit 1; }
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

configure() {
	mkdir -p "$STATE/data"
	certs
	cat >"$CONF" <<PROPS
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CTRL_PORT,SSL://127.0.0.1:$TLS_PORT,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT,SSL://127.0.0.1:$TLS_PORT,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=$STATE/tls/broker-keystore.pem
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.truststore.location=$STATE/tls/ca.pem
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
controller.quorum.bootstrap.servers=127.0.0.1:$CTRL_PORT
inter.broker.listener.name=PLAINTEXT
log.dirs=$STATE/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# KIP-848 (group.protocol=consumer) groups: the broker, not the client, sets
# the heartbeat interval and the session timeout; lowered (with their
# minimums) so that tests notice a member that left or died in seconds, as
# the classic tests do with the client's own settings.
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
log.flush.interval.messages=9223372036854775807
PROPS
	if [ ! -f "$STATE/data/meta.properties" ]; then
		local id
		id=$(kjava kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)
		kjava kafka.tools.StorageTool format -c "$CONF" -t "$id" --standalone \
			--add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]" >"$STATE/format.log" 2>&1 ||
			{ cat "$STATE/format.log" >&2; say "formatting storage failed"; exit 1; }
	fi
}

# wait_ready asks the broker itself (a franz-go ping that creates and
# deletes a topic) until it answers, for at most READY_TIMEOUT seconds.
wait_ready() {
	local pid=$1
	if ! (cd "$HERE/.." && go run ./cmd/brokerready -brokers "127.0.0.1:$PORT" -timeout "${READY_TIMEOUT}s" -pid "$pid"); then
		say "broker did not become ready; its log:"
		tail -n 80 "$LOG" >&2 || true
		return 1
	fi
}

# ports_free waits (up to 30 s) until nothing listens on the broker's
# ports; what still listens then is named, and start fails. (Connections
# of the previous broker winding down on these ports do not block a
# restart; outgoing connections cannot take them: they lie below the
# ephemeral port range.)
ports_free() {
	local p i busy
	command -v ss >/dev/null || return 0
	for i in $(seq 1 150); do
		busy=""
		for p in "$PORT" "$CTRL_PORT" "$TLS_PORT" "$SASL_PORT"; do
			if [ -n "$(ss -Hltn "( sport = :$p )" 2>/dev/null)" ]; then
				busy="$busy $p"
			fi
		done
		[ -z "$busy" ] && return 0
		sleep 0.2
	done
	say "port(s)$busy on 127.0.0.1 are in use by another process: stop it, or set LANES_KAFKA_PORT to a free base port"
	ss -Hltnp "( sport = :$PORT or sport = :$CTRL_PORT or sport = :$TLS_PORT or sport = :$SASL_PORT )" >&2 || true
	return 1
}

start() {
	if running; then
		say "already running (pid $(cat "$PIDFILE")) on 127.0.0.1:$PORT"
		return
	fi
	ports_free || exit 1
	fetch
	configure
	say "starting Apache Kafka $KAFKA_VERSION on 127.0.0.1:$PORT (log: $LOG)"
	nohup java -Xms256m -Xmx$HEAP -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-cp "$CACHE/*" kafka.Kafka "$CONF" >>"$LOG" 2>&1 &
	echo $! >"$PIDFILE"
	if ! wait_ready "$(cat "$PIDFILE")"; then
		stop
		exit 1
	fi
	say "ready"
}

# stop sends SIGTERM (a controlled shutdown), waits up to 60s, then SIGKILL.
stop() {
	local keep=${1:-}
	if running; then
		local pid i
		pid=$(cat "$PIDFILE")
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "broker did not stop in 60s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$PIDFILE"
	if [ "$keep" != keep ]; then
		rm -rf "$STATE"
	fi
}

if [ "$NODES" != 1 ]; then
	. "$HERE/cluster.sh"
	cluster_main "$@"
	exit
fi

case "${1:-}" in
start) start ;;
stop) stop ;;
restart) stop keep && start ;;
status) if running; then echo "running on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"; else echo "stopped"; exit 1; fi ;;
env)
	echo "LANES_BROKERS='127.0.0.1:$PORT'"
	echo "LANES_KAFKA_CLASSPATH='$CACHE/*'"
	echo "LANES_TLS_BROKERS='127.0.0.1:$TLS_PORT'"
	echo "LANES_TLS_CA='$STATE/tls/ca.pem'"
	echo "LANES_TLS_CERT='$STATE/tls/client.pem'"
	echo "LANES_TLS_KEY='$STATE/tls/client.key'"
	echo "LANES_SASL_BROKERS='127.0.0.1:$SASL_PORT'"
	echo "LANES_SASL_USER='$SASL_USER'"
	echo "LANES_SASL_PASSWORD='$SASL_PASSWORD'"
	;;
logs) cat "$LOG" ;;
fetch) fetch ;;
*) echo "usage: $0 start|stop|restart|status|env|logs|fetch" >&2; exit 2 ;;
esac
