import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** The folder every temporary file of this run goes in (removed when the run ends). */
    readonly tempRoot: string
  }
}

const RUN_PREFIX = "connector-store-run-"

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Removes the temp roots of earlier runs whose process died before its teardown (kill -9). */
const removeOrphanRoots = (dir: string): void => {
  for (const name of readdirSync(dir)) {
    const pid = Number(name.slice(RUN_PREFIX.length).split("-")[0])
    if (name.startsWith(RUN_PREFIX) && Number.isInteger(pid) && !isAlive(pid)) {
      rmSync(join(dir, name), { recursive: true, force: true })
    }
  }
}

/**
 * One temporary folder per test run, removed when the run ends, whatever the
 * tests did: test files make their SQLite files in it (`freshSqlitePath`),
 * and the test workers and the processes they spawn see it as their
 * `TMPDIR`, so whatever they put in `os.tmpdir()` goes there too.
 */
export default function setup(project: TestProject): () => void {
  const systemTmp = tmpdir()
  removeOrphanRoots(systemTmp)
  const root = mkdtempSync(join(systemTmp, `${RUN_PREFIX}${process.pid}-`))
  const previous = process.env["TMPDIR"]
  process.env["TMPDIR"] = root
  project.provide("tempRoot", root)
  return () => {
    if (previous === undefined) delete process.env["TMPDIR"]
    else process.env["TMPDIR"] = previous
    rmSync(root, { recursive: true, force: true, maxRetries: 3 })
    const left = readdirSync(systemTmp).filter((name) => name === root.slice(systemTmp.length + 1))
    if (left.length > 0) throw new Error(`the test run's temp folder ${root} could not be removed`)
  }
}
