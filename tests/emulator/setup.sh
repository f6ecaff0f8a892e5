#!/usr/bin/env bash
# Creates tests/emulator/.venv and installs the pinned emulator requirements into it.
# Idempotent: a stamp file inside .venv holds the sha256 of requirements.txt; when it
# matches (and the venv's python still runs) pip is not invoked at all.
# Override the interpreter with PYTHON=/path/to/python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
reqs="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

die() { echo "emulator setup: error: $*" >&2; exit 1; }

[ -f "$reqs" ] || die "missing $reqs"

# Serialise concurrent runs (several test processes may call this at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$here/.setup.lock"
    flock 9
fi

if command -v sha256sum >/dev/null 2>&1; then
    want="$(sha256sum "$reqs" | cut -d' ' -f1)"
else
    command -v "$python" >/dev/null 2>&1 || die "'$python' not found (set PYTHON=...)"
    want="$("$python" -c 'import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$reqs")"
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c '' >/dev/null 2>&1; then
    echo "emulator setup: $venv up to date" >&2
    exit 0
fi

command -v "$python" >/dev/null 2>&1 || die "'$python' not found (install Python 3.9+ or set PYTHON=...)"

action="updated"
if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
    action="created"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "'$python -m venv $venv' failed (is the venv module installed?)"
fi

rm -f "$stamp"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$reqs" >&2 \
    || die "pip install -r $reqs failed"

echo "$want" > "$stamp.tmp"
mv "$stamp.tmp" "$stamp"
echo "emulator setup: $action $venv from requirements.txt" >&2
