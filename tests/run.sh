#!/usr/bin/env bash
# Runs every test: sets up the local AWS emulator's virtualenv (moto, pinned; from PyPI the
# first time), then cargo test — unit tests and the one integration-test binary, which
# starts an emulator per test on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/emulator/setup.sh
# jq runs the image-cache builder's ECR pull script in a unit test (the machine image has it).
command -v jq >/dev/null || { apt-get update -qq && apt-get install -y -qq jq >/dev/null; }
# One target directory for the demo, the tests and CI (.ci/run), outside the clone, so each
# reuses what the others compiled; CARGO_TARGET_DIR overrides it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/gpustack-target}"
# Two cores: two tests at a time keeps each test's emulator responsive.
exec cargo test --locked "$@" -- --test-threads "${GPUSTACK_TEST_THREADS:-2}"
