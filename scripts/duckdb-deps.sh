#!/usr/bin/env bash
# Installs DuckDB's Node.js API, pinned to the version given, into the
# project's git-ignored .cache/duckdb, where scripts/duckdb-query.mjs finds
# it (idempotent: nothing happens when that version is there). Node.js and
# npm come with the machine; where they are missing, Debian's packages.
# The npm package carries DuckDB's own binary: nothing else is downloaded.
set -euo pipefail
version=${1:?usage: duckdb-deps.sh VERSION}
dir=.cache/duckdb
have=$(node -p "require('./$dir/node_modules/@duckdb/node-api/package.json').version" 2>/dev/null || true)
[ "$have" = "$version" ] && exit 0
command -v node >/dev/null && command -v npm >/dev/null || scripts/deps.sh nodejs npm
echo "installing: @duckdb/node-api@$version into $dir"
mkdir -p "$dir"
npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error "@duckdb/node-api@$version" >/dev/null
