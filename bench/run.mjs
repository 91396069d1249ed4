// `npm run bench`: runs every `bench/*.bench.mjs` (see bench/README.md for
// the shape a bench file exports) and prints, per case, the project's and the
// raw driver's cycles per second measured in this same run, and their ratio.
//
//   npm run bench                  every bench file, every case
//   npm run bench -- postgres      only cases whose "file › name" contains "postgres"
//   npm run bench -- fleet --ops 100000   options (--name value, --name) go to the bench files
//   BENCH_ROUNDS=10 BENCH_ROUND_MS=2000 BENCH_WARMUP_MS=2000 npm run bench
//
// Each bench file runs in a child process of its own (this script again,
// with BENCH_FILE naming the file), so that one file's JIT and heap state
// cannot weigh on the next one's figures (see bench/README.md).
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { performance } from "node:perf_hooks"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { measureCase, measurementSettings } from "./support/measure.mjs"
import { benchArguments } from "./support/options.mjs"
import { formatCaseResult, formatHeader, formatSkip } from "./support/report.mjs"

const here = dirname(fileURLToPath(import.meta.url))
// Plain words filter cases; options (`--ops 100000`, `--huge`) are read by the bench files themselves.
const { filters } = benchArguments(process.argv.slice(2))
const settings = measurementSettings(process.env)

const matches = (label) => filters.length === 0 || filters.some((word) => label.toLowerCase().includes(word))

/** Checks the exported shape early, so a malformed bench file fails with a clear message. */
const suiteOf = (file, module) => {
  const suite = module.default
  if (suite === null || typeof suite !== "object" || typeof suite.title !== "string" || !Array.isArray(suite.cases)) {
    throw new TypeError(`${file}: the default export must be { title, cases: [...] } (see bench/README.md)`)
  }
  for (const entry of suite.cases) {
    if (typeof entry?.name !== "string" || (typeof entry.open !== "function" && typeof entry.run !== "function")) {
      throw new TypeError(`${file}: every case needs a name and an open(context) or run(context) function (see bench/README.md)`)
    }
  }
  return suite
}

const runSuite = async (file, suite) => {
  const cases = suite.cases.filter((entry) => matches(`${file} › ${entry.name}`))
  if (cases.length === 0) return 0
  const started = performance.now()
  console.log(formatHeader(file, suite.title, settings))
  let failures = 0
  const context = suite.before === undefined ? undefined : await suite.before()
  try {
    for (const entry of cases) {
      let opened
      try {
        if (entry.run !== undefined) {
          // A case that measures itself (sizes, latencies): it returns the lines to print, or { skip }.
          const lines = await entry.run(context)
          console.log(lines.skip !== undefined ? formatSkip(entry.name, lines.skip) : [`  ${entry.name}`, ...lines].join("\n"))
          continue
        }
        opened = await entry.open(context)
        if (opened.skip !== undefined) {
          console.log(formatSkip(entry.name, opened.skip))
          continue
        }
        const result = await measureCase(opened, { workers: entry.workers ?? 1, ...settings })
        console.log(formatCaseResult(entry, result))
      } catch (error) {
        failures++
        console.log(`  ${entry.name}: FAILED`)
        console.error(error)
      } finally {
        await opened?.close?.()
      }
    }
  } finally {
    await suite.after?.(context)
  }
  console.log(`  (${file} took ${Math.round((performance.now() - started) / 1000)} s)`)
  return failures
}

const files = readdirSync(here).filter((name) => name.endsWith(".bench.mjs")).sort()
if (files.length === 0) console.log("no bench/*.bench.mjs files found")

/** Runs one bench file in this process: the number of its cases that failed. */
const runFile = async (file) => {
  try {
    return await runSuite(file, suiteOf(file, await import(pathToFileURL(join(here, file)).href)))
  } catch (error) {
    console.log(`${file}: FAILED`)
    console.error(error)
    return 1
  }
}

/** Whether `file` has a case the filters select (read without running anything). */
const selects = async (file) => {
  try {
    return suiteOf(file, await import(pathToFileURL(join(here, file)).href)).cases.some((entry) =>
      matches(`${file} › ${entry.name}`))
  } catch {
    return true // its child reports what is wrong with it
  }
}

if (process.env.BENCH_FILE !== undefined) {
  process.exitCode = await runFile(process.env.BENCH_FILE) === 0 ? 0 : 1
} else {
  let failed = 0
  for (const file of files) {
    if (!(await selects(file))) continue
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: "inherit",
      env: { ...process.env, BENCH_FILE: file }
    })
    if (child.status !== 0) failed++
  }
  process.exitCode = failed === 0 ? 0 : 1
}
