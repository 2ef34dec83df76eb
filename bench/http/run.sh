#!/usr/bin/env bash
# Load test of examples/shop: a read action (product_search) and a write
# action (cart_add_item, with a bearer token) through axgate's tool server,
# against the same handlers served bare (-unsafe-bare: no authentication, no
# gates), in one run. Rounds alternate bare and gated so that drift on a
# shared machine hits both alike.
#
#   bash bench/http/run.sh            # defaults: 3 rounds of 10 s, 2 threads, 32 connections
#   ROUNDS=5 DURATION=20s CONNS=64 bash bench/http/run.sh
#   REV=HEAD bash bench/http/run.sh   # build a commit, not the working tree
#
# Needs wrk (Debian: apt-get install -y wrk). Prints a Markdown table of
# requests/s and p99 latency (median over the rounds) for bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-32}
GATED_ADDR=${GATED_ADDR:-127.0.0.1:18180}
BARE_ADDR=${BARE_ADDR:-127.0.0.1:18181}

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# No trace export from the gated server: the comparison is of the gates.
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT

if [ -n "${REV:-}" ]; then
	# Build a committed revision, untouched by edits in progress in the tree.
	mkdir "$work/src"
	git archive "$REV" | tar -x -C "$work/src"
	(cd "$work/src" && go build -o "$work/shop" ./examples/shop)
else
	go build -o "$work/shop" ./examples/shop
fi
"$work/shop" -addr "$GATED_ADDR" >"$work/gated.out" 2>&1 &
GATED_PID=$!
pids+=($!)
"$work/shop" -addr "$BARE_ADDR" -unsafe-bare >"$work/bare.out" 2>&1 &
BARE_PID=$!
pids+=($!)

for _ in $(seq 50); do
	grep -q "^export ALICE=" "$work/gated.out" 2>/dev/null && grep -q UNSAFE "$work/bare.out" 2>/dev/null && break
	sleep 0.1
done
TOKEN=$(sed -nE "s/^export ALICE='([^']+)'/\1/p" "$work/gated.out")
[ -n "$TOKEN" ] || { echo "no dev token in the shop's output:"; cat "$work/gated.out"; exit 1; } >&2
export TOKEN

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = os.getenv("BODY")
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end
LUA

read_body='{"query":"lamp"}'
write_body='{"product_id":"9b2f1c1e-8a4f-4c55-9d6e-3f2a1b0c9d8e","quantity":1}'

# Check once that each server answers 200 to each request.
for target in "$GATED_ADDR" "$BARE_ADDR"; do
	for c in "product_search:$read_body" "cart_add_item:$write_body"; do
		code=$(curl -s -o "$work/check" -w '%{http_code}' -X POST "http://$target/tools/${c%%:*}/call" \
			-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" -d "${c#*:}")
		[ "$code" = 200 ] || { echo "$target ${c%%:*}: $code $(cat "$work/check")" >&2; exit 1; }
	done
done

# cpu PID: the CPU time the process has used, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# children_cpu: the CPU time (user + system, in µs) of this shell's finished
# children, wrk among them, as "times" printed it into $work/times (times
# must run in this shell, not in a subshell, to see them).
children_cpu() {
	tail -1 "$work/times" | awk '{
		t = 0
		for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
		printf "%.0f", t * 1e6
	}'
}

# one NAME ADDR TOOL BODY PID: one wrk run, appending "NAME rps p99_ms
# server_cpu_us wrk_cpu_us" (CPU per request) to results. CPU time per
# request depends much less than req/s on how busy the rest of the machine
# is.
one() {
	local out before after wrk_before wrk_after
	before=$(cpu "$5")
	times >"$work/times"
	wrk_before=$(children_cpu)
	out=$(BODY="$4" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$work/post.lua" "http://$2/tools/$3/call")
	times >"$work/times"
	wrk_after=$(children_cpu)
	after=$(cpu "$5")
	if echo "$out" | grep -q "Non-2xx"; then
		echo "$out" >&2
		echo "$1: non-2xx answers" >&2
		exit 1
	fi
	local rps p99 n cpu_us wrk_us
	rps=$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')
	n=$(echo "$out" | awk '/requests in/ {print $1}')
	cpu_us=$(awk -v t="$(((after - before) * TICK_US))" -v n="$n" 'BEGIN {printf "%.1f", t / n}')
	wrk_us=$(awk -v t="$((wrk_after - wrk_before))" -v n="$n" 'BEGIN {printf "%.1f", t / n}')
	p99=$(echo "$out" | awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; print v}')
	echo "$1 $rps $p99 $cpu_us $wrk_us" >>"$work/results"
	echo "  $1: $rps req/s, p99 ${p99} ms, CPU per request: server ${cpu_us} µs, wrk ${wrk_us} µs" >&2
}

# pair ACTION TOOL BODY ROUND: the bare and the gated run of one action,
# bare first in odd rounds and gated first in even ones, so that neither
# side always runs on a machine the other just warmed (or loaded).
pair() {
	if [ $(($4 % 2)) = 1 ]; then
		one "$1_bare" "$BARE_ADDR" "$2" "$3" "$BARE_PID"
		one "$1_axgate" "$GATED_ADDR" "$2" "$3" "$GATED_PID"
	else
		one "$1_axgate" "$GATED_ADDR" "$2" "$3" "$GATED_PID"
		one "$1_bare" "$BARE_ADDR" "$2" "$3" "$BARE_PID"
	fi
}

for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	pair read product_search "$read_body" "$r"
	pair write cart_add_item "$write_body" "$r"
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$work/results" | median; }
# ratio ACTION: the median over the rounds of axgate/bare req/s, each
# round's two runs back to back: steadier than the ratio of the medians
# when the machine's load drifts between rounds.
ratio() {
	paste <(awk -v n="$1_bare" '$1 == n {print $2}' "$work/results") <(awk -v n="$1_axgate" '$1 == n {print $2}' "$work/results") |
		awk '{print 100 * $2 / $1}' | median
}

echo
echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds, medians; $(nproc) CPUs shared by wrk and both servers; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| action | bare req/s | axgate req/s | axgate/bare (per round) | bare p99 | axgate p99 | server CPU/request bare → axgate | CPU-bound estimate |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for a in read write; do
	b=$(col "${a}_bare" 2); g=$(col "${a}_axgate" 2)
	bp=$(col "${a}_bare" 3); gp=$(col "${a}_axgate" 3)
	bc=$(col "${a}_bare" 4); gc=$(col "${a}_axgate" 4)
	bw=$(col "${a}_bare" 5); gw=$(col "${a}_axgate" 5)
	rr=$(ratio "$a")
	name=$a; [ "$a" = read ] && name="read (product_search)" || name="write (cart_add_item)"
	# The CPU-bound estimate: the throughput ratio if the machine did
	# nothing but this benchmark, (wrk + bare server) / (wrk + gated server)
	# CPU per request.
	awk -v n="$name" -v b="$b" -v g="$g" -v rr="$rr" -v bp="$bp" -v gp="$gp" -v bc="$bc" -v gc="$gc" -v bw="$bw" -v gw="$gw" \
		'BEGIN {printf "| %s | %.0f | %.0f | %.0f%% (%.0f%%) | %.2f ms | %.2f ms | %.1f → %.1f µs | %.0f%% |\n", n, b, g, 100*g/b, rr, bp, gp, bc, gc, 100*(bw+bc)/(gw+gc)}'
done
