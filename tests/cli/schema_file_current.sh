#!/usr/bin/env bash
# docs/lockstep.schema.json must be what `lockstep schema` prints (docs/spec.md, "Editor support").
# Usage: schema_file_current.sh LOCKSTEP SOURCE_DIR
set -euo pipefail
lockstep=$1
committed=$2/docs/lockstep.schema.json
if ! "$lockstep" schema | diff -u "$committed" -; then
  echo "FAIL: docs/lockstep.schema.json differs from 'lockstep schema' (above: its diff)." >&2
  echo "Regenerate it from the source tree: build/dev/lockstep schema -o docs/lockstep.schema.json" >&2
  exit 1
fi
echo "ok - docs/lockstep.schema.json is what 'lockstep schema' prints"
