#!/usr/bin/env bash
# Makes sure a Redis server answers for the tests of gates/redisstore and the
# Redis end-to-end tests, and prints its URL on stdout. Everything else goes
# to stderr.
#
#   export AXGATE_REDIS_URL="$(bash .ci/redis.sh)"
#   ...
#   bash .ci/redis.sh stop    # stops a server this script started, if any
#
# In order: AXGATE_REDIS_URL if it is set and answers; else the usual local
# server on 127.0.0.1:6379 if it answers; else a redis-server started here on
# a free loopback port (installed with apt-get first when missing and
# possible), without persistence, in the background. Exits non-zero, printing
# nothing on stdout, when no Redis can be had: the Redis tests then skip.
set -euo pipefail

state="${AXGATE_CACHE:-$HOME/.cache/axgate}/redis"

log() { echo "redis.sh: $*" >&2; }

# answers URL: whether a Redis answers PING at URL within two seconds.
answers() {
	local url=$1
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(timeout 3 redis-cli -u "$url" ping 2>/dev/null)" = "PONG" ]
		return
	fi
	# No redis-cli: speak RESP over bash's /dev/tcp (no AUTH, no TLS).
	local hostport=${url#*://}
	hostport=${hostport#*@}
	hostport=${hostport%%/*}
	local host=${hostport%:*} port=${hostport##*:}
	[ "$host" = "$hostport" ] && port=6379
	timeout 3 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "PING\r\n" >&3
		IFS= read -r -t 2 line <&3 || exit 1
		[[ $line == +PONG* ]]' "$host" "$port" 2>/dev/null
}

# port_free PORT: whether nothing listens on 127.0.0.1:PORT.
port_free() {
	! timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null
}

if [ "${1:-}" = "stop" ]; then
	shopt -s nullglob
	for pidfile in "$state"/redis-*.pid; do
		pid=$(cat "$pidfile")
		if kill "$pid" 2>/dev/null; then
			log "stopped redis-server (pid $pid)"
		fi
		rm -f "$pidfile"
	done
	exit 0
fi

if [ -n "${AXGATE_REDIS_URL:-}" ]; then
	if answers "$AXGATE_REDIS_URL"; then
		echo "$AXGATE_REDIS_URL"
		exit 0
	fi
	log "AXGATE_REDIS_URL is set but nothing answers there; looking for another Redis"
fi

if answers "redis://127.0.0.1:6379/0"; then
	echo "redis://127.0.0.1:6379/0"
	exit 0
fi

# A server this script started before, still running.
shopt -s nullglob
for pidfile in "$state"/redis-*.pid; do
	port=${pidfile##*/redis-}
	port=${port%.pid}
	if answers "redis://127.0.0.1:$port/0"; then
		echo "redis://127.0.0.1:$port/0"
		exit 0
	fi
done
shopt -u nullglob

if ! command -v redis-server >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
		log "installing redis-server with apt-get"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } >&2 || true
	fi
fi
if ! command -v redis-server >/dev/null 2>&1; then
	log "no Redis answers and redis-server is not installed: the Redis tests will skip"
	exit 1
fi

mkdir -p "$state"
for port in $(seq 6390 6499); do
	port_free "$port" || continue
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--daemonize yes --pidfile "$state/redis-$port.pid" \
		--logfile "$state/redis-$port.log" --dir "$state" >&2
	url="redis://127.0.0.1:$port/0"
	for _ in $(seq 50); do
		if answers "$url"; then
			log "started redis-server on 127.0.0.1:$port (pid $(cat "$state/redis-$port.pid" 2>/dev/null)); stop it with: bash .ci/redis.sh stop"
			echo "$url"
			exit 0
		fi
		sleep 0.1
	done
	log "redis-server on port $port did not answer; see $state/redis-$port.log"
	exit 1
done
log "no free loopback port in 6390-6499"
exit 1
