#!/bin/sh
# scripts/demo.sh start|stop - a Cairn server on loopback with its data in
# ./demo/data, mounted at ./demo/mnt. `make demo` / `make demo-stop`.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cairn="$top/build/cairn"
demo="$top/demo"
port=${CAIRN_DEMO_PORT:-7070}

is_mounted() { grep -q " $demo/mnt fuse" /proc/mounts; }

stop() {
	if is_mounted; then
		"$cairn" umount "$demo/mnt" || umount -l "$demo/mnt"
	fi
	if [ -f "$demo/serve.pid" ]; then
		pid=$(cat "$demo/serve.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
				sleep 0.1; i=$((i + 1))
			done
		fi
		rm -f "$demo/serve.pid"
	fi
	echo "demo stopped (data kept in $demo/data)"
}

start() {
	if is_mounted; then
		echo "demo already running: $demo/mnt is mounted (make demo-stop to stop it)"
		exit 0
	fi
	mkdir -p "$demo/data" "$demo/mnt" "$demo/cache"
	# Root here is the demo's only user, on loopback: not squashed.
	"$cairn" serve --data "$demo/data" --listen "127.0.0.1:$port" \
		--no-root-squash >"$demo/serve.log" 2>&1 &
	echo $! >"$demo/serve.pid"
	i=0
	until grep -q "listening on" "$demo/serve.log" 2>/dev/null; do
		if ! kill -0 "$(cat "$demo/serve.pid")" 2>/dev/null || [ $i -ge 100 ]; then
			echo "demo: the server did not start:" >&2
			cat "$demo/serve.log" >&2
			rm -f "$demo/serve.pid"
			exit 1
		fi
		sleep 0.1; i=$((i + 1))
	done
	# The server made its cell key at the first start; the demo's
	# client uses it from there (elsewhere: copy it to the client as
	# /etc/cairn/cell.key, mode 0600).
	if ! "$cairn" mount --key "$demo/data/cell.key" --cache-dir "$demo/cache" \
		"127.0.0.1:$port" "$demo/mnt"; then
		echo "demo: mount failed; stopping the server" >&2
		stop
		exit 1
	fi
	cat <<MSG
Cairn demo is running.
  server   127.0.0.1:$port, data in $demo/data (log: $demo/serve.log)
  cell key $demo/data/cell.key (clients prove they hold it)
  mount    $demo/mnt (client log: $demo/cache/cairn.log)

Try:
  echo hello > $demo/mnt/hello.txt && cat $demo/mnt/hello.txt
  $cairn status --key $demo/data/cell.key 127.0.0.1:$port
Stop it with:
  make demo-stop
MSG
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
