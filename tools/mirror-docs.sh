#!/usr/bin/env bash
# Writes what is generated from mirror's command table: the man page docs/mirror.1 and the bash completion
# tools/completion/mirror.bash (MirrorCLITests/ReferenceTests fails while either differs from the generator's output).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product mirror-docs >/dev/null
bin=$(swift build --show-bin-path)
"$bin/mirror-docs" man >docs/mirror.1
"$bin/mirror-docs" completion >tools/completion/mirror.bash
echo "wrote docs/mirror.1 and tools/completion/mirror.bash"
