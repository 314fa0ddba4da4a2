#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kvtier real-program check: redis-server on 127.0.0.1 (a free port), under
# kvtier when LIB is given (only the server is preloaded; its trace goes to
# DIR/redis.%p.trace), else natively.
#   redis_check.sh DIR [LIB]
# 50 000 own keys written (pipelined) while `redis-benchmark -n 200000 -P 16
# -t set,get -r 100000` runs, a BGSAVE (fork) in the middle of both, then
# every key read back (SCAN + MGET) and compared, the RDB file checked with
# redis-check-rdb, and the server shut down (SHUTDOWN NOSAVE). Prints only
# deterministic lines; the server's stderr is left in DIR/server.err.
# Every step is bounded; the server is always stopped (trap).
set -u
dir=$1
lib=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
NKEYS=50000
cli() { timeout 20 redis-cli -h 127.0.0.1 -p "$port" "$@"; }

pid=""; bpid=""
cleanup() {
	[ -n "$bpid" ] && kill "$bpid" 2>/dev/null
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'echo "redis_check: interrupted"; exit 124' INT TERM ALRM HUP

port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])') || exit 3
pre=()
[ -n "$lib" ] && pre=(env "LD_PRELOAD=$lib" "KVTIER_TRACE=$dir/redis.%p.trace")
"${pre[@]}" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$dir" --dbfilename dump.rdb --logfile "$dir/redis.log" --daemonize no \
	>"$dir/server.out" 2>"$dir/server.err" &
pid=$!
up=0
for _ in $(seq 100); do
	[ "$(cli ping 2>/dev/null)" = PONG ] && { up=1; break; }
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
[ $up = 1 ] || { echo "server did not start"; exit 4; }
echo "server up"

timeout 90 redis-benchmark -h 127.0.0.1 -p "$port" -q -n 200000 -P 16 -t set,get -r 100000 \
	>"$dir/bench.out" 2>&1 &
bpid=$!
timeout 60 $PY "$here/redis_client.py" "$port" write $((NKEYS / 2)) >/dev/null || echo "write 1 failed"
echo "bgsave: $(cli bgsave)"
timeout 60 $PY "$here/redis_client.py" "$port" write "$NKEYS" || echo "write 2 failed"
saved=0
for _ in $(seq 300); do
	info=$(cli info persistence | tr -d '\r')
	case "$info" in *rdb_bgsave_in_progress:0*) saved=1; break ;; esac
	sleep 0.1
done
echo "bgsave finished: $saved, status: $(echo "$info" | sed -n 's/^rdb_last_bgsave_status://p')"
wait "$bpid"; brc=$?; bpid=""
echo "benchmark rc=$brc"
tr '\r' '\n' <"$dir/bench.out" >"$dir/bench.txt"
if grep -q '^ *SET: [0-9.]* requests per second' "$dir/bench.txt" &&
   grep -q '^ *GET: [0-9.]* requests per second' "$dir/bench.txt"; then
	echo "benchmark: SET and GET ran"
else
	echo "benchmark output:"; cat "$dir/bench.out"
fi
timeout 60 $PY "$here/redis_client.py" "$port" verify "$NKEYS"; vrc=$?
echo "verify rc=$vrc"
timeout 30 redis-check-rdb "$dir/dump.rdb" >"$dir/rdbcheck.out" 2>&1
echo "rdb check rc=$?"
cli shutdown nosave >/dev/null 2>&1
src=""
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "server did not stop"; src=137; else wait "$pid"; src=$?; fi
pid=""
echo "server exit=$src"
[ "$brc" = 0 ] && [ "$vrc" = 0 ] && [ "$src" = 0 ] && [ $saved = 1 ]
