#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs condensate's main job: the
# reference decoder on SmolLM2-135M-Instruct (GGUF) with the certified
# key-sketch policy (examples/certified.mlir), compiled in-process to CPU
# kernels, compared against dense decoding of the same prompt.
# Extra arguments go to condensate-decode (e.g. --device gpu, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
. scripts/default-model.env
B=${BUILD_DIR:-build}
prompt="$B/main-job-prompt.txt"
{
  echo "Summarize the following license text in two sentences."
  echo
  head -c 3800 /usr/share/common-licenses/GPL-3
} > "$prompt"
exec "$B/tools/condensate-decode/condensate-decode" \
  --model "$CONDENSATE_DEFAULT_MODEL" \
  --chat --prompt-file "$prompt" --policy @examples/certified.mlir \
  --max-new-tokens 64 --compare dense "$@"
