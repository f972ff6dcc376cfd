#!/usr/bin/env bash
# Installs the frameworks dlscale is compared with (benchmarks/compare_with_frameworks.sh) into a
# virtual environment of their own, benchmarks/peers/.venv (ignored by git), at pinned versions.
# Only what is missing is installed; a second run changes nothing and prints the same report.
# Neither of the README's commands nor any test needs this environment or the network.
#
#   usage: benchmarks/peers/install.sh
#   env:   PEERS_VENV   where the environment lives (default: benchmarks/peers/.venv)
#          PEERS_PYTHON the interpreter it is made from (default: python3.11, else python3)
#          PIP_INDEX_URL and the rest of pip's environment are honoured (a local mirror, a proxy).
#
# Then: benchmarks/compare_with_frameworks.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${PEERS_VENV:-$here/.venv}
requirements=$here/requirements.txt

base_python=${PEERS_PYTHON:-}
if [[ -z $base_python ]]; then
  for candidate in /usr/bin/python3.11 python3.11 python3; do
    if command -v "$candidate" >/dev/null; then base_python=$(command -v "$candidate"); break; fi
  done
fi
if [[ -z $base_python ]]; then
  echo "install.sh: no python3 found; install Debian's python3 and python3-venv" >&2
  exit 1
fi

if [[ ! -x $venv/bin/python ]]; then
  echo "== creating $venv from $base_python"
  if ! "$base_python" -m venv "$venv"; then
    echo "install.sh: '$base_python -m venv' failed; on Debian: apt-get install python3-venv" >&2
    exit 1
  fi
fi

# pip's own check: exit 0 only when every pinned requirement is already satisfied.
if "$venv/bin/python" - "$requirements" <<'PY'
import sys
from importlib import metadata
wanted = [line.split("#")[0].strip() for line in open(sys.argv[1])]
missing = []
for requirement in filter(None, wanted):
    name, version = requirement.split("==")
    try:
        if metadata.version(name) != version:
            missing.append(requirement)
    except metadata.PackageNotFoundError:
        missing.append(requirement)
sys.exit(1 if missing else 0)
PY
then
  echo "== every pinned peer is already installed in $venv"
else
  echo "== installing the pinned peers into $venv (PyPI; torch's wheel brings its CUDA libraries)"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -r "$requirements"
fi

echo "== what each peer reports"
"$venv/bin/python" "$here/report_versions.py"
