#!/usr/bin/env node
// duckdb-query.mjs runs a SQL file over brokertrace recordings in DuckDB
// (@duckdb/node-api, which `make deps` installs into .cache/duckdb) and
// writes one of the views it defines to a file:
//
//   node scripts/duckdb-query.mjs --sql docs/cluster-join.sql \
//        --out hops.csv [--view hops] RECORDING...
//
// The recordings (directories, or globs) are handed to the SQL as the
// variable `recordings`, a list of strings. Every statement of the file is
// run, then the view is copied to --out: CSV with a header, NULL as an
// empty field, when --out ends in .csv; Parquet when it ends in .parquet.
// It prints the rows written and the time DuckDB took on stderr.
// BROKERTRACE_DUCKDB names another directory holding node_modules/@duckdb.

import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const usage = 'usage: duckdb-query.mjs --sql FILE --out FILE.csv|FILE.parquet [--view NAME] RECORDING...';

function fail(msg, code = 1) {
  process.stderr.write(`duckdb-query: ${msg}\n`);
  process.exit(code);
}

// loadDuckDB finds @duckdb/node-api in the project's .cache/duckdb (not
// beside this script: it is installed, not committed).
function loadDuckDB() {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const dir = process.env.BROKERTRACE_DUCKDB || path.join(root, '.cache', 'duckdb');
  try {
    return createRequire(path.join(dir, 'package.json'))('@duckdb/node-api');
  } catch (err) {
    fail(`@duckdb/node-api not found in ${dir} (${err.code || err.message}): run make deps`, 3);
  }
}

// sqlString quotes s as a SQL string literal.
function sqlString(s) {
  return `'${s.replaceAll("'", "''")}'`;
}

function sqlIdent(s) {
  return `"${s.replaceAll('"', '""')}"`;
}

async function main() {
  let args;
  try {
    args = parseArgs({
      options: { sql: { type: 'string' }, out: { type: 'string' }, view: { type: 'string', default: 'hops' } },
      allowPositionals: true,
    });
  } catch (err) {
    fail(`${err.message}\n${usage}`, 2);
  }
  const { sql, out, view } = args.values;
  const recordings = args.positionals;
  if (!sql || !out || recordings.length === 0) fail(usage, 2);
  let format;
  if (out.endsWith('.csv')) format = "FORMAT csv, HEADER true, NULLSTR ''";
  else if (out.endsWith('.parquet')) format = 'FORMAT parquet, COMPRESSION zstd';
  else fail(`--out ${out}: give a .csv or .parquet file`, 2);

  const text = await readFile(sql, 'utf8');
  const { DuckDBInstance } = loadDuckDB();
  const start = process.hrtime.bigint();
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  await conn.run(`SET VARIABLE recordings = [${recordings.map(sqlString).join(', ')}]::STRING[]`);
  const statements = await conn.extractStatements(text);
  for (let i = 0; i < statements.count; i++) {
    await (await statements.prepare(i)).run();
  }
  const res = await conn.run(`COPY (FROM ${sqlIdent(view)}) TO ${sqlString(out)} (${format})`);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const version = (await conn.runAndReadAll('SELECT version()')).getRowsJson()[0][0];
  process.stderr.write(`duckdb-query: ${res.rowsChanged} rows of ${view} to ${out} in ${ms.toFixed(0)} ms (DuckDB ${version})\n`);
  conn.closeSync();
}

main().catch((err) => fail(err.message));
