import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import ts from "typescript"
import { afterAll, describe, expect, it } from "vitest"

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

const tsconfig = ts.getParsedCommandLineOfConfigFile(join(root, "tsconfig.json"), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (d) => {
    throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"))
  }
})!

/** Type errors of every sample, by sample: each is a virtual file next to the docs, checked with the workspace's options. */
const typeErrors = (): ReadonlyMap<string, ReadonlyArray<string>> => {
  const virtual = new Map(samples.map((sample) => [fileOf(sample), sample]))
  const host = ts.createCompilerHost(tsconfig.options)
  const readFile = host.readFile.bind(host)
  const fileExists = host.fileExists.bind(host)
  host.readFile = (file) => virtual.get(file)?.code ?? readFile(file)
  host.fileExists = (file) => virtual.has(file) || fileExists(file)
  const program = ts.createProgram([...virtual.keys()], { ...tsconfig.options, noEmit: true, noUnusedLocals: false }, host)
  const errors = new Map<string, Array<string>>(samples.map((sample) => [sample.name, []]))
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const sample = diagnostic.file === undefined ? undefined : virtual.get(diagnostic.file.fileName)
    const where = diagnostic.file !== undefined && diagnostic.start !== undefined
      ? `line ${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1}: `
      : ""
    const text = `${where}${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`
    if (sample === undefined) errors.set("(outside the samples)", [...errors.get("(outside the samples)") ?? [], text])
    else errors.get(sample.name)!.push(text)
  }
  return errors
}

describe("the code samples of the README and docs/", () => {
  it("there are samples, and some of them run", () => {
    expect(samples.length).toBeGreaterThanOrEqual(6)
    expect(samples.filter((s) => s.runnable).length).toBeGreaterThanOrEqual(3)
  })

  it("every ```ts sample type-checks against the packages", () => {
    const errors = typeErrors()
    expect(Object.fromEntries([...errors].filter(([, list]) => list.length > 0))).toEqual({})
  })

  const written: Array<string> = []
  afterAll(() => {
    for (const file of written) rmSync(file, { force: true })
  })

  for (const sample of samples.filter((s) => s.runnable)) {
    it(`${sample.name} runs`, async () => {
      // Written next to the docs so that the workspace's module resolution applies; removed after the run.
      const file = fileOf(sample)
      mkdirSync(dirname(file), { recursive: true })
      writeFileSync(file, sample.code)
      written.push(file)
      await import(pathToFileURL(file).href)
    })
  }
})
