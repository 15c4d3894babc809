#!/usr/bin/env bash
# What `mirror` costs to start, beside gatttool (issue 14): `gatttool --help`, `mirror --help`, and
# `mirror read unix:PATH HANDLE` against a running mirror-sim. Prints the medians of N runs of user+system CPU and
# peak RSS, each as a ratio to gatttool's in the same run. The figures are wait4(2)'s rusage, the fields
# /usr/bin/time -f '%U %S %M' prints, read at microseconds rather than /usr/bin/time's hundredths of a second.
# Usage: tools/startup-bench.sh [-n RUNS] [--handle HANDLE] [BIN_DIR]   (BIN_DIR: .build/release, built first)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10
handle=0x0003
bin=.build/release
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    --handle) handle=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bin=$1; shift ;;
  esac
done
gatttool=$(command -v gatttool || true)
[ -n "$gatttool" ] || { echo "startup-bench: gatttool is missing (Debian's bluez package ships it)" >&2; exit 1; }
for p in mirror mirror-sim; do
  [ -x "$bin/$p" ] || { echo "startup-bench: $bin/$p is missing: run 'swift build -c release' first" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mirror-startup.XXXXXX")
sock="$work/mirror-sim.sock"
mkfifo "$work/ready"
"$bin/mirror-sim" "unix:$sock" --quiet >"$work/ready" 2>"$work/mirror-sim.log" &
sim=$!
stop_sim() {
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  rm -rf "$work"
}
trap stop_sim EXIT
# The simulator prints one line when it listens; reading the FIFO waits for it (or for its exit).
if ! read -r line <"$work/ready" || [ -z "$line" ]; then
  echo "startup-bench: mirror-sim did not start:" >&2
  cat "$work/mirror-sim.log" >&2
  exit 1
fi

# /usr/bin/time prints CPU in hundredths of a second; this helper forks and execs the command as /usr/bin/time
# does (so the peak RSS counts the same small parent before exec) and prints wait4's rusage at microseconds:
# "CPU_MS MAXRSS_KIB EXIT" (the command's own output is dropped).
cat >"$work/rusage.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) {  /* the command's stdout goes to /dev/null; this helper's stdout is its figures */
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0) _exit(126);
        execvp(argv[1], argv + 1); perror(argv[1]); _exit(127);
    }
    int status; struct rusage u;
    if (wait4(pid, &status, 0, &u) < 0) { perror("wait4"); return 2; }
    double ms = (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    printf("%.3f %ld %d\n", ms, u.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}
C
cc -O2 -o "$work/rusage" "$work/rusage.c"

names=("gatttool --help" "mirror --help" "mirror read unix:PATH $handle")
run() {  # run INDEX: one run of command INDEX, appended to its samples
  local out
  case "$1" in
    0) out=$("$work/rusage" "$gatttool" --help 2>/dev/null) ;;
    1) out=$("$work/rusage" "$bin/mirror" --help 2>/dev/null) ;;
    2) out=$("$work/rusage" "$bin/mirror" read "unix:$sock" "$handle" 2>"$work/err") ;;
  esac
  set -- "$1" $out
  [ "${4:-1}" = 0 ] || { echo "startup-bench: ${names[$1]} exited with ${4:-?}: $(cat "$work/err" 2>/dev/null)" >&2; exit 1; }
  echo "$2 $3" >>"$work/samples.$1"
}
for ((i = 0; i < runs; i++)); do  # interleaved, so that a busy moment costs every command alike
  run 0; run 1; run 2
done
median() {  # median COLUMN FILE
  cut -d' ' -f"$1" "$2" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
base_cpu=$(median 1 "$work/samples.0")
base_rss=$(median 2 "$work/samples.0")
echo "medians of $runs runs (user+system CPU, peak RSS; ratios to gatttool --help)"
for i in 0 1 2; do
  awk -v name="${names[$i]}" -v cpu="$(median 1 "$work/samples.$i")" -v rss="$(median 2 "$work/samples.$i")" \
      -v bc="$base_cpu" -v br="$base_rss" \
      'BEGIN { printf "  %-32s CPU %7.2f ms %5.2fx   RSS %6.1f MiB %5.2fx\n", name, cpu, (bc > 0 ? cpu / bc : 0), rss / 1024, rss / br }'
done
