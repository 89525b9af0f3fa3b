#!/usr/bin/env bash
# What a machine with an NVIDIA GPU proves about hpcq's GPU path, with binaries built elsewhere and no
# network (a GPU node often reaches no registry). One line per check, then `gpu-check ok N/N` or
# `gpu-check FAIL k/N` (k failed); exit status 0 only when every check passed.
#
#   make build        # here: bin/scheduler, bin/worker, bin/hpcq-sandbox
#   scripts/gpu-check.sh
#
# `make gpu-bundle` makes static, compressed copies instead (bin/gpu-bundle/*.gz, about 40 MB), for a
# machine that gets the tree and little room; the script unpacks them when bin/ has no binaries.
# With OUT set, the machine's nvidia-smi reports (-L, -q -x, --query-gpu) and every check's output
# (gpu-check.log) are written there: the recorded fixtures of internal/executor/testdata come from such a run.
#
# Checks: the GPU and nvcc are found (worker probe); a CUDA task compiles and runs through
# `scheduler exec --local` with its metric; two `gpus: 0.5` tasks share the device at once while a
# `gpus: 1` task waits for it; examples/stencil-cuda runs to a best node; a container image's commands
# see the GPU through the host driver's files hpcq binds in. It changes no device setting (no MPS
# daemon, no MIG reconfiguration).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/hpcq-gpu-check.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"
rec=${OUT:-}  # where the nvidia-smi reports and gpu-check.log are kept

bin=$root/bin
if [ ! -x "$bin/scheduler" ] && [ -f "$bin/gpu-bundle/scheduler.gz" ]; then
  bin=$work/bin
  mkdir -p "$bin"
  for f in scheduler worker hpcq-sandbox; do gzip -dc "$root/bin/gpu-bundle/$f.gz" > "$bin/$f" && chmod 755 "$bin/$f"; done
fi
for f in scheduler worker hpcq-sandbox; do
  [ -x "$bin/$f" ] || { echo "gpu-check: no $bin/$f: run make build (or make gpu-bundle) first"; exit 2; }
done
export HPCQ_LOG_LEVEL=warn
unset OPENAI_API_KEY HPCQ_NATS_URL HPCQ_CLICKHOUSE_DSN HPCQ_REDIS_URL

passed=0 failed=0
# check NAME FUNCTION: runs it, its output kept in $out/NAME.log (and in $OUT/gpu-check.log); the last
# line it prints is the result.
check() {
  local name=$1 fn=$2 t0=$SECONDS
  "$fn" > "$out/$name.log" 2>&1
  local rc=$?
  [ -z "$rec" ] || { echo "===== $name (exit $rc)"; cat "$out/$name.log"; } >> "$rec/gpu-check.log"
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "gpu-check $name ok ($((SECONDS - t0)) s): $(tail -n 1 "$out/$name.log")"
  else
    failed=$((failed + 1))
    echo "gpu-check $name FAIL ($((SECONDS - t0)) s):"
    tail -n 15 "$out/$name.log" | sed 's/^/    /'
  fi
}

# json FIELD FILE: the first string or number value of FIELD in a JSON file.
json() { grep -o "\"$1\": *\"\\?[^\",}]*" "$2" | head -n 1 | sed 's/.*: *"\{0,1\}//'; }

machine() {
  command -v nvidia-smi > /dev/null || { echo "no nvidia-smi"; return 1; }
  nvidia-smi -L > "$out/nvidia-smi-L.txt" || return 1
  nvidia-smi -q -x > "$out/nvidia-smi-q-x.xml" || return 1
  nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv,noheader,nounits > "$out/nvidia-smi-query.csv" || return 1
  [ -z "$rec" ] || cp "$out"/nvidia-smi-* "$rec/"
  cat "$out/nvidia-smi-L.txt"
  echo "$(nproc) CPUs, $(awk '/MemTotal/ {printf "%d GiB", $2 / 1048576}' /proc/meminfo); $(head -n 1 "$out/nvidia-smi-L.txt")"
}

probe() {
  "$bin/worker" probe > "$out/probe.json" || return 1
  cat "$out/probe.json"
  grep -q '"nvcc"' "$out/probe.json" || { echo "no nvcc found"; return 1; }
  grep -q '"uuid"' "$out/probe.json" || { echo "no GPU found"; return 1; }
  echo "nvcc $(json nvcc "$out/probe.json"), $(grep -c '"uuid": "GPU-' "$out/probe.json") GPU(s): $(json name "$out/probe.json"), driver $(json driver "$out/probe.json"), CUDA $(json cuda "$out/probe.json"), slots get $(tr -d ' \n' < "$out/probe.json" | grep -o '"gpu_ids":\[[^]]*\]')"
}

cuda_task() {
  "$bin/scheduler" exec --local --json --runs-dir "$work/runs-matmul" examples/matmul-cuda/task.json > "$out/matmul.jsonl" || { cat "$out/matmul.jsonl"; return 1; }
  grep -q '"status":"ok"' "$out/matmul.jsonl" || { cat "$out/matmul.jsonl"; return 1; }
  echo "matmul-cuda ok: $(grep -o '"gflops":[0-9.e+]*' "$out/matmul.jsonl" | head -n 1) on GPU $(grep -o '"gpus":\["[^]]*\]' "$out/matmul.jsonl" | head -n 1)"
}

shares() {
  "$bin/scheduler" exec --local --json --runs-dir "$work/runs-share" scripts/gpu-check/share-a.json scripts/gpu-check/share-b.json scripts/gpu-check/whole.json > "$out/shares.jsonl"
  cat "$out/shares.jsonl"
  [ "$(grep -c '"status":"ok"' "$out/shares.jsonl")" = 3 ] || { echo "not every task ran"; return 1; }
  grep -q '"gpu_share":0.5' "$out/shares.jsonl" || { echo "no result says it held half a GPU"; return 1; }
  "$bin/scheduler" query --runs-dir "$work/runs-share" --format csv \
    "SELECT node, name, value FROM metrics WHERE name IN ('t_start', 't_end') ORDER BY node, name" > "$out/shares.csv" || return 1
  cat "$out/shares.csv"
  awk -F, '
    NR > 1 { v[$1 "," $2] = $3 }
    function overlap(a, b,   s, e) { s = v[a ",t_start"] > v[b ",t_start"] ? v[a ",t_start"] : v[b ",t_start"]
      e = v[a ",t_end"] < v[b ",t_end"] ? v[a ",t_end"] : v[b ",t_end"]; return e - s }
    END {
      ab = overlap("share-a", "share-b"); wa = overlap("whole", "share-a"); wb = overlap("whole", "share-b")
      printf "share-a and share-b (gpus 0.5) on the device together for %.1f s; whole (gpus 1) beside them for %.1f s and %.1f s\n", (ab > 0 ? ab : 0), (wa > 0 ? wa : 0), (wb > 0 ? wb : 0)
      exit !(ab > 1 && wa <= 0 && wb <= 0)
    }' "$out/shares.csv"
}

stencil() {
  "$bin/scheduler" run --local --runs-dir "$work/runs-stencil" examples/stencil-cuda > "$out/stencil.txt" 2>&1 || { cat "$out/stencil.txt"; return 1; }
  cat "$out/stencil.txt"
  n=$("$bin/scheduler" query --runs-dir "$work/runs-stencil" --format csv "SELECT COUNT(DISTINCT value) FROM metrics WHERE name = 'checksum'" | tail -n 1)
  "$bin/scheduler" query --runs-dir "$work/runs-stencil" \
    "SELECT n.node, n.kind, n.status, m.value AS gflops FROM nodes n LEFT JOIN metrics m ON m.node = n.node AND m.name = 'gflops' ORDER BY n.node"
  [ "$n" = 1 ] || { echo "the nodes' checksums differ ($n distinct)"; return 1; }
  grep -o 'best n[0-9]*: gflops = .*' "$out/stencil.txt" || return 1
}

# An image of the host's own files (no network): /bin/sh, the CUDA program built here and the libraries
# they load; the driver's files are what the worker binds in.
container() {
  command -v nvcc > /dev/null || { echo "no nvcc"; return 1; }
  img=$work/image
  mkdir -p "$img/bin" "$img/usr/local/bin" "$img/etc"
  nvcc -O2 -o "$img/usr/local/bin/spin" scripts/gpu-check/spin.cu || return 1
  cp -L /bin/sh "$img/bin/sh"
  for f in /bin/sh "$img/usr/local/bin/spin" "$(command -v nvidia-smi)"; do
    ldd "$f" | awk '/=> \// { print $3 } /^[ \t]*\// { print $1 }'
  done | sort -u | grep -v -e libcuda -e libnvidia | while read -r lib; do
    mkdir -p "$img$(dirname "$lib")" && cp -L "$lib" "$img$lib"
  done
  cat > "$work/container.json" <<EOF
{"v": 1, "node_id": "gpu-in-image", "pool": "gpu", "container": {"image": "$img"},
 "artifacts": {"run": {"commands": ["nvidia-smi -L", "spin 1"]}}, "limits": {"gpus": 1, "run_timeout_s": 60}, "requires": ["gpu"]}
EOF
  "$bin/scheduler" exec --local --json --runs-dir "$work/runs-image" "$work/container.json" > "$out/container.jsonl"
  cat "$out/container.jsonl"
  grep -q '"status":"ok"' "$out/container.jsonl" || return 1
  grep -q 'GPU 0:' "$out/container.jsonl" || { echo "nvidia-smi in the image saw no GPU"; return 1; }
  echo "in the image: nvidia-smi listed the GPU, spin ran $(grep -o '"kernels":[0-9]*' "$out/container.jsonl" | head -n 1 | cut -d: -f2) kernels; driver files bound: $(grep -o '"gpu_driver":\[[^]]*\]' "$out/container.jsonl" | grep -o '"[^"]*"' | tail -n +2 | tr -d '"' | tr '\n' ' ')"
}

check machine machine
check probe probe
check cuda-task cuda_task
check shares shares
check stencil-cuda stencil
check container-gpu container

total=$((passed + failed))
if [ "$failed" = 0 ]; then
  echo "gpu-check ok $passed/$total"
else
  echo "gpu-check FAIL $failed/$total"
  exit 1
fi
