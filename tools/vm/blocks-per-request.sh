#!/usr/bin/env bash
# Translated blocks per Write Request: a count that comes out the same on every run, unlike any CPU time under TCG
# (tools/vm/README.md says why it is the measure for the L2CAP CPU goal). Runs this tree's release `mirror bench`
# under qemu's user-mode TCG (qemu-x86_64 -d exec,nochain) against mirror-sim on a unix: socket, and counts the
# blocks executed between the 100th and 300th Write Response the engine matched (ATTEngine.answer's entry), / 200.
# Usage: tools/vm/blocks-per-request.sh [BIN_DIR]   (default .build/release; needs qemu-user and binutils' nm)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-.build/release}
. tools/vm/blocks-trace.sh
blocks_trace blocks-per-request "$bin" --handle 0x0012 --size 20 --mode with-response --count 400 --rounds 1 --warmup 10 \
  --bare-loop none
# The first block of ATTEngine.answer(_:opcode:raw:), where qemu-user loads the executable (0x4000000000).
entry=$(nm "$bin/mirror" | awk '$3 == "$s10GATTClient9ATTEngineC6answer_6opcode3rawyAC8ReceivedO_8ATTStack9ATTOpcodeVSays5UInt8VGtF" { print $1 }')
[ -n "$entry" ] || { echo "blocks-per-request: no ATTEngine.answer symbol in $bin/mirror" >&2; exit 1; }
python3 - "$work/exec.log" "$entry" <<'PY'
import sys
log, entry = sys.argv[1], "%016x" % (int(sys.argv[2], 16) + 0x4000000000)
seen = blocks = 0
with open(log) as f:
    for line in f:
        if not line.startswith("Trace"):
            continue
        if seen >= 100:
            blocks += 1
        if entry in line:
            seen += 1
            if seen == 100:
                blocks = 0
            elif seen == 300:
                break
if seen < 300:
    sys.exit(f"blocks-per-request: only {seen} Write Responses in the trace (wanted 300)")
print(f"translated blocks per Write Request: {blocks / 200:.1f}")
PY
