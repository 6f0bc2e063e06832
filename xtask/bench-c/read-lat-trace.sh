#!/bin/sh
# read-lat on 6.12 under a scheduler trace (docs/performance.md, "The rxe send-task race"):
# perftest's ib_read_lat and `uverbs perf read-lat --perftest-defaults`, alternating, each client
# run with sched_wakeup/sched_switch traced, printed between TRACE-BEGIN/TRACE-END lines. Run it with
#   S=$(cat xtask/bench-c/read-lat-trace.sh); cargo xtask vm --kernel 6.12 -- "cat > /tmp/t.sh <<'EOF'"$'\n'"$S"$'\n'"EOF"$'\n'"sh /tmp/t.sh" > trace.txt
# and count, per client, the kworker runs on the client's vCPU and the client's preemptions.
. /lib/uverbs/lib.sh
gid=$(roce_v2_ipv4_gid rxe0)
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing
[ -d $T/events/sched ] || { echo "NO TRACEFS"; ls $T; exit 1; }
echo 16384 > $T/buffer_size_kb
port=19000
run() { # name prog...
  name=$1; shift
  port=$((port+1))
  $@ -d rxe0 -x $gid -s 64 -n 3000 -p $port > /tmp/srv.log 2>&1 &
  srv=$!
  wait_listening $port 30
  echo > $T/trace
  echo 1 > $T/events/sched/sched_wakeup/enable
  echo 1 > $T/events/sched/sched_switch/enable
  echo 1 > $T/tracing_on
  $@ -d rxe0 -x $gid -s 64 -n 3000 -p $port 127.0.0.1 > /tmp/cli.log 2>&1
  echo 0 > $T/tracing_on
  wait $srv
  echo "RES $name :: $(grep -E '^ 64 +3000' /tmp/cli.log)"
  echo "TRACE-BEGIN $name"
  grep -E "sched_wakeup|sched_switch" $T/trace | grep -E "kworker|ib_read_lat|uverbs" | sed -E 's/^ +//' 
  echo "TRACE-END $name"
}
run theirs ib_read_lat
run ours uverbs perf read-lat --perftest-defaults
run theirs2 ib_read_lat
run ours2 uverbs perf read-lat --perftest-defaults
