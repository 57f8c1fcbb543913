# Shared by bench/run and bench/profile: tools, build, certificates, ports,
# configs, starting and stopping the processes under test. Sourced, not run.
# shellcheck shell=bash disable=SC2034  # variables read by the scripts that source this

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
LIB_DIR="$BENCH_DIR/lib"

# CPU placement (taskset -c lists). The server under test gets its own CPU;
# the load generator and the TLS upstream share the other one.
SERVER_CPUS=${BENCH_SERVER_CPUS:-1}
CLIENT_CPUS=${BENCH_CLIENT_CPUS:-0}
UPSTREAM_CPUS=${BENCH_UPSTREAM_CPUS:-0}
GATEWAY_WORKERS=${BENCH_GATEWAY_WORKERS:-1}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-$GATEWAY_WORKERS}
WRK_THREADS=${BENCH_WRK_THREADS:-1}

HOT_IDS="premium_monthly,premium_yearly,coins_100,coins_1200,remove_ads"

PIDS=()
LAST_PID=
WORK=

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_tools cmd:package ... — installs the packages whose command is missing
# (apt-get update first), with sudo only when not root.
ensure_tools() {
    local missing=() pair cmd pkg
    for pair in "$@"; do
        cmd=${pair%%:*} pkg=${pair#*:}
        command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/sbin/$cmd" ] || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    install_packages "${missing[@]}"
}

install_packages() {
    command -v apt-get >/dev/null 2>&1 || die "missing $* and no apt-get to install them"
    log "installing $*"
    as_root apt-get update -qq >&2 || die "apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
        die "apt-get install $* failed"
}

# The packages every bench command needs, the C libraries of the build, a
# Swift toolchain on PATH and a C compiler for the malloc counter.
ensure_environment() {
    export PATH="$PATH:/usr/sbin:/sbin"
    if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null 2>&1 || die "no swift on PATH (install Swift 6, or put it on PATH)"
    ensure_tools wrk:wrk nginx:nginx-light openssl:openssl taskset:util-linux curl:curl python3:python3 \
        pkg-config:pkg-config pgrep:procps
    if ! pkg-config --exists libevent_openssl openssl hiredis yaml-0.1 2>/dev/null; then
        install_packages libevent-dev libssl-dev libhiredis-dev libyaml-dev
    fi
    # The shared-tier scenarios (gateway_redis_hit, herd_replicas).
    ensure_tools redis-server:redis-server redis-cli:redis-server
    if [ -z "${CC:-}" ]; then
        if command -v cc >/dev/null 2>&1; then CC=cc
        elif command -v clang >/dev/null 2>&1; then CC=clang
        else ensure_tools gcc:gcc; CC=gcc; fi
    fi
    NGINX_BIN=$(command -v nginx)
    # 1000 client connections, and as many on the server side.
    local hard
    hard=$(ulimit -Hn)
    if [ "$hard" = unlimited ] || [ "$hard" -ge 65536 ]; then ulimit -n 65536; else ulimit -n "$hard"; fi
    [ "$(ulimit -n)" -ge 4096 ] || log "warning: open-file limit $(ulimit -n) is low for 1000 connections"
    local cpus
    cpus=$(nproc)
    if [ "$cpus" -lt 2 ] && [ -z "${BENCH_SERVER_CPUS:-}" ]; then
        log "warning: one CPU only; server, client and upstream share CPU 0"
        SERVER_CPUS=0 CLIENT_CPUS=0 UPSTREAM_CPUS=0
    fi
}

# The image's build (Dockerfile): release, the Swift standard library linked
# in statically. Its own scratch path, so that it never rebuilds (or is
# rebuilt by) the default `swift build -c release`.
RELEASE_FLAGS=(-c release --static-swift-stdlib --scratch-path "$REPO_DIR/.build/image")

# The allocator settings the image runs the gateway with (its
# `ENV GLIBC_TUNABLES`), read from the Dockerfile so that every bench
# measures the gateway as it ships.
IMAGE_GLIBC_TUNABLES=$(sed -n 's/^[[:space:]]*GLIBC_TUNABLES=\([^[:space:]]*\).*/\1/p' "$REPO_DIR/Dockerfile")

# The pod's memory limit in the Kubernetes manifest, in KiB (the batch
# scenario's peak RSS is held against it): the first `memory:` after
# `limits:`, in Mi or Gi.
MANIFEST_MEMORY_LIMIT_KB=$(awk '
    /^[[:space:]]*limits:/ { in_limits = 1; next }
    in_limits && /^[[:space:]]*memory:/ {
        value = $2; gsub(/"/, "", value)
        if (value ~ /Mi$/) { print (value + 0) * 1024; exit }
        if (value ~ /Gi$/) { print (value + 0) * 1048576; exit }
    }' "$REPO_DIR/deploy/kubernetes/deployment.yaml")
MANIFEST_MEMORY_LIMIT_KB=${MANIFEST_MEMORY_LIMIT_KB:-0}

# Release build of both binaries, as the image builds them, and of the
# extra products named (build_release fault-proxy: bench/hosts)
# (BENCH_SKIP_BUILD=1 reuses the last one).
build_release() {
    local product
    cd "$REPO_DIR" || exit 1
    if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
        log "building release binaries (swift build ${RELEASE_FLAGS[*]})"
        for product in products-gateway mock-upstream "$@"; do
            swift build "${RELEASE_FLAGS[@]}" --product "$product" >&2 || die "build of $product failed"
        done
    fi
    BIN_DIR=$(swift build "${RELEASE_FLAGS[@]}" --show-bin-path)
    GATEWAY_BIN="$BIN_DIR/products-gateway"
    MOCK_BIN="$BIN_DIR/mock-upstream"
    FAULT_PROXY_BIN="$BIN_DIR/fault-proxy"
    [ -x "$GATEWAY_BIN" ] && [ -x "$MOCK_BIN" ] || die "release binaries not found in $BIN_DIR"
    for product in "$@"; do
        [ -x "$BIN_DIR/$product" ] || die "release binary $product not found in $BIN_DIR"
    done
}

# The temporary directory of this run, removed by cleanup (kept with
# BENCH_KEEP_TMP=1).
make_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/onside-bench.XXXXXX")
    mkdir -p "$WORK/certs" "$WORK/nginx" "$WORK/logs"
}

# Stops one process we started: SIGTERM, up to 5 s, then SIGKILL for it and
# its direct children (nginx workers).
stop_pid() {
    local pid=$1 children i
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    children=$(pgrep -P "$pid" 2>/dev/null || true)
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        for i in $children; do kill -KILL "$i" 2>/dev/null; done
    fi
    wait "$pid" 2>/dev/null
    return 0
}

cleanup() {
    local status=$? i
    trap - EXIT INT TERM
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "${BENCH_KEEP_TMP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
    fi
    exit "$status"
}

install_cleanup_trap() {
    trap cleanup EXIT
    trap 'log "interrupted"; exit 130' INT TERM
}

# start_bg NAME CPUS COMMAND... — runs COMMAND pinned to CPUS in the
# background, output in $WORK/logs/NAME.{out,err}; sets LAST_PID.
start_bg() {
    local name=$1 cpus=$2
    shift 2
    taskset -c "$cpus" "$@" >"$WORK/logs/$name.out" 2>"$WORK/logs/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# stop_started PID — stops it and forgets it.
stop_started() {
    local pid=$1 kept=() p
    stop_pid "$pid"
    for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || kept+=("$p"); done
    PIDS=("${kept[@]}")
}

# A free port outside the ephemeral range (the gateway binds with
# SO_REUSEPORT, so a port another process holds must be avoided, not shared).
# free_port VAR — sets VAR (not in a subshell, so ports are never handed out twice).
USED_PORTS=" "
free_port() {
    local _free
    _free=$(python3 - "$USED_PORTS" <<'PY'
import random, socket, sys
used = set(sys.argv[1].split())
for _ in range(500):
    port = random.randrange(20000, 32000)
    if str(port) in used:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    sys.exit("no free port found")
PY
) || die "no free port"
    USED_PORTS="$USED_PORTS$_free "
    printf -v "$1" '%s' "$_free"
}

# wait_http NAME PID URL [curl args...] — until URL answers 200 (20 s).
wait_http() {
    local name=$1 pid=$2 url=$3 i
    shift 3
    for i in $(seq 200); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$WORK/logs/$name.err" >&2 2>/dev/null
            die "$name exited during start-up"
        fi
        if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$url" 2>/dev/null)" = 200 ]; then
            return 0
        fi
        sleep 0.1
    done
    tail -n 20 "$WORK/logs/$name.err" >&2 2>/dev/null
    die "$name did not answer $url"
}

# A CA and a server certificate for localhost and 127.0.0.1, signed by it.
make_certs() {
    local dir="$WORK/certs"
    (
        cd "$dir" || exit 1
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj "/CN=Onside Bench CA" -keyout ca.key -out ca.pem \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null &&
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
            -keyout server.key -out server.csr 2>/dev/null &&
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >server.ext &&
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile server.ext -out server.pem 2>/dev/null
    ) || die "openssl could not make the certificates"
    CA_FILE="$dir/ca.pem"
    CERT_FILE="$dir/server.pem"
    KEY_FILE="$dir/server.key"
}

# nginx_quote FILE — the file as an nginx single-quoted string.
nginx_quote() {
    python3 - "$1" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
if "$" in text:
    sys.exit("a body for nginx 'return' cannot hold '$'")
print("'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'")
PY
}

# The common head of every nginx config we write (foreground, own paths).
nginx_head() {
    local name=$1 workers=$2
    local dir="$WORK/nginx/$name"
    mkdir -p "$dir/tmp"
    [ "$(id -u)" -eq 0 ] && echo "user root;"
    cat <<EOF
daemon off;
master_process on;
worker_processes $workers;
pid $dir/nginx.pid;
error_log $WORK/logs/$name.error.log warn;
events { worker_connections 8192; multi_accept on; }
EOF
}

nginx_http_head() {
    local name=$1
    local dir="$WORK/nginx/$name"
    cat <<EOF
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 75s;
    server_tokens off;
EOF
}

# start_nginx NAME CPUS CONFIG_FILE — foreground nginx with its own prefix.
start_nginx() {
    local name=$1 cpus=$2 conf=$3
    "$NGINX_BIN" -t -q -p "$WORK/nginx/$name" -e "$WORK/logs/$name.error.log" -c "$conf" 2>"$WORK/logs/$name.test.err" ||
        { cat "$WORK/logs/$name.test.err" >&2; die "nginx config $conf is invalid"; }
    start_bg "$name" "$cpus" "$NGINX_BIN" -p "$WORK/nginx/$name" -e "$WORK/logs/$name.error.log" -c "$conf"
}

# The TLS upstream: nginx answering GET /v1/apps/{app}/products with the
# fixed 5-product body; on UPSTREAM_HOT_PORT with Cache-Control: max-age=30,
# on UPSTREAM_COLD_PORT with no caching headers. Sets UPSTREAM_PID.
start_upstream_nginx() {
    free_port UPSTREAM_HOT_PORT
    free_port UPSTREAM_COLD_PORT
    local body conf="$WORK/nginx/upstream.conf"
    body=$(nginx_quote "$LIB_DIR/upstream-body.json") || die "bad upstream body"
    {
        nginx_head upstream "${BENCH_UPSTREAM_WORKERS:-1}"
        echo "http {"
        nginx_http_head upstream
        cat <<EOF
    ssl_certificate $CERT_FILE;
    ssl_certificate_key $KEY_FILE;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:upstream_tls:1m;
    server {
        listen 127.0.0.1:$UPSTREAM_HOT_PORT ssl;
        location ~ ^/v1/apps/[^/]+/products\$ {
            default_type application/json;
            add_header Cache-Control "max-age=30";
            return 200 $body;
        }
        location / { return 404; }
    }
    server {
        listen 127.0.0.1:$UPSTREAM_COLD_PORT ssl;
        location ~ ^/v1/apps/[^/]+/products\$ {
            default_type application/json;
            return 200 $body;
        }
        location / { return 404; }
    }
}
EOF
    } >"$conf"
    start_nginx upstream "$UPSTREAM_CPUS" "$conf"
    UPSTREAM_PID=$LAST_PID
    wait_http upstream "$UPSTREAM_PID" "https://127.0.0.1:$UPSTREAM_HOT_PORT/v1/apps/bench/products?ids=$HOT_IDS&country=DE" --cacert "$CA_FILE"
    wait_http upstream "$UPSTREAM_PID" "https://127.0.0.1:$UPSTREAM_COLD_PORT/v1/apps/bench/products?ids=$HOT_IDS&country=DE" --cacert "$CA_FILE"
}

# start_gateway NAME UPSTREAM_PORT [VAR=value...] — the release gateway,
# pinned to the server CPUs, one worker, with a clean environment. Sets
# GATEWAY_PID and GATEWAY_URL.
start_gateway() {
    local name=$1 upstream_port=$2 port
    shift 2
    free_port port
    start_bg "$name" "$SERVER_CPUS" env -i PATH="$PATH" HOME="${HOME:-/root}" \
        GATEWAY_LISTEN="127.0.0.1:$port" \
        GATEWAY_WORKERS="$GATEWAY_WORKERS" \
        GLIBC_TUNABLES="$IMAGE_GLIBC_TUNABLES" \
        ONSIDE_UPSTREAM_URL="https://127.0.0.1:$upstream_port" \
        ONSIDE_APP_ID=bench \
        ONSIDE_CA_FILE="$CA_FILE" \
        LOG_LEVEL="${BENCH_GATEWAY_LOG_LEVEL:-warning}" \
        GATEWAY_SHUTDOWN_GRACE_MS=1000 \
        GATEWAY_MAX_CONNECTIONS=8192 \
        "$@" "$GATEWAY_BIN"
    GATEWAY_PID=$LAST_PID
    GATEWAY_URL="http://127.0.0.1:$port"
    wait_http "$name" "$GATEWAY_PID" "$GATEWAY_URL/readyz"
}

# start_redis — a redis-server on the upstream's CPUs, keeping nothing on disk.
# Sets REDIS_PORT and REDIS_PID.
start_redis() {
    free_port REDIS_PORT
    start_bg redis "$UPSTREAM_CPUS" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$WORK" --loglevel warning
    REDIS_PID=$LAST_PID
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    die "redis-server did not start"
}

# start_redis_hit_gateway NAME — a gateway on the shared tier (start_redis
# first) whose memory cache keeps nothing (GATEWAY_CACHE_MAX_BYTES=0), so
# every call of $WORK/hot-request.json is a memory miss answered by one
# Redis round trip (MGET). Fills Redis and checks that it is hit. Sets
# GATEWAY_PID and GATEWAY_URL.
start_redis_hit_gateway() {
    start_gateway "$1" "$UPSTREAM_HOT_PORT" GATEWAY_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" GATEWAY_CACHE_MAX_BYTES=0
    for _ in $(seq 100); do
        [ "$(metric_sum "$GATEWAY_URL" gateway_shared_tier_connections)" = "$GATEWAY_WORKERS" ] && break
        sleep 0.05
    done
    rpc "$GATEWAY_URL" "$WORK/hot-request.json" >/dev/null
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$REDIS_PORT" DBSIZE)" -ge 5 ] && break
        sleep 0.05
    done
    check_hot_answer "$(rpc "$GATEWAY_URL" "$WORK/hot-request.json")" || die "the shared-tier gateway answers wrongly"
    [ "$(metric_sum "$GATEWAY_URL" gateway_shared_cache_hits_total)" -ge 5 ] || die "the shared-tier gateway does not hit Redis"
}

# rpc URL BODY_FILE — one call, the answer on stdout.
rpc() {
    curl -s --max-time 10 -H 'Content-Type: application/json' --data-binary "@$2" "$1/rpc"
}

# check_hot_answer JSON — all 5 products, nothing invalid.
check_hot_answer() {
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])["result"]
assert len(r["products"]) == 5 and r["invalidProductIdentifiers"] == [], r
' "$1" 2>/dev/null
}

# sum_series NAME [REGEX] — on a /metrics text (stdin): the sum of a series
# over its labels (those matching REGEX).
sum_series() {
    awk -v name="$1" -v filter="${2:-}" '
        index($1, name) == 1 && (substr($1, length(name) + 1, 1) == "{" || length($1) == length(name)) {
            if (filter == "" || $1 ~ filter) sum += $NF
        }
        END { printf "%.0f\n", sum }'
}

# metric_sum URL NAME [REGEX] — the same, scraped now; -1 when /metrics does
# not answer.
metric_sum() {
    local text
    text=$(curl -sf --max-time 10 "$1/metrics") || { echo -1; return 1; }
    printf '%s\n' "$text" | sum_series "$2" "${3:-}"
}

# rpc_outcomes — on a /metrics text (stdin): JSON object of the call outcomes
# that happened (outcome -> count, summed over methods), e.g. {"ok":120}.
rpc_outcomes() {
    awk '
        index($1, "gateway_rpc_requests_total{") == 1 && $NF > 0 {
            if (match($1, /outcome="[^"]*"/)) n[substr($1, RSTART + 9, RLENGTH - 10)] += $NF
        }
        END {
            out = ""
            for (k in n) out = out (out == "" ? "" : ",") sprintf("\"%s\":%.0f", k, n[k])
            printf "{%s}\n", out
        }'
}

# wait_quiet URL — until the gateway's call count stops moving (calls wrk
# left in flight when it stopped are still being answered), at most 5 s.
wait_quiet() {
    local previous=-2 now _
    for _ in $(seq 25); do
        now=$(metric_sum "$1" gateway_rpc_requests_total)
        [ "$now" = "$previous" ] && return 0
        previous=$now
        sleep 0.2
    done
}

# proc_kb PID FIELD — VmHWM / VmRSS in kB.
proc_kb() {
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# cpu_ticks PID — user + system clock ticks the process has used so far.
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# tree_ticks PID — clock ticks used by PID and its children (an nginx master
# and its workers; a gateway is one process).
tree_ticks() {
    local total child
    total=$(cpu_ticks "$1")
    for child in $(pgrep -P "$1" 2>/dev/null); do
        total=$((total + $(cpu_ticks "$child")))
    done
    echo "$total"
}

# run_wrk CONNS SECONDS URL [VAR=value...] — one wrk run pinned to the client
# CPUs; prints the BENCH_RESULT json (empty on failure).
run_wrk() {
    local conns=$1 seconds=$2 url=$3 out
    shift 3
    out=$(taskset -c "$CLIENT_CPUS" env "$@" wrk -t"$WRK_THREADS" -c"$conns" -d"${seconds}s" \
        --timeout "${BENCH_WRK_TIMEOUT:-5}s" -s "$LIB_DIR/wrk/bench.lua" "$url" 2>&1)
    local line
    line=$(printf '%s\n' "$out" | sed -n 's/^BENCH_RESULT //p' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 5 >&2
        log "warning: wrk gave no result for $url"
    fi
    printf '%s' "$line"
}
