# Sourced by blocks-per-request.sh and blocks-per-command.sh: `blocks_trace NAME BIN_DIR BENCH_ARGS...` starts BIN_DIR's
# mirror-sim on a unix: socket in a temporary directory and runs BIN_DIR's `mirror bench unix:SOCKET BENCH_ARGS...`
# under qemu's user-mode TCG with every translated block logged (-d exec,nochain); sets $work, whose exec.log holds
# the log (the directory and the simulator go when the script exits).
blocks_trace() {
  local name=$1 bin=$2
  shift 2
  command -v qemu-x86_64 >/dev/null || { echo "$name: needs qemu-x86_64 (apt-get install qemu-user)" >&2; exit 2; }
  work=$(mktemp -d /tmp/blocks.XXXXXX)
  local sock="$work/sim.sock"
  "$bin/mirror-sim" "unix:$sock" --quiet >"$work/sim.log" 2>&1 &
  blocks_sim=$!
  trap 'kill $blocks_sim 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  [ -S "$sock" ] || { echo "$name: mirror-sim did not listen at $sock within 5 s" >&2; exit 1; }
  qemu-x86_64 -cpu max -d exec,nochain -D "$work/exec.log" "$bin/mirror" bench "unix:$sock" "$@" >/dev/null
}
