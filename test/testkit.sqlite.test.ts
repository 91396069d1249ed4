import { openConnectorStore } from "@connector-store/sql-adapter"
import { checkRunnerLoop, type OpenCheckedStore, RunnerLoopCheckFailed } from "@connector-store/testkit"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { blindResendLoop, readmeLoop } from "./testkit.loops.js"

const dir = mkdtempSync(join(tmpdir(), "testkit-sqlite-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Each run's store: the SQL adapter's Promise store on a fresh SQLite file, on the check's clock, winner reader and policy. */
let files = 0
const onSqlite: OpenCheckedStore = (o) =>
  openConnectorStore({ url: join(dir, `${++files}.sqlite`), now: o.now, readWinner: o.readWinner, operationPolicy: o.operationPolicy })

describe("checkRunnerLoop over a SQLite file (openStore)", () => {
  it("passes the README's runner loop, each run on its own file", async () => {
    const before = files
    const report = await checkRunnerLoop(readmeLoop, { openStore: onSqlite, numRuns: 25, seed: 11 })
    expect(report.runs).toBe(25)
    expect(files - before).toBe(25)
    // The runs' rows are in the files: the last run's operations are there after the check closed its store.
    const last = await openConnectorStore({ url: join(dir, `${files}.sqlite`), readWinner: async () => null })
    try {
      expect((await last.listOperations({ limit: 50 })).items.length).toBeGreaterThan(0)
    } finally {
      await last.close()
    }
  }, 120_000)

  it("fails a loop that re-sends blind, as it does over memory, and its printed replay reproduces it", async () => {
    const failure = await checkRunnerLoop(blindResendLoop, { openStore: onSqlite, numRuns: 100, seed: 7 }).then(() => undefined, (e: unknown) => e)
    expect(failure).toBeInstanceOf(RunnerLoopCheckFailed)
    const { invariants, seed, path, message } = failure as RunnerLoopCheckFailed
    expect(invariants).toContain("no-double-apply")
    expect(message).toMatch(/applied 2 times by requests that were not sanctioned reissues/)
    const replayed = await checkRunnerLoop(blindResendLoop, { openStore: onSqlite, seed, path }).then(() => undefined, (e: unknown) => e)
    expect((replayed as RunnerLoopCheckFailed).invariants).toEqual(invariants)
  }, 120_000)
})
