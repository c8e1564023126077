#!/usr/bin/env bash
# Throughput of `omnirt bench pipeline` across two nodes, next to the one-host run of the same
# pipeline (docs/multi_node.md "Throughput", docs/benchmarks.md). Two network namespaces joined
# by a veth pair stand for two hosts (10.77.2.1 / 10.77.2.2): the bench runs in the first as
# node 0 (coordinator and closed loop), `omnirt serve --node-rank 1` in the second, and the
# stages are placed by --stage-nodes so that the payload crosses the link through the ucx
# relay over TCP (UCX_TLS=tcp, what two hosts without RDMA have). Then the same pipeline on one
# host (all stages in the first namespace, shm between them), and the ratio of the two.
# --rounds N alternates the two runs N times (a shared host's load drifts; the ratio of runs
# next to each other is what to compare) and prints every round and the median ratio. Each
# round also measures the link's own ceiling: one TCP stream of payload-sized messages over the
# veth pair (python3), divided by the times the payload crosses the link per request.
#
#   bench/multi_node_throughput.sh [--stage-nodes 0,1,0] [--payload-bytes 4194304]
#                                  [--concurrency 4] [--requests 2000] [--rounds 1]
#                                  [--mtu 1500] [--json FILE] [-- EXTRA BENCH FLAGS]
#
# Needs root, `ip` and network namespaces (exits 77 with the reason otherwise). OMNIRT_BIN: the
# omnirt binary (default build/bin/omnirt). The namespaces, processes and the private runtime
# directory are removed on exit whatever happens; no traffic leaves the namespaces.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
omnirt=${OMNIRT_BIN:-$here/../build/bin/omnirt}
stage_nodes=0,1,0
payload=4194304
concurrency=4
requests=2000
rounds=1
mtu=1500
json_out=""
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --stage-nodes) stage_nodes=$2; shift 2 ;;
        --payload-bytes) payload=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --json) json_out=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
stages=$(awk -F, '{print NF}' <<< "$stage_nodes")
# Times a request's payload crosses between the nodes (consecutive stages on different nodes).
crossings=$(awk -F, '{ n = 0; for (i = 2; i <= NF; i++) if ($i != $(i - 1)) n++; print n }' \
    <<< "$stage_nodes")

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
[ -x "$omnirt" ] || { echo "no omnirt binary at $omnirt (set OMNIRT_BIN)" >&2; exit 2; }

tag=$$
ns_head=omnirt-tp-$tag-0
ns_node=omnirt-tp-$tag-1
veth_head=omp${tag}a
veth_node=omp${tag}b
work=$(mktemp -d "${TMPDIR:-/tmp}/omnirt-throughput.XXXXXX")
node_pid=""
created=()
cleanup() {
    if [ -n "$node_pid" ]; then
        kill -TERM "$node_pid" 2> /dev/null || true
        for _ in $(seq 1 100); do kill -0 "$node_pid" 2> /dev/null || break; sleep 0.1; done
        kill -KILL "$node_pid" 2> /dev/null || true
    fi
    local ns
    for ns in "${created[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
die() {
    echo "FAIL: $*" >&2
    [ -f "$work/node1.log" ] && { echo "---- node 1 (last 40 lines)" >&2; tail -n 40 "$work/node1.log" >&2; }
    exit 1
}

ip netns add "$ns_head" 2> /dev/null || skip "ip netns add failed (no network namespaces here)"
created+=("$ns_head")
ip netns add "$ns_node" || die "ip netns add $ns_node"
created+=("$ns_node")
ip link add "$veth_head" mtu "$mtu" type veth peer name "$veth_node" mtu "$mtu" ||
    skip "cannot create a veth pair"
ip link set "$veth_head" netns "$ns_head"
ip link set "$veth_node" netns "$ns_node"
ip -n "$ns_head" addr add 10.77.2.1/24 dev "$veth_head"
ip -n "$ns_node" addr add 10.77.2.2/24 dev "$veth_node"
for ns in "$ns_head" "$ns_node"; do ip -n "$ns" link set lo up; done
ip -n "$ns_head" link set "$veth_head" up
ip -n "$ns_node" link set "$veth_node" up

# Private runtime directories; node 1's stage processes need the test stages.
export XDG_RUNTIME_DIR=$work/run
mkdir -p "$XDG_RUNTIME_DIR"
export OMNIRT_TEST_STAGES=1
# UCX over TCP, only on the link between the nodes (UCX 1.13 gives up on a peer that also
# advertises an interface it cannot reach, its lo: docs/multi_node.md). The caller's choice wins.
export UCX_TLS=${UCX_TLS:-tcp}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-$veth_head,$veth_node}

common=(bench pipeline --stages "$stages" --payload-bytes "$payload" --concurrency "$concurrency"
    --requests "$requests" "${extra[@]}")
join_port=29500

field() { sed -n "s/^ *\"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$1"; }

# link_ceiling: payload-sized messages per second over one TCP stream from node 0 to node 1.
link_ceiling() {
    command -v python3 > /dev/null || { echo 0; return; }
    ip netns exec "$ns_node" python3 - "$payload" > "$work/sink.txt" 2>&1 << 'PY' &
import socket, sys
server = socket.create_server(("10.77.2.2", 29600))
print("listening", flush=True)
connection, _ = server.accept()
buffer = memoryview(bytearray(int(sys.argv[1])))
while connection.recv_into(buffer):
    pass
connection.sendall(b"x")
PY
    local sink=$!
    for _ in $(seq 1 100); do grep -qs listening "$work/sink.txt" && break; sleep 0.05; done
    ip netns exec "$ns_head" python3 - "$payload" "$requests" << 'PY'
import socket, sys, time
size, count = int(sys.argv[1]), int(sys.argv[2])
connection = socket.create_connection(("10.77.2.2", 29600))
data = bytes(size)
start = time.monotonic()
for _ in range(count):
    connection.sendall(data)
connection.shutdown(socket.SHUT_WR)
connection.recv(1)
print(f"{count / (time.monotonic() - start):.1f}")
PY
    wait "$sink" || true
}

# two_nodes OUT: the bench as node 0 with `omnirt serve --node-rank 1` in the other namespace.
two_nodes() {
    ip netns exec "$ns_node" "$omnirt" serve --nnodes 2 --node-rank 1 \
        --dist-init-addr "10.77.2.1:$join_port" --node-addr 10.77.2.2 --port 0 \
        --node-join-timeout 60 > "$work/node1.log" 2>&1 &
    node_pid=$!
    ip netns exec "$ns_head" "$omnirt" "${common[@]}" --nnodes 2 \
        --dist-init-addr "10.77.2.1:$join_port" --node-addr 10.77.2.1 --node-join-timeout 60 \
        --stage-nodes "$stage_nodes" --json "$1.json" > "$1.txt" 2>&1 ||
        die "two-node bench failed: $(tail -n 20 "$1.txt")"
    # Told by the head, node 1 stops its stages and exits 0.
    for _ in $(seq 1 200); do kill -0 "$node_pid" 2> /dev/null || break; sleep 0.05; done
    local node_exit=0
    wait "$node_pid" || node_exit=$?
    node_pid=""
    [ "$node_exit" = 0 ] || die "node 1 exited $node_exit"
}

# one_host OUT: the same pipeline, every stage in the first namespace.
one_host() {
    ip netns exec "$ns_head" "$omnirt" "${common[@]}" --json "$1.json" > "$1.txt" 2>&1 ||
        die "one-host bench failed: $(tail -n 20 "$1.txt")"
}

table() { grep -A2 "^pipeline bench:" "$1"; }

ratios=()
echo "omnirt bench pipeline, $stages stages, payload $payload B, concurrency $concurrency," \
    "$requests requests; two nodes: stage nodes $stage_nodes ($crossings link crossings per" \
    "request), ucx with UCX_TLS=$UCX_TLS, veth mtu $mtu; one host: shm"
for round in $(seq 1 "$rounds"); do
    two_nodes "$work/two.$round"
    one_host "$work/one.$round"
    for run in two one; do
        failed=$(field "$work/$run.$round.json" failed)
        [ "$failed" = 0 ] || die "round $round, $run: $failed requests failed"
    done
    two=$(field "$work/two.$round.json" requests_per_second | awk '{ printf "%.1f", $1 }')
    one=$(field "$work/one.$round.json" requests_per_second | awk '{ printf "%.1f", $1 }')
    link=$(link_ceiling)
    ratio=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.3f", a / b }')
    of_link=$(awk -v a="$two" -v l="$link" -v c="$crossings" \
        'BEGIN { if (l > 0 && c > 0) printf "%.2f", a * c / l; else printf "n/a" }')
    ratios+=("$ratio")
    echo "== round $round (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    echo "-- two nodes"
    table "$work/two.$round.txt"
    echo "-- one host"
    table "$work/one.$round.txt"
    echo "-- two nodes / one host: $ratio; the link carries $link payloads/s one way, the two" \
        "nodes moved $crossings x $two over it ($of_link of the link)"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
echo "== two nodes / one host, median of $rounds: $median ($(date -u +%FT%TZ), $(hostname)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg))"
if [ -n "$json_out" ]; then
    printf '{"stage_nodes": "%s", "payload_bytes": %s, "concurrency": %s, "requests": %s, "mtu": %s, "ratios": [%s], "median_ratio": %s}\n' \
        "$stage_nodes" "$payload" "$concurrency" "$requests" "$mtu" \
        "$(IFS=,; echo "${ratios[*]}")" "$median" > "$json_out"
fi
