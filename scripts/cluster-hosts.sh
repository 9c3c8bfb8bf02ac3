#!/usr/bin/env bash
# Test hosts on one machine: network namespaces h1..hN joined by a bridge,
# each with its own address in 10.213.0.0/24 (a range that exists only
# inside these namespaces), its own host name and /etc/hosts.  The bridge
# sits in a namespace of its own (CLUSTER-sw), so nothing is added to the
# machine's own network.  Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN).
#
#   cluster-hosts.sh up CLUSTER N      make hosts h1..hN (10.213.0.K = hK)
#   cluster-hosts.sh down CLUSTER      remove them (kills what runs there)
#   cluster-hosts.sh exec CLUSTER hK CMD [ARGS]   run CMD on host hK
#   cluster-hosts.sh cut CLUSTER hK    pull hK's cable (switch port down)
#   cluster-hosts.sh join CLUSTER hK   plug it back in
#   cluster-hosts.sh rsh hK CMD...     Open MPI launch agent: runs the shell
#                                      command CMD on hK of $BF_CLUSTER
#
# With Open MPI: run mpirun on one host and let it reach the others through
# the `rsh` agent (docs/cluster.md, tests/cluster/run.sh):
#   BF_CLUSTER=c cluster-hosts.sh exec c h2 mpirun --hostfile F \
#       --mca plm_rsh_agent "$PWD/scripts/cluster-hosts.sh rsh" ...
set -euo pipefail

SUBNET_PREFIX=10.213.0

die() { echo "cluster-hosts: $*" >&2; exit 1; }

ns_of() { echo "$1-$2"; }          # CLUSTER hK -> namespace name

host_number() {
    [[ $1 =~ ^h([0-9]+)$ ]] || die "bad host name '$1' (expected h1, h2, ...)"
    echo "${BASH_REMATCH[1]}"
}

cmd_up() {
    local cluster=$1 n=$2 k sw
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] \
        || die "up: N must be 1..200, got '$n'"
    sw=$(ns_of "$cluster" sw)
    ip netns add "$sw" \
        || die "cannot create network namespace $sw (not root, or the kernel refuses network namespaces)"
    ip -n "$sw" link add br0 type bridge || die "cannot create a bridge in $sw"
    ip -n "$sw" link set br0 up
    local hosts="127.0.0.1 localhost"$'\n'
    for k in $(seq "$n"); do
        hosts+="$SUBNET_PREFIX.$k h$k"$'\n'
    done
    for k in $(seq "$n"); do
        local ns
        ns=$(ns_of "$cluster" "h$k")
        ip netns add "$ns" || die "cannot create network namespace $ns"
        ip link add eth0 netns "$ns" type veth peer name "h$k" netns "$sw" \
            || die "cannot create a veth pair for $ns"
        ip -n "$sw" link set "h$k" master br0
        ip -n "$sw" link set "h$k" up
        ip -n "$ns" addr add "$SUBNET_PREFIX.$k/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        # `ip netns exec` bind-mounts /etc/netns/NS/* over /etc.
        mkdir -p "/etc/netns/$ns"
        printf '%s' "$hosts" > "/etc/netns/$ns/hosts"
        echo "h$k" > "/etc/netns/$ns/hostname"
    done
}

# Kills every process left in a namespace, then removes it.
remove_ns() {
    local ns=$1 pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.2
    fi
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
}

cmd_down() {
    local cluster=$1 ns
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$cluster-(h[0-9]+|sw)$" || true); do
        remove_ns "$ns"
    done
}

# Network namespace of hK plus a UTS namespace named hK, so that Open MPI
# and the worker see distinct host names.
cmd_exec() {
    local cluster=$1 host=$2; shift 2
    host_number "$host" > /dev/null
    exec ip netns exec "$(ns_of "$cluster" "$host")" \
        unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

cmd_link() {
    local cluster=$1 host=$2 state=$3
    host_number "$host" > /dev/null
    ip -n "$(ns_of "$cluster" sw)" link set "$host" "$state"
}

# Open MPI calls the agent as `AGENT HOST COMMAND...`, COMMAND being words
# for a remote shell (like ssh).
cmd_rsh() {
    local host=$1; shift
    : "${BF_CLUSTER:?rsh: set BF_CLUSTER to the cluster name}"
    cmd_exec "$BF_CLUSTER" "$host" sh -c "$*"
}

[ $# -ge 1 ] || die "usage: cluster-hosts.sh up|down|exec|cut|join|rsh ..."
verb=$1; shift
case $verb in
    up)   [ $# -eq 2 ] || die "usage: up CLUSTER N"; cmd_up "$@" ;;
    down) [ $# -eq 1 ] || die "usage: down CLUSTER"; cmd_down "$@" ;;
    exec) [ $# -ge 3 ] || die "usage: exec CLUSTER hK CMD..."; cmd_exec "$@" ;;
    cut)  [ $# -eq 2 ] || die "usage: cut CLUSTER hK"; cmd_link "$1" "$2" down ;;
    join) [ $# -eq 2 ] || die "usage: join CLUSTER hK"; cmd_link "$1" "$2" up ;;
    rsh)  [ $# -ge 2 ] || die "usage: rsh hK CMD..."; cmd_rsh "$@" ;;
    *)    die "unknown command '$verb'" ;;
esac
