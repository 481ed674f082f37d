#!/usr/bin/env bash
# The main job on the embedded SQLite default, in a fresh directory: create and migrate a database,
# then show its status. Later steps of the activity flow extend this script.
set -euo pipefail
BIN="${1:-rewardctl}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEMO="$(mktemp -d /tmp/rewardctl-demo.XXXXXX)"
cd "$DEMO"
echo "== demo in $DEMO (sqlite:rewardctl.db)" >&2
step() { echo "\$ rewardctl $*" >&2; "$BIN" "$@"; }
step db migrate
step db status
echo "== demo finished: $DEMO" >&2
