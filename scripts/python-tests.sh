#!/usr/bin/env bash
# The Python package's tests: a virtual environment in $BUILD_DIR/python-env
# (torch from PyPI), the package built from python/ over the condensate build
# (pip install ./python), then pytest (GPU tests skip, saying so, without a
# GPU). Run by scripts/test.sh after ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
PY=${PYTHON:-python3}
ENV="$BUILD/python-env"
[ -x "$ENV/bin/python" ] || "$PY" -m venv "$ENV"
if ! "$ENV/bin/python" -c 'import torch, pytest, numpy' >/dev/null 2>&1; then
  "$ENV/bin/python" -m pip install -q --upgrade pip
  "$ENV/bin/python" -m pip install -q "torch>=2.4" pytest numpy
fi
CONDENSATE_BUILD_DIR="$PWD/$BUILD" \
  "$ENV/bin/python" -m pip install -q --force-reinstall --no-deps ./python
# From python/tests, so `import condensate` is the installed package.
cd python/tests
exec "../../$ENV/bin/python" -m pytest -q -rs -p no:cacheprovider .
