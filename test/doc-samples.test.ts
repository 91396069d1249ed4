import { execFile } from "node:child_process"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

// Every ```ts block of the READMEs (the root's and each package's) and docs/*.md is a module that type-checks
// against the packages (strict, exactOptionalPropertyTypes, NodeNext); a
// block fenced ```ts runnable is self-contained (memory or an in-memory
// SQLite) and runs, its own `expect`s included.

const root = fileURLToPath(new URL("..", import.meta.url))
const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`),
  ...readdirSync(join(root, "packages")).map((p) => `packages/${p}/README.md`).filter((f) => existsSync(join(root, f)))
]

interface Sample {
  readonly name: string
  readonly code: string
  readonly runnable: boolean
}

/** The ```ts blocks of `document`, named by file and line. */
export const samplesOf = (document: string, text: string): ReadonlyArray<Sample> => {
  const samples: Array<Sample> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```ts(?:\s+(\S+))?\s*$/.exec(lines[i]!)
    if (fence === null) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !lines[end]!.startsWith("```")) end++
    samples.push({
      name: `${document}:${start}`,
      code: lines.slice(start, end).join("\n") + "\n",
      runnable: fence[1] === "runnable"
    })
    i = end
  }
  return samples
}

const samples = documents.flatMap((document) => samplesOf(document, readFileSync(join(root, document), "utf8")))
const fileOf = (sample: Sample) => join(root, "docs", `.sample-${sample.name.replace(/[^A-Za-z0-9]+/g, "-")}.ts`)

const config = join(root, "docs", ".sample-tsconfig.json")
const written: Array<string> = []

/** Writes every sample next to the docs (so the workspace's module resolution applies); removed after the run. */
const writeSamples = (): void => {
  for (const sample of samples) {
    writeFileSync(fileOf(sample), sample.code)
    written.push(fileOf(sample))
  }
  writeFileSync(config, JSON.stringify({
    extends: "../tsconfig.json",
    compilerOptions: { noUnusedLocals: false },
    include: [],
    files: samples.map((sample) => fileOf(sample))
  }))
  written.push(config)
}

/**
 * Type errors of every sample, by sample, from `tsc` with the workspace's
 * options (in a child process, so that the test worker stays responsive).
 */
const typeErrors = async (): Promise<ReadonlyMap<string, ReadonlyArray<string>>> => {
  const tsc = join(root, "node_modules/typescript/bin/tsc")
  const { failed, output } = await new Promise<{ failed: boolean; output: string }>((resolve) =>
    execFile(process.execPath, [tsc, "-p", config, "--pretty", "false"], { cwd: root }, (error, stdout, stderr) =>
      resolve({ failed: error !== null, output: `${stdout}${stderr}` })))
  const byFile = new Map(samples.map((sample) => [fileOf(sample), sample.name]))
  const errors = new Map<string, Array<string>>(samples.map((sample) => [sample.name, []]))
  let key = "(outside the samples)"
  for (const line of output.split("\n").filter((l) => l.trim() !== "")) {
    const match = /^(.*?)\((\d+),\d+\): (.*)$/.exec(line)
    // A line without a position continues the error before it.
    if (match !== null) key = byFile.get(join(root, match[1]!)) ?? "(outside the samples)"
    errors.set(key, [...errors.get(key) ?? [], match === null ? line : `line ${match[2]}: ${match[3]}`])
  }
  if (failed && [...errors.values()].every((list) => list.length === 0)) errors.set("(tsc failed)", [output])
  return errors
}

describe("the code samples of the README and docs/", () => {
  it("there are samples, and some of them run", () => {
    expect(samples.length).toBeGreaterThanOrEqual(6)
    expect(samples.filter((s) => s.runnable).length).toBeGreaterThanOrEqual(3)
  })

  it("every ```ts sample type-checks against the packages", async () => {
    const errors = await typeErrors()
    expect(Object.fromEntries([...errors].filter(([, list]) => list.length > 0))).toEqual({})
  }, 300_000)

  beforeAll(writeSamples)
  afterAll(() => {
    for (const file of written) rmSync(file, { force: true })
  })

  for (const sample of samples.filter((s) => s.runnable)) {
    it(`${sample.name} runs`, async () => {
      await import(pathToFileURL(fileOf(sample)).href)
    })
  }
})
