#!/usr/bin/env bash
# The demo: validate → plan → apply → plan (no changes) → output → kubeconfig → destroy of
# stacks/quickstart.toml (a small GPU EKS cluster)
# against the local AWS emulator, in a scratch directory. Needs nothing from AWS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash tests/emulator/setup.sh
# The same target directory as tests/run.sh and .ci/run, so the demo's build and the tests'
# share compiled dependencies (Cargo.toml keeps `cargo build` and `cargo test` on one
# feature set); CARGO_TARGET_DIR overrides it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/gpustack-target}"
cargo build --locked --quiet
bin="$CARGO_TARGET_DIR/debug/gpustack"

work="$(mktemp -d)"
log="$work/emulator.log"
tests/emulator/.venv/bin/python tests/emulator/server.py --port 0 >"$work/ready" 2>"$log" &
emu=$!
trap 'kill $emu 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q READY "$work/ready" 2>/dev/null && break; sleep 0.1; done
port="$(sed -n 's/^GPUSTACK_EMULATOR_READY port=//p' "$work/ready")"
[ -n "$port" ] || { echo "the emulator did not start:"; cat "$log"; exit 1; }

export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_EC2_METADATA_DISABLED=true
# Who may reach the API: the stack asks for it (no default); a documentation address here.
export GPUSTACK_VAR_admin_cidr="198.51.100.7/32"
stack="$root/stacks/quickstart.toml"
cd "$work"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$bin" validate "$stack"
step "$bin" plan "$stack"
step "$bin" apply "$stack" --auto-approve
step "$bin" plan "$stack" --detailed-exitcode
step "$bin" output --stack "$stack"
step "$bin" kubeconfig "$stack" --print
step "$bin" destroy "$stack" --auto-approve
# The Karpenter variant: Karpenter's AWS side applied, its pool and priority classes
# rendered as Kubernetes YAML with the ids from state.
kstack="$root/stacks/quickstart-karpenter.toml"
step "$bin" apply "$kstack" --auto-approve
step "$bin" manifests "$kstack"
step "$bin" destroy "$kstack" --auto-approve
printf '\nDemo complete: created, checked (no changes), and destroyed stack quickstart-dev (EKS with a time-sliced GPU node group), then applied qs-karpenter-dev, printed its Karpenter manifests and destroyed it, against the local emulator.\n'
