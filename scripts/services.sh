#!/usr/bin/env bash
# services.sh: install and run the servers hpcq's tests and cluster mode use,
# each on a private loopback port under a directory of its own.
#
#   services.sh install [SERVICE...]   install missing Debian packages (default: all)
#   services.sh up DIR [SERVICE...]    start services under DIR; writes DIR/services.env
#   services.sh down DIR [SERVICE...]  stop the services started under DIR, by their pids
#   services.sh start SERVICE DIR      start one service in DIR; prints its env lines
#   services.sh stop SERVICE DIR       stop the service started in DIR
#   services.sh env DIR                print DIR/services.env
#
# SERVICE: nats, redis, clickhouse, slurm (a single-node Slurm: munged,
# slurmctld, slurmd; clients need its SLURM_CONF; or the controller of
# several nodes, each started with slurmd: see "Slurm in DIR"), prometheus (started only
# by `start`, with the scrape configuration DIR/prometheus.yml the caller
# wrote; not part of `up`). install also knows "mpi" (Open MPI:
# mpicc, mpirun), "sqlite3" (the CLI the results tests query with) and
# "chromium" (the headless browser of the dashboard tests), "squashfs",
# "busybox", "images" (mmdebstrap: the Debian image of
# examples/blas-in-image) and "charliecloud" (ch-run, a site container
# runtime), which run no server.
#
# HPCQ_SERVICES_HOST=ADDR binds redis and clickhouse to ADDR instead of
# 127.0.0.1, and their env lines name it: a service host of a cluster (the
# multi-host test runs them so inside a network namespace). ClickHouse then
# accepts its user from any address (set a password: see below).
#
# Every command is idempotent:
# starting a running service prints its env again; stopping a stopped one
# does nothing. Processes are stopped only through the pid files this script
# wrote, and only when the pid still belongs to the program started there.
set -euo pipefail

ALL_SERVICES=(nats redis clickhouse slurm)
INSTALL_ALL=(nats mpi redis clickhouse sqlite3 slurm prometheus chromium squashfs busybox images charliecloud tex)

die() { echo "services.sh: $*" >&2; exit 1; }

BIND=${HPCQ_SERVICES_HOST:-127.0.0.1}
[[ "$BIND" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "HPCQ_SERVICES_HOST=$BIND: an IPv4 address, please"

package_of() {
  case "$1" in
    nats) echo nats-server ;;
    mpi) echo openmpi-bin libopenmpi-dev ;;
    sqlite3) echo sqlite3 ;;
    redis) echo redis-server ;;
    clickhouse) echo clickhouse-server clickhouse-client ;;
    slurm) echo slurmctld slurmd slurm-client munge ;;
    prometheus) echo prometheus ;;
    chromium) echo chromium ;;
    squashfs) echo squashfs-tools ;;
    busybox) echo busybox-static ;;
    images) echo mmdebstrap squashfs-tools ;;
    charliecloud) echo charliecloud-runtime ;;
    tex) echo texlive-latex-base latexmk poppler-utils librsvg2-bin ;;
    *) die "unknown service '$1' (known: ${ALL_SERVICES[*]} prometheus chromium squashfs busybox images charliecloud tex)" ;;
  esac
}

binary_of() {
  case "$1" in
    nats) echo nats-server ;;
    mpi) echo mpicc ;;
    sqlite3) echo sqlite3 ;;
    redis) echo redis-server ;;
    clickhouse) echo clickhouse-server ;;
    slurm) echo slurmctld ;;
    prometheus) echo prometheus ;;
    chromium) echo chromium ;;
    squashfs) echo unsquashfs ;;
    busybox) echo busybox ;;
    images) echo mmdebstrap ;;
    charliecloud) echo ch-run ;;
    tex) echo rsvg-convert ;; # the group's newest member: machines that have the others get it too
    *) die "unknown service '$1'" ;;
  esac
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

cmd_install() {
  local svcs=("$@") missing=() s
  [ ${#svcs[@]} -gt 0 ] || svcs=("${INSTALL_ALL[@]}")
  for s in "${svcs[@]}"; do
    package_of "$s" >/dev/null # an unknown name stops here, said once
    # shellcheck disable=SC2207
    command -v "$(binary_of "$s")" >/dev/null 2>&1 || missing+=($(package_of "$s"))
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "services.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # With the package lists as they are first (a fresh machine has none, or
  # old ones): what apt says then is kept, and shown only if it fails
  # again after an update.
  local first
  if ! first=$(as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1 >/dev/null); then
    echo "services.sh: updating the package lists (apt-get update)" >&2
    as_root apt-get update -qq
    if ! as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      echo "services.sh: before the update, apt-get said:" >&2
      echo "$first" >&2
      die "could not install ${missing[*]}"
    fi
  fi
  for s in "${svcs[@]}"; do
    command -v "$(binary_of "$s")" >/dev/null 2>&1 || die "$(binary_of "$s") still missing after install"
  done
}

# pid_alive DIR NAME: the pid in DIR/NAME.pid runs the binary we started there.
pid_alive() {
  local dir=$1 name=$2 pid
  [ -f "$dir/$name.pid" ] || return 1
  pid=$(cat "$dir/$name.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  # The process must belong to this directory: its command line names it
  # (nats, clickhouse) or it runs inside it (redis, which rewrites its
  # command line and works in its --dir). A reused pid does neither.
  if ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
    case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in
      "$dir"|"$dir"/*) ;;
      *) return 1 ;;
    esac
  fi
  echo "$pid"
}

# already_running DIR NAME: prints the env of NAME if it runs in DIR.
already_running() {
  pid_alive "$1" "$2" >/dev/null && [ -s "$1/$2.env" ] && cat "$1/$2.env"
}

# need BINARY SERVICE: dies with the install hint when BINARY is missing.
need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 not installed (run: scripts/services.sh install $2)"
}

# wait_ready PID SECONDS WHAT LOG CMD...: polls CMD every 0.05 s until it
# succeeds; dies when process PID exits first or time runs out.
wait_ready() {
  local pid=$1 secs=$2 what=$3 log=$4 i
  shift 4
  for i in $(seq 1 $((secs * 20))); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || die "$what exited at start; see $log"
    sleep 0.05
  done
  die "$what not ready within ${secs}s; see $log"
}

# try_ready PID SECONDS WHAT LOG CMD...: as wait_ready, but returns 1 when
# the process exits at start (its port was taken between the check and the
# bind, by a server another test started), so the caller can pick new ports.
try_ready() {
  local pid=$1 secs=$2 what=$3 log=$4 i
  shift 4
  for i in $(seq 1 $((secs * 20))); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  die "$what not ready within ${secs}s; see $log"
}

nats_url() { grep -o 'nats://[0-9.]*:[0-9]*' "$1" 2>/dev/null | head -n1; }
nats_ready() { [ -n "$(nats_url "$1")" ]; }

# With HPCQ_NATS_DEBUG=1 the nats-server of DIR logs at debug level: each
# client connection's opening and closing, with the reason it was closed
# (the tests start theirs so, to say why a client lost its server).
start_nats() {
  local dir=$1 debug=()
  mkdir -p "$dir/js"
  already_running "$dir" nats && return 0
  rm -f "$dir"/nats-server_*.ports "$dir/nats.env"
  need nats-server nats
  [ "${HPCQ_NATS_DEBUG:-}" = 1 ] && debug=(-D)
  nats-server -a 127.0.0.1 -p -1 -js -sd "$dir/js" --ports_file_dir "$dir" "${debug[@]}" \
    -P "$dir/nats.pid" -l "$dir/nats.log" </dev/null >/dev/null 2>&1 &
  local launched=$! ports
  ports="$dir/nats-server_${launched}.ports"
  wait_ready "$launched" 5 nats-server "$dir/nats.log" nats_ready "$ports"
  printf 'HPCQ_NATS_URL=%s\nHPCQ_NATS_PID=%s\n' "$(nats_url "$ports")" "$launched" | tee "$dir/nats.env"
}

# free_port: a loopback TCP port nothing listens on now, below the
# kernel's ephemeral range: a port from that range can be taken between
# this check and the server's bind by any outgoing connection's source
# port or any listener on port 0 (tests, browsers), which made a server
# fail at start now and then.
free_port() {
  local p i low=32768 span
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$(( low - 10000 ))
  [ "$span" -ge 1000 ] || die "the ephemeral port range starts at $low: no room below it for private ports"
  for i in $(seq 1 50); do
    p=$(( (RANDOM << 15 | RANDOM) % span + 10000 ))
    if ! (exec 3<>"/dev/tcp/$BIND/$p") 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  die "no free port found"
}

# port_for DIR NAME: the port NAME used in DIR before (a restart keeps its
# address, so clients reconnect), or a free one, remembered in DIR/NAME.port.
port_for() {
  local f="$1/$2.port" p
  if [ -s "$f" ]; then
    p=$(cat "$f")
    if ! (exec 3<>"/dev/tcp/$BIND/$p") 2>/dev/null; then
      echo "$p"; return 0
    fi
  fi
  p=$(free_port)
  echo "$p" >"$f"
  echo "$p"
}

# redis_ready PORT [PASSWORD [REDIS-CLI OPTIONS...]]
redis_ready() {
  local port=$1 pass=${2:-}
  shift; shift || true
  [ "$(REDISCLI_AUTH="$pass" redis-cli -h "$BIND" -p "$port" "$@" ping 2>/dev/null)" = PONG ]
}

# With HPCQ_REDIS_REQUIREPASS set at its first start, the Redis of DIR
# requires that password (kept in DIR/redis.conf, mode 600, not on the
# command line); clients pass it as HPCQ_REDIS_PASSWORD. With
# HPCQ_REDIS_USER too, it is the password of that ACL user (hpcq's keys
# only, no dangerous commands; the default user off), and the URL names
# the user. Bound off loopback (HPCQ_SERVICES_HOST), a password is required. With
# HPCQ_REDIS_TLS_CERT and HPCQ_REDIS_TLS_KEY (PEM files) set at its first
# start, it speaks only TLS (copies kept in DIR/tls) and its URL is rediss://.
# start_prometheus runs a Prometheus server on a loopback port with the
# scrape configuration DIR/prometheus.yml (written by the caller), its data
# in DIR/data.
start_prometheus() {
  local dir=$1 port launched
  [ -s "$dir/prometheus.yml" ] || die "prometheus: write the scrape configuration $dir/prometheus.yml first"
  mkdir -p "$dir/data"
  already_running "$dir" prometheus && return 0
  need prometheus prometheus
  port=$(port_for "$dir" prometheus)
  (cd "$dir" && exec prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" </dev/null >"$dir/prometheus.log" 2>&1) &
  launched=$!
  echo "$launched" >"$dir/prometheus.pid"
  try_ready "$launched" 30 prometheus "$dir/prometheus.log" prometheus_ready "$port" ||
    die "prometheus exited at start; see $dir/prometheus.log"
  printf 'HPCQ_PROMETHEUS_URL=http://127.0.0.1:%s\nHPCQ_PROMETHEUS_PID=%s\n' "$port" "$launched" | tee "$dir/prometheus.env"
}

prometheus_ready() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  grep -q "200 OK" <&3
}

start_redis() {
  local dir=$1 port conf=() pass="" tls=() cli=() scheme=redis
  mkdir -p "$dir/data"
  already_running "$dir" redis && return 0
  need redis-server redis
  port=$(port_for "$dir" redis)
  if [ -n "${HPCQ_REDIS_REQUIREPASS:-}" ] && [ ! -f "$dir/redis.conf" ]; then
    if [ -n "${HPCQ_REDIS_USER:-}" ]; then
      [[ "$HPCQ_REDIS_USER" =~ ^[A-Za-z0-9_.-]+$ ]] || die "HPCQ_REDIS_USER: letters, digits, _ . - only"
      [[ "$HPCQ_REDIS_REQUIREPASS" =~ ^[^[:space:]\"\']+$ ]] || die "HPCQ_REDIS_REQUIREPASS: no spaces or quotes with an ACL user"
      # The ACL user reaches hpcq's keys only, with every command but the
      # dangerous ones (FLUSHALL, CONFIG, KEYS, DEBUG, ...). The default
      # user keeps every permission behind a random password nobody is
      # given: Redis before 7.2.12 replays the AOF's transactions (the
      # effects of hpcq's Lua writes) as the default user and silently
      # drops them if that user may not run them (redis/redis#14541), so
      # "user default off" loses the data at the first restart.
      local unused
      unused=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
      (umask 077; printf 'user default on >%s ~* &* +@all\nuser %s on >%s ~hpcq:* &* +@all -@dangerous\n' \
        "$unused" "$HPCQ_REDIS_USER" "$HPCQ_REDIS_REQUIREPASS" >"$dir/redis.conf")
    else
      (umask 077; printf 'requirepass "%s"\n' "$HPCQ_REDIS_REQUIREPASS" >"$dir/redis.conf")
    fi
  fi
  local user=""
  if [ -f "$dir/redis.conf" ]; then
    conf=("$dir/redis.conf")
    pass=$(sed -n 's/^requirepass "\(.*\)"$/\1/p' "$dir/redis.conf")
    if grep -q '^user ' "$dir/redis.conf"; then
      read -r _ user _ pass _ < <(grep -v '^user default ' "$dir/redis.conf" | grep -m1 '^user ')
      pass=${pass#>}
      cli=(--user "$user")
    fi
  fi
  [ "$BIND" = 127.0.0.1 ] || [ -n "$pass" ] ||
    die "redis bound to $BIND needs a password (HPCQ_REDIS_REQUIREPASS at its first start)"
  if [ -n "${HPCQ_REDIS_TLS_CERT:-}" ] && [ ! -d "$dir/tls" ]; then
    mkdir -m 700 "$dir/tls"
    cp "$HPCQ_REDIS_TLS_CERT" "$dir/tls/cert.pem"
    cp "$HPCQ_REDIS_TLS_KEY" "$dir/tls/key.pem"
  fi
  if [ -d "$dir/tls" ]; then
    cli+=(--tls --cacert "$dir/tls/cert.pem")
    scheme=rediss
  fi
  local fresh=1 attempt launched
  [ -e "$dir/redis.port.started" ] && fresh=0
  for attempt in 1 2 3; do
    if [ -d "$dir/tls" ]; then
      tls=(--port 0 --tls-port "$port" --tls-cert-file "$dir/tls/cert.pem" --tls-key-file "$dir/tls/key.pem"
        --tls-ca-cert-file "$dir/tls/cert.pem" --tls-auth-clients no)
    else
      tls=(--port "$port")
    fi
    # appendonly with fsync every second: what survives a kill -9 is what a
    # real deployment would keep.
    redis-server "${conf[@]}" --bind "$BIND" "${tls[@]}" --dir "$dir/data" --appendonly yes --appendfsync everysec \
      --save "" --daemonize no --logfile "$dir/redis.log" --protected-mode yes </dev/null >/dev/null 2>&1 &
    launched=$!
    echo "$launched" >"$dir/redis.pid"
    if try_ready "$launched" 5 redis-server "$dir/redis.log" redis_ready "$port" "$pass" "${cli[@]}"; then
      break
    fi
    # A first start whose port was taken meanwhile picks a new one; a
    # restart keeps its port (its clients know it) and fails.
    if [ "$fresh" = 1 ] && [ "$attempt" -lt 3 ]; then
      rm -f "$dir/redis.port"
      port=$(port_for "$dir" redis)
      continue
    fi
    die "redis-server exited at start; see $dir/redis.log"
  done
  touch "$dir/redis.port.started"
  printf 'HPCQ_REDIS_URL=%s://%s%s:%s/0\nHPCQ_REDIS_PID=%s\n' "$scheme" "${user:+$user@}" "$BIND" "$port" "$launched" | tee "$dir/redis.env"
}

start_clickhouse() {
  local dir=$1 tcp http inter user=default sha=""
  mkdir -p "$dir"/{data,tmp,log,user_files,format_schemas}
  already_running "$dir" clickhouse && return 0
  need clickhouse-server clickhouse
  # The user and password of the first start stay: the server keeps the
  # password's SHA-256 (users.xml), clickhouse-client reads both from
  # DIR/client.xml (mode 600), never from its command line.
  if [ ! -f "$dir/client.xml" ]; then
    local u=${HPCQ_CLICKHOUSE_USER:-default} p=${HPCQ_CLICKHOUSE_PASSWORD:-}
    [[ "$u" =~ ^[A-Za-z0-9_]+$ ]] || die "HPCQ_CLICKHOUSE_USER: letters, digits and _ only"
    [[ "$p" =~ ^[^\<\>\&]*$ ]] || die "HPCQ_CLICKHOUSE_PASSWORD: no < > & please"
    (umask 077; printf '<config><user>%s</user><password>%s</password></config>\n' "$u" "$p" >"$dir/client.xml")
  fi
  user=$(sed -n 's|.*<user>\(.*\)</user>.*|\1|p' "$dir/client.xml")
  local pw
  pw=$(sed -n 's|.*<password>\(.*\)</password>.*|\1|p' "$dir/client.xml")
  [ -z "$pw" ] || sha=$(printf '%s' "$pw" | sha256sum | cut -d' ' -f1)
  [ "$BIND" = 127.0.0.1 ] || [ -n "$sha" ] ||
    die "clickhouse bound to $BIND needs a password (HPCQ_CLICKHOUSE_PASSWORD at its first start)"
  local fresh=1 attempt
  [ -s "$dir/clickhouse-tcp.port" ] && fresh=0
  # (The loop body is not indented: it holds a heredoc.)
  for attempt in 1 2 3; do
  tcp=$(port_for "$dir" clickhouse-tcp); http=$(port_for "$dir" clickhouse-http); inter=$(port_for "$dir" clickhouse-inter)
  cat >"$dir/config.xml" <<XML
<yandex>
  <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/error.log</errorlog><console>0</console></logger>
  <listen_host>$BIND</listen_host>
  <tcp_port>$tcp</tcp_port>
  <http_port>$http</http_port>
  <interserver_http_port>$inter</interserver_http_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>536870912</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
XML
  local networks='<ip>127.0.0.1</ip><ip>::1</ip>' password='<password></password>'
  [ "$BIND" = 127.0.0.1 ] || networks='<ip>::/0</ip>'
  if [ -n "$sha" ]; then password="<password_sha256_hex>$sha</password_sha256_hex>"; fi
  cat >"$dir/users.xml" <<XML
<yandex>
  <profiles><default></default></profiles>
  <users><$user>$password<networks>$networks</networks><profile>default</profile><quota>default</quota></$user></users>
  <quotas><default></default></quotas>
</yandex>
XML
  clickhouse-server --config-file="$dir/config.xml" </dev/null >"$dir/log/stdout.log" 2>&1 &
  local launched=$!
  echo "$launched" >"$dir/clickhouse.pid"
  if try_ready "$launched" 30 clickhouse-server "$dir/log/error.log" \
    clickhouse-client --config-file "$dir/client.xml" --host "$BIND" --port "$tcp" --query "SELECT 1"; then
    break
  fi
  # A first start whose ports were taken meanwhile picks new ones; a
  # restart keeps its ports (its clients know them) and fails.
  if [ "$fresh" = 1 ] && [ "$attempt" -lt 3 ]; then
    rm -f "$dir"/clickhouse-*.port
    continue
  fi
  die "clickhouse-server exited at start; see $dir/log/error.log"
  done
  printf 'HPCQ_CLICKHOUSE_DSN=clickhouse://%s@%s:%s/default\nHPCQ_CLICKHOUSE_CLIENT_CONFIG=%s\nHPCQ_CLICKHOUSE_TCP_PORT=%s\nHPCQ_CLICKHOUSE_HTTP_PORT=%s\nHPCQ_CLICKHOUSE_PID=%s\n' \
    "$user" "$BIND" "$tcp" "$dir/client.xml" "$tcp" "$http" "$launched" | tee "$dir/clickhouse.env"
}

# Slurm in DIR: a munged (key DIR/munge/munge.key), slurmctld and slurmd
# on private ports, one partition "debug".
#
# By default a single-node cluster: node "localhost" on 127.0.0.1 with 8
# CPUs (more than the machine has, so that several worker jobs fit:
# SlurmdParameters=config_overrides).
#
# With HPCQ_SLURM_NODES="NAME=ADDR,NAME=ADDR..." `start slurm` starts only
# the controller (munged, slurmctld on HPCQ_SERVICES_HOST, named after this
# host's hostname), for those nodes of HPCQ_SLURM_CPUS CPUs each [2]; then
# `start slurmd DIR` on each node's host starts its munged and its slurmd
# (node name: the hostname), reading DIR/slurm.conf. What a node keeps on
# its own disk (munge socket, slurmd's pid file, spool and log) is in
# DIR/host, the path every host's configuration names: give each host its
# own directory there (a bind mount; the multi-host test does) or run each
# node on a host of its own. HPCQ_SLURMD_TIMEOUT (seconds) is how long a
# silent node stays up [300].
slurm_ready() { SLURM_CONF="$1" sinfo -h -n "$2" -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }
ctld_ready() { SLURM_CONF="$1" sinfo -h >/dev/null 2>&1; }
munge_ready() { [ -S "$1" ]; }

# start_munged DIR: this host's munged, with the cluster's key.
start_munged() {
  local dir=$1 launched
  pid_alive "$dir/host" munged >/dev/null && return 0
  [ -s "$dir/munge/munge.key" ] || die "no munge key in $dir/munge: start the controller first (services.sh start slurm $dir)"
  rm -f "$dir/host/munge.socket"
  # --force: a test's temp dir has a parent of mode 700, which munged
  # would refuse for its socket; every client here runs as the same user.
  munged -F --force --key-file="$dir/munge/munge.key" --socket="$dir/host/munge.socket" --pid-file="$dir/host/run/munged.pid" \
    --seed-file="$dir/host/munge.seed" --log-file="$dir/host/log/munged.log" </dev/null >/dev/null 2>&1 &
  launched=$!
  echo "$launched" >"$dir/host/munged.pid"
  wait_ready "$launched" 10 munged "$dir/host/log/munged.log" munge_ready "$dir/host/munge.socket"
}

# write_slurm_conf DIR CTLD_NAME CTLD_ADDR CPUS NAME=ADDR...
write_slurm_conf() {
  local dir=$1 name=$2 addr=$3 cpus=$4 ctld slurmd mem node
  shift 4
  ctld=$(port_for "$dir" slurmctld); slurmd=$(port_for "$dir" slurmd)
  mem=$(slurmd -C 2>/dev/null | grep -o 'RealMemory=[0-9]*' | cut -d= -f2)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=hpcq
SlurmctldHost=$name($addr)
SlurmctldPort=$ctld
SlurmdPort=$slurmd
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/host/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/host/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/host/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/host/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmdTimeout=${HPCQ_SLURMD_TIMEOUT:-300}
SlurmdParameters=config_overrides
CONF
  for node in "$@"; do
    echo "NodeName=${node%%=*} NodeAddr=${node#*=} CPUs=$cpus RealMemory=${mem:-1024} State=UNKNOWN" >>"$dir/slurm.conf"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
}

# start_slurmd DIR NAME: this host's munged and slurmd as node NAME.
start_slurmd() {
  local dir=$1 name=$2 launched
  [ -s "$dir/slurm.conf" ] || die "no $dir/slurm.conf: start the controller first (services.sh start slurm $dir)"
  need slurmd slurm; need munged slurm
  mkdir -p "$dir/host"/{spool,run,log}
  chmod 755 "$dir/host"
  start_munged "$dir"
  if ! pid_alive "$dir/host" slurmd >/dev/null; then
    # Started in DIR/host, where pid_alive finds it again.
    (cd "$dir/host" && exec slurmd -D -c -f "$dir/slurm.conf" -N "$name" </dev/null >"$dir/host/log/slurmd.out" 2>&1) &
    launched=$!
    echo "$launched" >"$dir/host/slurmd.pid"
    wait_ready "$launched" 20 slurmd "$dir/host/log/slurmd.log" slurm_ready "$dir/slurm.conf" "$name"
  fi
  printf 'HPCQ_SLURMD_PID=%s\n' "$(cat "$dir/host/slurmd.pid")" | tee "$dir/host/slurmd.env"
}

start_slurm() {
  local dir=$1 launched nodes=()
  mkdir -p "$dir"/{munge,state,run,log,host}
  chmod 755 "$dir" "$dir/munge" "$dir/host"
  mkdir -p "$dir/host"/{run,log}
  if [ -n "${HPCQ_SLURM_NODES:-}" ]; then
    IFS=, read -r -a nodes <<<"$HPCQ_SLURM_NODES"
  else
    nodes=(localhost=127.0.0.1)
  fi
  if pid_alive "$dir" slurmctld >/dev/null && pid_alive "$dir/host" munged >/dev/null && [ -s "$dir/slurm.env" ] &&
    { [ -n "${HPCQ_SLURM_NODES:-}" ] || pid_alive "$dir/host" slurmd >/dev/null; }; then
    cat "$dir/slurm.env"; return 0
  fi
  need slurmctld slurm; need munged slurm
  [ -s "$dir/munge/munge.key" ] || { mungekey -c -b 1024 -k "$dir/munge/munge.key" >/dev/null 2>&1; chmod 600 "$dir/munge/munge.key"; }
  start_munged "$dir"
  if ! pid_alive "$dir" slurmctld >/dev/null; then
    if [ -n "${HPCQ_SLURM_NODES:-}" ]; then
      write_slurm_conf "$dir" "$(hostname)" "$BIND" "${HPCQ_SLURM_CPUS:-2}" "${nodes[@]}"
    else
      write_slurm_conf "$dir" localhost 127.0.0.1 8 "${nodes[@]}"
    fi
    slurmctld -D -c -f "$dir/slurm.conf" </dev/null >"$dir/log/slurmctld.out" 2>&1 &
    launched=$!
    echo "$launched" >"$dir/slurmctld.pid"
    wait_ready "$launched" 20 slurmctld "$dir/log/slurmctld.log" ctld_ready "$dir/slurm.conf"
  fi
  if [ -n "${HPCQ_SLURM_NODES:-}" ]; then
    printf 'SLURM_CONF=%s\nHPCQ_SLURM_PARTITION=debug\nHPCQ_SLURMCTLD_PID=%s\n' "$dir/slurm.conf" "$(cat "$dir/slurmctld.pid")" | tee "$dir/slurm.env"
    return 0
  fi
  start_slurmd "$dir" localhost >/dev/null
  printf 'SLURM_CONF=%s\nHPCQ_SLURM_PARTITION=debug\nHPCQ_SLURMCTLD_PID=%s\nHPCQ_SLURMD_PID=%s\n' \
    "$dir/slurm.conf" "$(cat "$dir/slurmctld.pid")" "$(cat "$dir/host/slurmd.pid")" | tee "$dir/slurm.env"
}

# stop_slurm DIR: cancels the jobs of this private cluster (their processes
# would outlive slurmd), then stops slurmd (single-node), slurmctld and
# munged.
stop_slurm() {
  local dir=$1 i
  if pid_alive "$dir" slurmctld >/dev/null; then
    SLURM_CONF="$dir/slurm.conf" scancel --quiet --partition=debug 2>/dev/null || true
    for i in $(seq 1 100); do
      [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop_pidfile "$dir/host" slurmd
  stop_pidfile "$dir" slurmctld
  stop_pidfile "$dir/host" munged
  rm -f "$dir/slurm.env"
}

stop_pidfile() {
  local dir=$1 name=$2 pid i
  if pid=$(pid_alive "$dir" "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$dir/$name.pid" "$dir/$name.env"
}

cmd_start() {
  [ $# -eq 2 ] || die "usage: services.sh start SERVICE DIR"
  local svc=$1 dir
  mkdir -p "$2"; dir=$(cd "$2" && pwd)
  case "$svc" in
    nats) start_nats "$dir" ;;
    redis) start_redis "$dir" ;;
    clickhouse) start_clickhouse "$dir" ;;
    slurm) start_slurm "$dir" ;;
    slurmd) start_slurmd "$dir" "$(hostname)" ;;
    prometheus) start_prometheus "$dir" ;;
    *) die "unknown service '$svc'" ;;
  esac
}

cmd_stop() {
  [ $# -eq 2 ] || die "usage: services.sh stop SERVICE DIR"
  local svc=$1 dir
  [ -d "$2" ] || return 0
  dir=$(cd "$2" && pwd)
  case "$svc" in
    nats|redis|clickhouse|prometheus) stop_pidfile "$dir" "$svc" ;;
    slurm) stop_slurm "$dir" ;;
    slurmd) stop_pidfile "$dir/host" slurmd; stop_pidfile "$dir/host" munged ;;
    *) die "unknown service '$svc'" ;;
  esac
}

cmd_up() {
  [ $# -ge 1 ] || die "usage: services.sh up DIR [SERVICE...]"
  local dir=$1; shift
  local svcs=("$@") s
  [ ${#svcs[@]} -gt 0 ] || svcs=("${ALL_SERVICES[@]}")
  cmd_install "${svcs[@]}"
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  : >"$dir/services.env.tmp"
  for s in "${svcs[@]}"; do
    cmd_start "$s" "$dir/$s" >>"$dir/services.env.tmp"
  done
  mv "$dir/services.env.tmp" "$dir/services.env"
  cat "$dir/services.env"
}

cmd_down() {
  [ $# -ge 1 ] || die "usage: services.sh down DIR [SERVICE...]"
  local dir=$1; shift
  local svcs=("$@") s
  [ ${#svcs[@]} -gt 0 ] || svcs=("${ALL_SERVICES[@]}")
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  for s in "${svcs[@]}"; do cmd_stop "$s" "$dir/$s"; done
  rm -f "$dir/services.env"
}

main() {
  [ $# -ge 1 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
  local cmd=$1; shift
  case "$cmd" in
    install) cmd_install "$@" ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    env) [ $# -eq 1 ] || die "usage: services.sh env DIR"; cat "$1/services.env" ;;
    -h|--help|help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
