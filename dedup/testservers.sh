#!/usr/bin/env bash
# testservers.sh — the servers the dedup store tests need, on 127.0.0.1,
# with their data in a temporary directory: PostgreSQL (the machine's own
# binaries) and Redis (Debian's redis-server, installed if missing and run
# as root).
#
#   testservers.sh start   start both (fresh data), wait until they answer
#   testservers.sh stop    stop both and delete their data
#   testservers.sh env     print LANES_REDIS_ADDR=... and LANES_POSTGRES_DSN=...
#
# Settings (environment): LANES_REDIS_PORT (16379), LANES_POSTGRES_PORT
# (15432; both below the ephemeral port range), LANES_SERVERS_STATE (default $TMPDIR/lanes-servers),
# LANES_POSTGRES_BIN (default: the newest /usr/lib/postgresql/*/bin).
# initdb and postgres refuse to run as root: as root they run as the user
# postgres (runuser), which owns the PostgreSQL data directory.
set -euo pipefail

REDIS_PORT=${LANES_REDIS_PORT:-16379}
PG_PORT=${LANES_POSTGRES_PORT:-15432}
STATE=${LANES_SERVERS_STATE:-${TMPDIR:-/tmp}/lanes-servers}
PG_BIN=${LANES_POSTGRES_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}
PG_DATA=$STATE/postgres
PG_USER=lanes

say() { echo "testservers.sh: $*" >&2; }

# as_pg runs a PostgreSQL command as the user that owns its data: this
# user, or postgres when this is root.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start_postgres() {
	[ -x "$PG_BIN/initdb" ] || { say "PostgreSQL binaries not found (set LANES_POSTGRES_BIN)"; exit 1; }
	mkdir -p "$PG_DATA"
	chmod 700 "$PG_DATA"
	if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_DATA"; fi
	as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_USER" -A trust --no-sync >"$STATE/initdb.log" 2>&1 ||
		{ cat "$STATE/initdb.log" >&2; say "initdb failed"; exit 1; }
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/postgres.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DATA -c fsync=off" start >/dev/null ||
		{ cat "$PG_DATA/postgres.log" >&2; say "postgres did not start"; exit 1; }
}

start_redis() {
	if ! command -v redis-server >/dev/null; then
		[ "$(id -u)" = 0 ] || { say "redis-server is missing: apt-get install -y redis-server"; exit 1; }
		say "installing redis-server"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >"$STATE/apt.log" 2>&1 ||
			{ apt-get update -q >>"$STATE/apt.log" 2>&1 &&
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >>"$STATE/apt.log" 2>&1; } ||
			{ cat "$STATE/apt.log" >&2; say "installing redis-server failed"; exit 1; }
	fi
	mkdir -p "$STATE/redis"
	redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no --daemonize yes \
		--dir "$STATE/redis" --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/redis/redis.log"
	for _ in $(seq 1 100); do
		redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && return
		sleep 0.1
	done
	cat "$STATE/redis/redis.log" >&2
	say "redis did not answer"
	exit 1
}

stop_all() {
	if [ -f "$PG_DATA/postmaster.pid" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null || say "stopping postgres failed"
	fi
	if [ -f "$STATE/redis/redis.pid" ]; then
		local pid
		pid=$(cat "$STATE/redis/redis.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do # redis deletes its pid file as it exits
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -rf "$STATE"
}

case ${1:-} in
start)
	stop_all
	mkdir -p "$STATE"
	start_postgres
	start_redis
	say "PostgreSQL on 127.0.0.1:$PG_PORT, Redis on 127.0.0.1:$REDIS_PORT (data in $STATE)"
	;;
stop) stop_all ;;
env)
	echo "LANES_REDIS_ADDR=127.0.0.1:$REDIS_PORT"
	echo "LANES_POSTGRES_DSN=postgres://$PG_USER@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	;;
*)
	say "usage: $0 start|stop|env"
	exit 2
	;;
esac
