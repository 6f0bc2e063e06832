#!/bin/sh
# read-lat on 6.12: rxe's send-task race (docs/performance.md, "The rxe send-task race").
# perftest's ib_read_lat and `uverbs perf read-lat --perftest-defaults`, alternating, each
# client run traced lightly with the x86-tsc clock (rxe_cq_post, the doorbell write(), and
# workqueue_queue_work), and for each run prints:
#   - the median time from the kernel posting a completion to the client's next doorbell
#     write() (its reaction), in ns;
#   - how many doorbells found rxe's send task idle and had to queue it (the slow path),
#     against those that only re-armed it while it was still running.
# Run it in the x86-64 6.12 VM:
#   S=$(cat xtask/bench-c/read-lat-race.sh); cargo xtask vm --kernel 6.12 -- "$S"
# Optional: PIN='taskset -c 1' pins both clients to vCPU 1; ISO=1 keeps unbound kernel
# work (rxe's) on vCPU 0; REPS (default 3).
. /lib/uverbs/lib.sh
gid=$(roce_v2_ipv4_gid rxe0) || exit 1
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing
[ -d $T/events/syscalls ] || { echo "NO TRACEFS SYSCALL EVENTS"; exit 1; }
[ -n "$ISO" ] && echo 1 > /sys/devices/virtual/workqueue/cpumask
echo 65536 > $T/buffer_size_kb
echo 0 > $T/tracing_on
echo x86-tsc > $T/trace_clock
echo rxe_cq_post > $T/set_ftrace_filter
echo function > $T/current_tracer
echo 1 > $T/events/syscalls/sys_enter_write/enable
echo 1 > $T/events/syscalls/sys_exit_write/enable
echo 1 > $T/events/workqueue/workqueue_queue_work/enable
mhz=$(awk '/cpu MHz/ {print $4; exit}' /proc/cpuinfo)
port=19000
run() {
  label=$1; shift
  port=$((port+1))
  $PIN "$@" -p $port -d rxe0 -x $gid -s 64 -n 2000 > /tmp/srv.log 2>&1 &
  srv=$!
  wait_listening $port 30
  echo > $T/trace
  echo 1 > $T/tracing_on
  out=$($PIN "$@" -p $port -d rxe0 -x $gid -s 64 -n 2000 127.0.0.1 2>&1)
  echo 0 > $T/tracing_on
  wait $srv
  w=$(awk -v mhz="$mhz" '
   function ts() { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+:$/) { t = $i; sub(":", "", t); return t * 1000 / mhz } }
   function med(a, n,  i, j, t) { for (i = 1; i < n; i++) { t = a[i]; j = i - 1; while (j >= 0 && a[j] > t) { a[j + 1] = a[j]; j-- } a[j + 1] = t } return n ? a[int(n / 2)] : -1 }
   /rxe_cq_post/ { cq = ts(); next }
   /sys_write\(fd/ && /count: 20/ { e = ts(); if (cq > 0) r[nr++] = e - cq; cq = 0; inw = 1; qw = 0; next }
   /workqueue_queue_work/ && inw && !/kworker/ { qw = 1; next }
   /sys_write ->/ && inw { nq += qw; nw++; inw = 0 }
   END { printf "reaction median %.0f ns | doorbells that queued the task: %d of %d", med(r, nr), nq, nw }' $T/trace)
  echo "$out" | awk -v l="$label" -v w="$w" '$1 == "64" && $2 == "2000" { print "RES", l, "t_typical", $5, "|", w }'
}
for i in $(seq 1 ${REPS:-3}); do
  run perftest ib_read_lat
  run uverbs uverbs perf read-lat --perftest-defaults
done
