#!/usr/bin/env node
// Writes test/support/durations.json, the seconds each test file took, from
// a vitest JSON report of a full run:
//   CONNECTOR_STORE_REQUIRE_PG=1 npx vitest run --reporter=json --outputFile=/tmp/report.json
//   node test/support/durations.mjs /tmp/report.json
// The sequencer (sequencer.ts) starts the longest files first on a machine
// with no timings of its own; a stale entry only orders the files worse.
import { readFileSync, writeFileSync } from "node:fs"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"

const report = process.argv[2]
if (report === undefined) throw new Error("usage: node test/support/durations.mjs <vitest JSON report>")
const root = fileURLToPath(new URL("../..", import.meta.url))
const seconds = Object.fromEntries(
  JSON.parse(readFileSync(report, "utf8")).testResults
    .map((file) => [relative(root, file.name), Math.round((file.endTime - file.startTime) / 100) / 10])
    .sort(([a], [b]) => a < b ? -1 : 1)
)
writeFileSync(new URL("./durations.json", import.meta.url), JSON.stringify(seconds, null, 2) + "\n")
console.log(`durations: ${Object.keys(seconds).length} files`)
