# cluster.sh — kafka.sh's cluster mode (LANES_KAFKA_NODES=3), sourced by
# kafka.sh, which sets PORT, STATE, CACHE, HEAP, READY_TIMEOUT, HERE and the
# helpers say, fetch and kjava. Three KRaft nodes on 127.0.0.1, each broker
# and controller (a static three-voter quorum); node N (1..3) has node.id N,
# PLAINTEXT on $PORT+100*(N-1), CONTROLLER on the port after it, and its
# configuration, data, log and pid file in $STATE/node-N.

node_port() { echo $((PORT + 100 * ($1 - 1))); }
node_dir() { echo "$STATE/node-$1"; }
node_pid() { cat "$(node_dir "$1")/kafka.pid" 2>/dev/null; }
node_running() {
	local pid
	pid=$(node_pid "$1") && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
cluster_brokers() {
	local n out=""
	for n in $(seq 1 "$NODES"); do out="$out${out:+,}127.0.0.1:$(node_port "$n")"; done
	echo "$out"
}

check_node() {
	case "${1:-}" in
	[1-9]) [ "$1" -le "$NODES" ] && return ;;
	esac
	say "node '${1:-}': want a node number from 1 to $NODES"
	exit 2
}

configure_node() {
	local n=$1 dir port voters="" i
	dir=$(node_dir "$n")
	port=$(node_port "$n")
	for i in $(seq 1 "$NODES"); do voters="$voters${voters:+,}$i@127.0.0.1:$(($(node_port "$i") + 1))"; done
	mkdir -p "$dir/data"
	cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$n
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=$voters
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
# Every topic survives the loss of one node: an acks=all write is on at
# least two nodes before it is acknowledged.
default.replication.factor=$NODES
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=$NODES
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=$NODES
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=$NODES
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
# KIP-848 groups: as in single-node mode (see kafka.sh).
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
log.flush.interval.messages=9223372036854775807
PROPS
}

cluster_configure() {
	local n id
	for n in $(seq 1 "$NODES"); do configure_node "$n"; done
	[ -f "$(node_dir 1)/data/meta.properties" ] && return
	id=$(kjava kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)
	for n in $(seq 1 "$NODES"); do
		kjava kafka.tools.StorageTool format -c "$(node_dir "$n")/server.properties" -t "$id" \
			>"$(node_dir "$n")/format.log" 2>&1 ||
			{ cat "$(node_dir "$n")/format.log" >&2; say "formatting node $n's storage failed"; exit 1; }
	done
}

launch_node() {
	local n=$1 dir
	dir=$(node_dir "$n")
	nohup java -Xms128m -Xmx"$HEAP" -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-cp "$CACHE/*" kafka.Kafka "$dir/server.properties" >>"$dir/kafka.log" 2>&1 &
	echo $! >"$dir/kafka.pid"
}

# cluster_wait asks the cluster (brokerready: a ping, a topic created and
# deleted, and every node in nodes listed by the metadata) until it answers,
# for at most READY_TIMEOUT seconds, failing at once if process pid exits.
cluster_wait() {
	local brokers=$1 nodes=$2 pid=$3 n
	if ! (cd "$HERE/.." && go run ./cmd/brokerready -brokers "$brokers" -nodes "$nodes" \
		-timeout "${READY_TIMEOUT}s" -pid "$pid"); then
		say "cluster did not become ready (nodes $nodes); the logs' tails:"
		for n in $(seq 1 "$NODES"); do
			echo "== node $n" >&2
			tail -n 30 "$(node_dir "$n")/kafka.log" >&2 || true
		done
		return 1
	fi
}

cluster_start() {
	local n all=""
	fetch
	cluster_configure
	for n in $(seq 1 "$NODES"); do
		all="$all${all:+,}$n"
		if node_running "$n"; then
			say "node $n already running (pid $(node_pid "$n"))"
			continue
		fi
		say "starting node $n of Apache Kafka $KAFKA_VERSION on 127.0.0.1:$(node_port "$n") (log: $(node_dir "$n")/kafka.log)"
		launch_node "$n"
	done
	if ! cluster_wait "$(cluster_brokers)" "$all" "$(node_pid 1)"; then
		cluster_stop
		exit 1
	fi
	say "ready: $(cluster_brokers)"
}

# start_node starts node N again (its data kept) and waits until the
# cluster lists it among its brokers.
start_node() {
	local n=$1
	if node_running "$n"; then
		say "node $n already running (pid $(node_pid "$n"))"
		return
	fi
	[ -f "$(node_dir "$n")/server.properties" ] || { say "node $n was never configured: run kafka.sh start first"; exit 1; }
	say "starting node $n on 127.0.0.1:$(node_port "$n")"
	launch_node "$n"
	cluster_wait "127.0.0.1:$(node_port "$n")" "$n" "$(node_pid "$n")" || exit 1
	say "node $n ready"
}

# halt_node sends sig to node N and waits until it exited: SIGTERM (a
# controlled shutdown) for up to 60 s, then SIGKILL.
halt_node() {
	local n=$1 sig=$2 pid i
	if node_running "$n"; then
		pid=$(node_pid "$n")
		kill -"$sig" "$pid" 2>/dev/null || true
		for i in $(seq 1 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "node $n did not stop in 60s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$(node_dir "$n")/kafka.pid"
}

# cluster_stop stops every node at once (one at a time, the last ones
# would wait for a quorum that is gone) and deletes the data unless keep.
cluster_stop() {
	local keep=${1:-} n
	for n in $(seq 1 "$NODES"); do halt_node "$n" TERM & done
	wait
	[ "$keep" = keep ] || rm -rf "$STATE"
}

cluster_info() {
	(cd "$HERE/.." && go run ./cmd/clusterinfo -brokers "$(cluster_brokers)" "$@")
}

cluster_main() {
	case "${1:-}" in
	start) cluster_start ;;
	stop) cluster_stop ;;
	restart) cluster_stop keep && cluster_start ;;
	status)
		local n rc=0
		for n in $(seq 1 "$NODES"); do
			if node_running "$n"; then echo "node $n running on 127.0.0.1:$(node_port "$n") (pid $(node_pid "$n"))"
			else echo "node $n stopped"; rc=1; fi
		done
		return $rc
		;;
	env)
		echo "LANES_BROKERS='$(cluster_brokers)'"
		echo "LANES_KAFKA_NODES='$NODES'"
		echo "LANES_KAFKA_PORT='$PORT'"
		echo "LANES_KAFKA_STATE='$STATE'"
		echo "LANES_KAFKA_SH='$HERE/kafka.sh'"
		echo "LANES_KAFKA_CLASSPATH='$CACHE/*'"
		;;
	logs)
		local n
		for n in $(seq 1 "$NODES"); do sed "s/^/node $n: /" "$(node_dir "$n")/kafka.log"; done
		;;
	stop-node) check_node "${2:-}" && halt_node "$2" TERM ;;
	kill-node) check_node "${2:-}" && halt_node "$2" KILL ;;
	start-node) check_node "${2:-}" && start_node "$2" ;;
	leader)
		[ $# -eq 3 ] || { echo "usage: $0 leader TOPIC PARTITION" >&2; exit 2; }
		cluster_info leader "$2" "$3"
		;;
	controller) cluster_info controller ;;
	fetch) fetch ;;
	*)
		echo "usage: LANES_KAFKA_NODES=$NODES $0 start|stop|restart|status|env|logs|fetch|stop-node N|kill-node N|start-node N|leader TOPIC PART|controller" >&2
		exit 2
		;;
	esac
}
