#!/usr/bin/env bash
# scripts/cluster.sh runs a three-node RabbitMQ cluster on this machine, beside
# (not instead of) the broker scripts/services.sh runs, to try expiryctl's
# failover between nodes by hand:
#
#   scripts/cluster.sh start    start the nodes, join them, print the AMQP URLs
#   scripts/cluster.sh status   rabbitmqctl cluster_status, and the URLs
#   scripts/cluster.sh stop     stop the nodes (their data stays in CLUSTER_DIR)
#   scripts/cluster.sh stop-node b / start-node b
#                               stop or start one node, as in a node failure
#
# Each node (expiryctl-cluster-a@localhost, -b, -c) has its own ports and
# directories under CLUSTER_DIR and the same Erlang cookie (CLUSTER_DIR/.erlang.cookie,
# shared through HOME). It runs as the calling user; RabbitMQ must be
# installed (scripts/services.sh does that). Then, for example:
#
#   export EXPIRYCTL_AMQP_URL=$(scripts/cluster.sh urls)
#   expiryctl dlq ingest --queue reservation-expiry.dlq --follow
#
# Environment (all optional):
#   CLUSTER_DIR        where the nodes keep their data and logs (/tmp/expiryctl-cluster)
#   CLUSTER_PORT_BASE  node a's AMQP port; the others count up from it (5701):
#                      AMQP BASE+i, management BASE+100+i, distribution BASE+200+i
set -euo pipefail

readonly BIN=/usr/lib/rabbitmq/bin
readonly DIR="${CLUSTER_DIR:-/tmp/expiryctl-cluster}"
readonly BASE="${CLUSTER_PORT_BASE:-5701}"
readonly NODES=(a b c)

die() { echo "cluster.sh: $*" >&2; exit 1; }

index() {
  local i
  for i in "${!NODES[@]}"; do [[ "${NODES[$i]}" == "$1" ]] && { echo "$i"; return; }; done
  die "no node $1 (the nodes are ${NODES[*]})"
}

node_name() { echo "expiryctl-cluster-$1@localhost"; }

# node_env NODE: the environment a node and its rabbitmqctl calls share.
node_env() {
  local i d
  i=$(index "$1")
  d="$DIR/$1"
  echo HOME="$DIR" RABBITMQ_NODENAME="$(node_name "$1")" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT=$((BASE + i)) RABBITMQ_DIST_PORT=$((BASE + 200 + i)) \
    RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" \
    RABBITMQ_PID_FILE="$d/rabbitmq.pid"
}

ctl() { local n=$1; shift; env $(node_env "$n") "$BIN/rabbitmqctl" -n "$(node_name "$n")" "$@"; }

running() { ctl "$1" status >/dev/null 2>&1; }

urls() {
  local i out=()
  for i in "${!NODES[@]}"; do out+=("amqp://guest:guest@127.0.0.1:$((BASE + i))/"); done
  (IFS=,; echo "${out[*]}")
}

start_node() {
  local n=$1 i d
  i=$(index "$n")
  d="$DIR/$n"
  running "$n" && return
  mkdir -p "$d"
  echo "[rabbitmq_management]." >"$d/enabled_plugins"
  printf 'management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = %d\ndisk_free_limit.absolute = 50MB\n' $((BASE + 100 + i)) >"$d/rabbitmq.conf"
  : >"$d/rabbitmq-env.conf"
  echo "cluster.sh: starting $(node_name "$n") on port $((BASE + i))" >&2
  env $(node_env "$n") "$BIN/rabbitmq-server" -detached
  # await_startup refuses at once while the node has not registered with
  # epmd yet, so it is asked again until it answers or 90 s have passed.
  local deadline=$((SECONDS + 90))
  until ctl "$n" await_startup --timeout 60 >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$(node_name "$n") did not start within 90 s: see $d/log"
    sleep 0.3
  done
}

start() {
  [[ -x "$BIN/rabbitmq-server" ]] || die "RabbitMQ is not installed: run scripts/services.sh"
  mkdir -p "$DIR"
  if [[ ! -f "$DIR/.erlang.cookie" ]]; then
    (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F >"$DIR/.erlang.cookie")
    chmod 400 "$DIR/.erlang.cookie"
  fi
  local n
  for n in "${NODES[@]}"; do start_node "$n"; done
  for n in "${NODES[@]:1}"; do
    if ! ctl "$n" cluster_status 2>/dev/null | grep -q "$(node_name a)"; then
      echo "cluster.sh: joining $(node_name "$n") to $(node_name a)" >&2
      ctl "$n" stop_app >/dev/null
      ctl "$n" join_cluster "$(node_name a)" >/dev/null
      ctl "$n" start_app >/dev/null
    fi
  done
  urls
}

stop() {
  local n
  for n in "${NODES[@]}"; do
    if running "$n"; then
      echo "cluster.sh: stopping $(node_name "$n")" >&2
      ctl "$n" stop >/dev/null
    fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) ctl a cluster_status || true; urls ;;
  urls) urls ;;
  stop-node) ctl "${2:?which node}" stop >/dev/null ;;
  start-node) start_node "${2:?which node}" ;;
  *) die "usage: scripts/cluster.sh start|stop|status|urls|stop-node NODE|start-node NODE" ;;
esac
