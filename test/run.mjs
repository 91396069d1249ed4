#!/usr/bin/env node
// `npm test`: the type check (`npm run typecheck`), the import check, the
// build and the vitest suite; fails when any of them fails. The type check
// needs no build and the suite needs no type check, so the type check runs
// beside the build and the suite (on its own core while the build runs) and
// its output is printed when it ends, after the suite's. Arguments go to
// `vitest run` (`npm test -- test/cas.test.ts`).
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const npm = process.platform === "win32" ? "npm.cmd" : "npm"

/** Runs `command` to its end: its exit code (1 when a signal ended it) and, when `capture`, what it printed. */
const run = (command, args, { capture = false } = {}) =>
  new Promise((resolve) => {
    const chunks = []
    const child = spawn(command, args, { stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit" })
    if (capture) {
      child.stdout.on("data", (chunk) => chunks.push(chunk))
      child.stderr.on("data", (chunk) => chunks.push(chunk))
    }
    child.on("error", (error) => {
      chunks.push(Buffer.from(`${command}: ${error.message}\n`))
      resolve({ code: 1, output: Buffer.concat(chunks).toString() })
    })
    child.on("close", (code) => resolve({ code: code ?? 1, output: Buffer.concat(chunks).toString() }))
  })

const started = Date.now()
const typecheck = run(npm, ["run", "--silent", "typecheck"], { capture: true }).then((result) => ({ ...result, seconds: (Date.now() - started) / 1000 }))

const suite = async () => {
  for (const script of ["check:imports", "build"]) {
    const { code } = await run(npm, ["run", script])
    if (code !== 0) return code
  }
  const vitest = fileURLToPath(new URL("../node_modules/vitest/vitest.mjs", import.meta.url))
  return (await run(process.execPath, [vitest, "run", ...process.argv.slice(2)])).code
}

const suiteCode = await suite()
const checked = await typecheck
if (checked.output.trim() !== "") process.stdout.write(`\n${checked.output}`)
console.log(`typecheck: ${checked.code === 0 ? "no errors" : `failed (exit ${checked.code})`} (${checked.seconds.toFixed(0)} s, beside the build and the suite)`)
process.exitCode = suiteCode !== 0 ? suiteCode : checked.code
