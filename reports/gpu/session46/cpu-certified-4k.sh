#!/usr/bin/env bash
# The CPU certified step's parts at a 4K prompt (session 46): each policy's
# decode profile (attention ms a step), bytes read and tok/s, two runs each.
# THREADS (default 2). Needs the build (build/) and the default model.
set -u
cd "$(dirname "$0")/../../.."
T=${THREADS:-2}
for p in dense '{"anchor":1,"window":64,"topk":1,"selector":"sketch","bits":4}' \
         '{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4}' \
         '{"anchor":1,"window":64,"topk":1100,"selector":"sketch","bits":4}' \
         '{"anchor":1,"window":64,"topk":1100,"selector":"exact"}' \
         @examples/certified.mlir; do
  for run in 1 2; do
    echo "== $p run $run"
    build/tools/condensate-decode/condensate-decode --long-prompt 4000 --chat \
      --ignore-eos --max-new-tokens 64 --threads $T --policy "$p" --profile 2>&1 |
      grep -E "^decode:|bytes read|profile decode|^certificate: eps"
  done
done
