#!/bin/sh
# pair.sh SERVER_LIB CLIENT_LIB WAIT SERVER_CMD CLIENT_CMD (written by xtask/src/capi_vm.rs)
#
# Runs SERVER_CMD in the background and CLIENT_CMD against it on this VM's rxe0, each with
# rdma-core's libibverbs (LIB = rdma-core) or uverbs' (LIB = uverbs: LD_LIBRARY_PATH starts
# with /capi/default, where libibverbs.so.1, libefa.so.1 and libmlx5.so.1 are). WAIT is the
# TCP port the server listens on before the client may start (the verbs tools exchange QP
# numbers over TCP), or `retry` for an rdma_cm server: the client is retried until it
# connects (at most 20 tries). In the commands, @GID@ is rxe0's RoCE v2 IPv4 GID index. Both outputs are
# printed; the exit status is 0 when both exited 0.
. /lib/uverbs/lib.sh
srv_lib=$1; cli_lib=$2; wait_for=$3; srv_cmd=$4; cli_cmd=$5
gid=$(roce_v2_ipv4_gid rxe0) || exit 1
libpath() {
    case $1 in
    rdma-core) echo "$LD_LIBRARY_PATH" ;;
    uverbs) echo "/capi/default:$LD_LIBRARY_PATH" ;;
    *) echo "pair.sh: unknown library '$1'" >&2; exit 1 ;;
    esac
}
srv_lp=$(libpath "$srv_lib") || exit 1
cli_lp=$(libpath "$cli_lib") || exit 1
srv_cmd=$(echo "$srv_cmd" | sed "s/@GID@/$gid/g")
cli_cmd=$(echo "$cli_cmd" | sed "s/@GID@/$gid/g")
echo "server ($srv_lib): $srv_cmd"
echo "client ($cli_lib): $cli_cmd"
LD_LIBRARY_PATH=$srv_lp sh -c "exec $srv_cmd" > /tmp/pair_server.log 2>&1 &
srv=$!
crc=1
if [ "$wait_for" = retry ]; then
    i=0
    while [ $i -lt 20 ]; do
        usleep 500000
        LD_LIBRARY_PATH=$cli_lp sh -c "exec $cli_cmd" > /tmp/pair_client.log 2>&1
        crc=$?
        [ $crc -eq 0 ] && break
        kill -0 $srv 2>/dev/null || break
        i=$((i + 1))
    done
else
    # Until the server listens, or has exited (it failed), or 30 s.
    n=0; listening=0
    while [ $n -lt 150 ]; do
        netstat -ltn 2>/dev/null | grep -q ":$wait_for " && { listening=1; break; }
        kill -0 $srv 2>/dev/null || break
        usleep 200000; n=$((n + 1))
    done
    if [ $listening -eq 1 ]; then
        LD_LIBRARY_PATH=$cli_lp sh -c "exec $cli_cmd" > /tmp/pair_client.log 2>&1
        crc=$?
    else
        echo "(not started: the server did not listen on TCP port $wait_for)" > /tmp/pair_client.log
    fi
fi
# A server whose client failed may wait for it forever: give it 5 s then (30 s after a
# client that succeeded), then kill it.
grace=30; [ $crc -eq 0 ] || grace=5
( sleep $grace; kill $srv 2>/dev/null ) &
watchdog=$!
wait $srv
src=$?
kill $watchdog 2>/dev/null
sed 's/^/server: /' /tmp/pair_server.log
sed 's/^/client: /' /tmp/pair_client.log
echo "UVERBS-PAIR server=$src client=$crc"
[ $src -eq 0 ] && [ $crc -eq 0 ]
