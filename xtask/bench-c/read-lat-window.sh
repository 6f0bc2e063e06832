#!/bin/sh
# read-lat on 6.12: the window of rxe's send-task race (docs/performance.md, "The rxe
# send-task race"). Runs perftest's ib_read_lat and `uverbs perf read-lat --perftest-defaults`
# once each, traced with kprobes on rdma_rxe's do_task (entry and return), rxe_requester and
# rxe_completer (return values: 0 = progress, -EAGAIN = nothing to do) and rxe_sched_task,
# plus rxe_cq_post, the doorbell write()s, context switches and work queued, and prints 90
# lines from the middle of each trace. Read it per read: the completer posts the CQE and
# returns 0; the task loops and its requester takes the next WQE if it is already published
# (ret 0: the doorbell that follows only re-arms the running task); if not, the task goes
# idle and the doorbell must queue it. kprobes slow the kernel enough that both programs
# usually win the race here: this shows the mechanism, not the odds (read-lat-race.sh).
# Run it in the x86-64 6.12 VM:
#   S=$(cat xtask/bench-c/read-lat-window.sh); cargo xtask vm --kernel 6.12 -- "$S"
. /lib/uverbs/lib.sh
gid=$(roce_v2_ipv4_gid rxe0) || exit 1
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
T=/sys/kernel/tracing
echo 65536 > $T/buffer_size_kb
echo 0 > $T/tracing_on
echo x86-tsc > $T/trace_clock
echo "p:dt rdma_rxe:do_task" >> $T/kprobe_events || { echo "NO KPROBES"; exit 1; }
echo 'r:dtr rdma_rxe:do_task' >> $T/kprobe_events
echo 'r:rqr rdma_rxe:rxe_requester ret=$retval' >> $T/kprobe_events
echo 'r:cpr rdma_rxe:rxe_completer ret=$retval' >> $T/kprobe_events
echo 'p:sched rdma_rxe:rxe_sched_task' >> $T/kprobe_events
cat $T/kprobe_events
echo 1 > $T/events/kprobes/enable
echo rxe_cq_post > $T/set_ftrace_filter
echo function > $T/current_tracer
echo 1 > $T/events/syscalls/sys_enter_write/enable
echo 1 > $T/events/syscalls/sys_exit_write/enable
echo 1 > $T/events/workqueue/workqueue_queue_work/enable
echo 1 > $T/events/sched/sched_switch/enable
port=19000
run() {
  label=$1; shift
  port=$((port+1))
  "$@" -p $port -d rxe0 -x $gid -s 64 -n 2000 > /tmp/srv.log 2>&1 &
  srv=$!
  wait_listening $port 30
  echo > $T/trace
  echo 1 > $T/tracing_on
  out=$("$@" -p $port -d rxe0 -x $gid -s 64 -n 2000 127.0.0.1 2>&1)
  echo 0 > $T/tracing_on
  wait $srv
  echo "$out" | awk -v l="$label" '$1 == "64" && $2 == "2000" { print "RES", l, $5 }'
  grep -v "^#" $T/trace | awk 'NR>20000 && NR<=20090' | sed 's/^ *//' | cut -c1-150
}
run perftest ib_read_lat
run uverbs uverbs perf read-lat --perftest-defaults
