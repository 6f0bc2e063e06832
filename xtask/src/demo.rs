//! `cargo xtask demo`: boot the 6.12 VM and show, for someone who has never used RDMA, what
//! the soft-RoCE device looks like to rdma-core and to our `uverbs` CLI, RC/UD/SRQ ping-pongs
//! between rdma-core's programs and ours, and a short perftest-vs-uverbs comparison.
//!
//! The whole in-guest script is [`DEMO_SCRIPT`]: extend the demo by adding sections there
//! (`say` prints an explanation, `show CMD...` runs a command and reports its exit status
//! honestly, without stopping the demo).

use std::time::Duration;

use crate::guest::{Net, Payload};
use crate::harness::{build_uverbs_cli, Harness};
use crate::kernel::Series;
use crate::util::Result;
use crate::vm::Echo;

/// The demo, as run by the VM's busybox sh (after `/lib/uverbs/lib.sh`).
pub const DEMO_SCRIPT: &str = r###"
# say TEXT: an explanation line; section TEXT: starts a new part of the demo.
say() { echo "## $*"; }
section() { echo; echo "## ---- $* ----"; }
failures=0
show() {
    echo "\$ $*"
    "$@" 2>&1
    rc=$?
    [ $rc -ne 0 ] && echo "(exit status $rc)"
    return $rc
}
# pair PORT LINES "SERVER CMD" "CLIENT CMD": start the server, wait until it listens on TCP
# PORT (where the two sides swap their addresses), run the client, show both outputs (the
# server's last LINES lines). Both sides are bounded in time.
pair() {
    _port=$1; _lines=$2; _srv=$3; _cli=$4
    echo "\$ $_srv &"
    echo "\$ $_cli"
    timeout -s KILL 60 sh -c "$_srv" > /tmp/demo_srv.log 2>&1 &
    _pid=$!
    if ! wait_listening "$_port" 30; then
        kill -9 $_pid 2>/dev/null; cat /tmp/demo_srv.log; return 1
    fi
    timeout -s KILL 60 sh -c "$_cli" > /tmp/demo_cli.log 2>&1
    _crc=$?
    wait $_pid
    _src=$?
    tail -n "$_lines" /tmp/demo_srv.log | sed 's/^/   server | /'
    # Multi-QP runs print one address line per QP: show two and count the rest.
    _n=$(grep -c 'address:' /tmp/demo_cli.log)
    grep 'address:' /tmp/demo_cli.log | head -n 2 | sed 's/^/   client | /'
    [ "$_n" -gt 2 ] && echo "   client | ... $((_n - 2)) more address lines (one per QP)"
    grep -v 'address:' /tmp/demo_cli.log | sed 's/^/   client | /'
    [ $_src -eq 0 ] && [ $_crc -eq 0 ] && return 0
    echo "(server exit status $_src, client exit status $_crc)"
    return 1
}
. /lib/uverbs/lib.sh
gid=$(roce_v2_ipv4_gid rxe0) || { echo "no RoCE v2 GID on rxe0"; exit 1; }
have_uverbs=no; [ -x /usr/bin/uverbs ] && have_uverbs=yes
have_pingpong=no
[ $have_uverbs = yes ] && /usr/bin/uverbs pingpong --help > /dev/null 2>&1 && have_pingpong=yes
have_perf=no
[ $have_uverbs = yes ] && /usr/bin/uverbs perf --help > /dev/null 2>&1 && have_perf=yes

section "What is in this VM"
say "RDMA (remote direct memory access) lets a program put data straight into another"
say "program's memory over the network, without the other side's CPU copying it."
say "This VM runs Debian's $(uname -r) kernel under qemu. It has no RDMA hardware, so the"
say "kernel's soft-RoCE driver (rdma_rxe) provides an RDMA device, rxe0, on a virtual Ethernet"
say "link (veth0, 10.99.0.1). Programs reach it through /dev/infiniband/uverbs0:"
show ls -l /dev/infiniband

section "1. The devices"
say "rdma-core is the C library (libibverbs + one plugin per device type) every RDMA program"
say "uses today. Its ibv_devices lists the devices it finds:"
show /usr/bin/ibv_devices || failures=$((failures + 1))
say "uverbs is a pure-Rust replacement: no C library, no plugins, here one static binary"
say "(/usr/bin/uverbs) that talks to the kernel itself. Its view of the same devices:"
if [ $have_uverbs = yes ]; then
    show /usr/bin/uverbs devices || failures=$((failures + 1))
else
    echo "(the uverbs CLI did not build, so it is not in this VM)"
fi

section "2. What the device can do"
say "Each device has attributes: how many queue pairs (QPs, the endpoints that send and"
say "receive), how large its queues may be, its ports and their state and MTU, and its GIDs"
say "(the addresses peers use; on RoCE they are derived from the IP addresses)."
say "uverbs info prints them the way ibv_devinfo does (CI compares the two field by field):"
if [ $have_uverbs = yes ]; then
    show /usr/bin/uverbs info || failures=$((failures + 1))
    say "The GID table (index 1 is this port's RoCE v2 address for 10.99.0.1):"
    echo "\$ uverbs info -v | grep GID"
    /usr/bin/uverbs info -v 2>&1 | grep -E 'GID\[' | head -n 4
else
    show /usr/bin/ibv_devinfo || failures=$((failures + 1))
fi

section "3. Ping-pong: rdma-core and uverbs talk to each other"
say "A ping-pong bounces messages between a server and a client: each side creates a QP,"
say "they swap addresses over TCP (port 18515 and up), then exchange messages by RDMA."
say "rdma-core ships one program per QP type; 'uverbs pingpong' is wire-compatible with them,"
say "so one side below is rdma-core's C program and the other is uverbs."
say "(Times are meaningless here: the CPU is emulated. Compare ratios, not absolutes.)"
if [ $have_pingpong = yes ]; then
    echo
    say "RC = reliable connection: ordered, acknowledged, like TCP. rdma-core server, uverbs client:"
    pair 18601 2 "ibv_rc_pingpong -d rxe0 -g $gid -n 100 -p 18601" \
        "/usr/bin/uverbs pingpong rc -d rxe0 -g $gid -n 100 -p 18601 127.0.0.1" \
        || failures=$((failures + 1))
    echo
    say "UD = unreliable datagrams: no connection, one message per packet, like UDP; each send"
    say "names its destination through an address handle. uverbs server, rdma-core client:"
    pair 18602 2 "/usr/bin/uverbs pingpong ud -d rxe0 -g $gid -n 100 -s 1024 -p 18602" \
        "ibv_ud_pingpong -d rxe0 -g $gid -n 100 -s 1024 -p 18602 127.0.0.1" \
        || failures=$((failures + 1))
    echo
    say "SRQ = shared receive queue: the server's 16 QPs draw receive buffers from one pool."
    say "rdma-core server, uverbs client:"
    pair 18603 2 "ibv_srq_pingpong -d rxe0 -g $gid -n 100 -q 16 -p 18603" \
        "/usr/bin/uverbs pingpong srq -d rxe0 -g $gid -n 100 -q 16 -p 18603 127.0.0.1" \
        || failures=$((failures + 1))
else
    say "(uverbs pingpong is not in this build: rdma-core's programs on both sides)"
    port=18620
    for m in rc ud srq; do
        size=4096; [ $m = ud ] && size=1024
        port=$((port + 1))
        pair $port 2 "ibv_${m}_pingpong -d rxe0 -g $gid -n 100 -s $size -p $port" \
            "ibv_${m}_pingpong -d rxe0 -g $gid -n 100 -s $size -p $port 127.0.0.1" \
            || failures=$((failures + 1))
    done
fi

section "4. A short performance comparison"
say "perftest's ib_send_lat times 2-byte SENDs bounced back and forth; ib_write_bw streams"
say "64 KiB RDMA WRITEs. Same device, same emulated CPU, rdma-core then uverbs."
say "t_typical = the usual (median) one-way latency in microseconds; BW average = MB/s."
pair 18611 0 "ib_send_lat -d rxe0 -x $gid -n 500 -p 18611" \
    "ib_send_lat -d rxe0 -x $gid -n 500 -p 18611 127.0.0.1 | grep -A1 -E '^ *#bytes'" \
    || failures=$((failures + 1))
if [ $have_perf = yes ]; then
    pair 18612 0 "/usr/bin/uverbs perf send-lat -d rxe0 -x $gid -n 500 -p 18612" \
        "/usr/bin/uverbs perf send-lat -d rxe0 -x $gid -n 500 -p 18612 127.0.0.1 | grep -A1 -E '^ *#bytes'" \
        || failures=$((failures + 1))
fi
pair 18613 0 "ib_write_bw -d rxe0 -x $gid -s 65536 -n 300 -p 18613" \
    "ib_write_bw -d rxe0 -x $gid -s 65536 -n 300 -p 18613 127.0.0.1 | grep -A1 -E '^ *#bytes'" \
    || failures=$((failures + 1))
if [ $have_perf = yes ]; then
    pair 18614 0 "/usr/bin/uverbs perf write-bw -d rxe0 -x $gid -s 65536 -n 300 -p 18614" \
        "/usr/bin/uverbs perf write-bw -d rxe0 -x $gid -s 65536 -n 300 -p 18614 127.0.0.1 | grep -A1 -E '^ *#bytes'" \
        || failures=$((failures + 1))
else
    say "(uverbs perf is not in this build: perftest's numbers alone)"
fi

section "Done"
if [ $failures -eq 0 ]; then
    say "Everything above worked."
else
    say "$failures part(s) of the demo failed: see the exit statuses above."
fi
say "Try things yourself: cargo xtask vm -- '<shell command>'  (see docs/testing.md);"
say "the examples in examples/ run there too (cargo xtask test runs them)."
exit $failures
"###;

pub fn run() -> Result<bool> {
    let cli = match build_uverbs_cli() {
        Ok(p) => Some(p),
        Err(e) => {
            println!("xtask: note: the uverbs CLI did not build, the demo runs without it: {e}");
            None
        }
    };
    let mut h = Harness::new(cli);
    let payload = Payload {
        net: Net::Veth {
            addr: "10.99.0.1/24".into(),
        },
        script: DEMO_SCRIPT.to_string(),
        files: vec![],
    };
    println!("xtask: booting the 6.12 kernel under qemu (software CPU emulation: ~10-20 s) ...");
    let echo = || Echo {
        prefix: String::new(),
        step_banners: false,
        boot_messages: false,
    };
    // A guest kernel that never booted is booted once more by the harness; a demo that ran
    // and failed is never retried.
    let run = h.run(Series::V6_12, &payload, Duration::from_secs(600), echo())?;
    println!();
    if run.success() {
        println!(
            "xtask: demo finished (VM booted in {:.1} s)",
            run.boot_secs.unwrap_or(0.0)
        );
    } else {
        println!("xtask: {}", run.describe());
    }
    Ok(run.success())
}
