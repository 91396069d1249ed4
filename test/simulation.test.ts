import { execFile } from "node:child_process"
import { existsSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname } from "node:path"
import { fileURLToPath } from "node:url"
import type { ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import {
  CalendarProvider,
  type CheckedDeletion,
  checkInvariants,
  explainWriteBack,
  formatReport,
  inspectCommand,
  type LedgerEntry,
  makePlan,
  realClock,
  runSimulation,
  runSimulationCommand,
  type SimulationReport,
  World,
  type WriteRequest
} from "@connector-store/simulation"
import Database from "better-sqlite3"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { startProcessFleet } from "../packages/simulation/src/processes.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The simulation behind `npm start` at CI size: crashes and provider faults on,
// a few seconds per run. The `--processes` and command-line cases spawn the
// built packages (`npm run build`).

interface Target {
  readonly name: string
  readonly open: () => Promise<{ readonly database: string; readonly tablePrefix?: string }>
}

const DEFAULT_PREFIX = "kubun_connector_"
const sqlite: Target = { name: "SQLite", open: async () => ({ database: freshSqlitePath() }) }
const postgres: Target = { name: "Postgres", open: async () => ({ database: await pgDatabaseForFile(), tablePrefix: freshPrefix() }) }
const targets: ReadonlyArray<Target> = pgAvailable ? [sqlite, postgres] : [sqlite]

/** Runs one query on the simulation's database with a connection of the test's own. */
const query = async (database: string, text: string, params: ReadonlyArray<unknown>): Promise<Array<Record<string, unknown>>> => {
  if (database.startsWith("postgres")) {
    const client = new pg.Client({ connectionString: database })
    await client.connect()
    try {
      let i = 0
      return (await client.query(text.replace(/\?/g, () => `$${++i}`), [...params])).rows
    } finally {
      await client.end()
    }
  }
  const db = new Database(database, { readonly: true })
  try {
    return db.prepare(text).all(...params) as Array<Record<string, unknown>>
  } finally {
    db.close()
  }
}

const tally = (rows: ReadonlyArray<Record<string, unknown>>, key: string): Record<string, number> =>
  Object.fromEntries(rows.map((r) => [String(r[key]), Number(r["n"])]))

const failedInvariants = (report: SimulationReport) => report.invariants.filter((i) => !i.holds)

/** The report's numbers against the database, counted with SQL of the test's own. */
const expectAgreesWithDatabase = async (report: SimulationReport, database: string, prefix: string, planned: number) => {
  const owner = report.scope.ownerDID
  const states = tally(
    await query(database, `SELECT state, COUNT(*) AS n FROM ${prefix}operation WHERE owner_did = ? GROUP BY state`, [owner]),
    "state"
  )
  const nonZero = Object.fromEntries(Object.entries(report.operations.byState).filter(([, n]) => n > 0))
  expect(states).toEqual(nonZero)
  const stored = Object.values(states).reduce((a, b) => a + b, 0)
  expect(stored + report.operations.collectedByRetention).toBe(planned)
  const [attempts] = await query(database, `SELECT SUM(attempts) AS n FROM ${prefix}operation WHERE owner_did = ?`, [owner])
  expect(Number(attempts!["n"])).toBe(report.operations.attempts)
  const statuses = tally(
    await query(
      database,
      `SELECT verification_status AS s, COUNT(*) AS n FROM ${prefix}projection_watch WHERE owner_did = ? GROUP BY verification_status`,
      [owner]
    ),
    "s"
  )
  expect(statuses).toEqual(report.watches.byStatus)
  // The ledger, read with a model of its own: at most one non-reissue apply per operation.
  const plainApplies = new Map<number, number>()
  for (const entry of report.provider.ledger) {
    if (entry.applied && entry.request.reissue === null) plainApplies.set(entry.opIndex, (plainApplies.get(entry.opIndex) ?? 0) + 1)
  }
  expect([...plainApplies.values()].filter((n) => n > 1)).toEqual([])
}

describe.each(targets)("a simulation run on $name", (target) => {
  it("with crashes and faults passes its invariant check, and its report agrees with the database", async () => {
    const { database, tablePrefix } = await target.open()
    const report = await runSimulation({ database, tablePrefix, seed: "ci", operations: 24, runners: 3, durationMs: 90_000 })
    expect(report.finished).toBe(true)
    expect(failedInvariants(report)).toEqual([])
    expect(report.ok).toBe(true)
    // It really went through the weather.
    expect(Object.values(report.operations.crashes).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    expect(report.operations.reissues.handedOut).toBeGreaterThan(0)
    expect(report.provider.byStatus["timeout"] ?? 0).toBeGreaterThan(0)
    expect(report.operations.failures["retryable.retrying"] ?? 0).toBeGreaterThan(0)
    expect(report.relist?.incompleteRefused).toBe(2)
    expect(report.relist?.candidates.deleted).toBeGreaterThan(0)
    expect(report.pendingAuth.expiredDeleted).toBeGreaterThanOrEqual(1)
    await expectAgreesWithDatabase(report, database, tablePrefix ?? DEFAULT_PREFIX, 24)
  }, 180_000)
})

describe("the invariant check", () => {
  it("fails, and says which writes, when runners ignore the store's reissue and re-send blindly", async () => {
    const report = await runSimulation({ database: freshSqlitePath(), seed: "ci", operations: 24, runners: 3, blindResend: true })
    expect(report.ok).toBe(false)
    const twice = report.invariants.find((i) => i.name.startsWith("no write applied twice"))
    expect(twice?.holds).toBe(false)
    expect(twice?.violations[0]).toMatch(/^did:\S+\/op-\S+ applied [2-9] times by requests that were not sanctioned reissues: #\d+ /)
  }, 180_000)
})

const provider = (seed: string) => {
  const p = new CalendarProvider(seed)
  p.seedEntity("evt-1", { title: "Lunch", revision: 0, by: "provider" })
  return p
}

const update = (opIndex: number, revision: number, ifMatch?: string): WriteRequest => ({
  opIndex,
  key: `did:test/op-${opIndex}`,
  kind: "update",
  entityID: "evt-1",
  content: { title: "Lunch", revision, by: "laptop" },
  ifMatch,
  reissue: ifMatch === undefined ? null : "conditional-update"
})

describe("the seed", () => {
  it("gives the same provider behaviour: the same answers to the same requests, however other operations interleave", async () => {
    const requests = [update(1, 1), update(1, 1), update(2, 2), update(1, 1, "stale"), update(3, 3), update(1, 1)]
    const answersOf = async (p: CalendarProvider, order: ReadonlyArray<WriteRequest>) => {
      const out: Array<string> = []
      for (const r of order) out.push(`${r.opIndex}:${JSON.stringify((await p.write(r, realClock)).status)}`)
      return out
    }
    const a = await answersOf(provider("42"), requests)
    const b = await answersOf(provider("42"), requests)
    expect(b).toEqual(a)
    const faultsOf = (p: CalendarProvider, op: number) => p.ledger.filter((e) => e.opIndex === op).map((e) => e.fault)
    const alone = provider("42")
    await answersOf(alone, requests.filter((r) => r.opIndex === 1))
    const mixed = provider("42")
    await answersOf(mixed, requests)
    expect(faultsOf(alone, 1)).toEqual(faultsOf(mixed, 1))
    const others = await Promise.all(["1", "2", "3", "4", "5"].map((seed) => answersOf(provider(seed), requests)))
    expect(others.some((answers) => JSON.stringify(answers) !== JSON.stringify(a))).toBe(true)
  })

  it("prints byte-identical JSON reports, ids included, for two runs of one seed on SQLite with the default runners", async () => {
    const database = freshSqlitePath()
    const run = async () => {
      let stdout = ""
      const progress: Array<string> = []
      const code = await runSimulationCommand({ database, seed: "same", json: true }, {
        stdout: { write: (text: string) => (stdout += text) },
        stderr: { isTTY: false, write: (text: string) => progress.push(text) },
        env: {}
      })
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${database}${suffix}`, { force: true })
      return { code, stdout, progress }
    }
    const first = await run()
    const second = await run()
    expect(first.code).toBe(0)
    expect(second.stdout).toBe(first.stdout)
    const report = JSON.parse(first.stdout) as SimulationReport
    // The run was a real one: all 120 edits, crashes, reissues and a relist whose store-drawn run ids repeat too.
    expect([report.finished, report.runners, report.operations.planned]).toEqual([true, 4, 120])
    expect(Object.values(report.operations.crashes).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    expect(report.relist?.runs.map((r) => r.runID)).toHaveLength(2)
    // --json with stderr not a terminal: progress as plain lines there, none on stdout.
    // The last line there says where the store is and how to inspect it; the given database is kept.
    const progressLines = first.progress.slice(0, -1)
    expect(progressLines.length).toBeGreaterThan(0)
    expect(progressLines.every((line) => /^\d+\.\ds .* · writes \d+\/120 final/.test(line) && line.endsWith("\n"))).toBe(true)
    expect(first.progress.at(-1)).toBe(
      `The store is at SQLite ${database}; inspect it with:\n  npx --no-install connector-store status --database ${database}\n`
    )
    const other = await runSimulation({ database: freshSqlitePath(), seed: "other" })
    expect(other.provider.fingerprint).not.toBe(report.provider.fingerprint)
  }, 180_000)

  it("gives two plans of one seed the same edits under any run tag, and another seed other edits", () => {
    const stripTag = (plan: ReturnType<typeof makePlan>) =>
      plan.operations.map((o) => [o.op, o.document.index, o.document.lossy, o.callerDID, o.content, o.after])
    expect(stripTag(makePlan("same", "x", 12))).toEqual(stripTag(makePlan("same", "y", 12)))
    expect(stripTag(makePlan("other", "x", 12))).not.toEqual(stripTag(makePlan("same", "x", 12)))
  })

  it("refuses a second run of one seed on a database that holds the first, whose ids it would meet", async () => {
    const database = freshSqlitePath()
    await runSimulation({ database, seed: "twice", operations: 6, runners: 2 })
    const rows = () => {
      const db = new Database(database, { readonly: true })
      try {
        return ["operation", "projection_watch", "pending_auth", "relist_run"].map((table) =>
          (db.prepare(`SELECT count(*) AS n FROM ${DEFAULT_PREFIX}${table}`).get() as { n: number }).n)
      } finally {
        db.close()
      }
    }
    const before = rows()
    await expect(runSimulation({ database, seed: "twice", operations: 6, runners: 2 })).rejects.toThrow(
      /the database already holds the run of seed twice/
    )
    expect(rows()).toEqual(before)
    expect((await runSimulation({ database, seed: "thrice", operations: 6, runners: 2 })).ok).toBe(true)
  }, 180_000)
})

describe("--processes", () => {
  it("runs the runners in child processes that are killed and restarted, and the invariants hold", async () => {
    const database = freshSqlitePath()
    const report = await runSimulation({ database, seed: "procs", operations: 20, runners: 2, processes: 2, durationMs: 120_000 })
    expect(report.finished).toBe(true)
    expect(report.operations.childProcessesKilled).toBeGreaterThan(0)
    expect(failedInvariants(report)).toEqual([])
    await expectAgreesWithDatabase(report, database, DEFAULT_PREFIX, 20)
  }, 240_000)
})

describe("the command's database and report", () => {
  /** A tiny run of the command with no database given: its report (JSON), what it wrote to stderr, and its temp folder. */
  const tinyRun = async (args: { keep?: boolean; json?: boolean }) => {
    let stdout = ""
    let stderr = ""
    // This seed's provider goes offline while watches are due: the report has watch deferrals to word.
    const code = await runSimulationCommand({ seed: "f", operations: 24, runners: 3, json: true, ...args }, {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { isTTY: false, write: (text: string) => (stderr += text) },
      env: {}
    })
    const report = JSON.parse(stdout) as SimulationReport
    const file = report.database.replace(/^SQLite /, "")
    return { code, report, stderr, file, folder: dirname(file) }
  }

  it("removes the temporary database of a clean run, and says how to keep one", async () => {
    const run = await tinyRun({})
    expect(run.code).toBe(0)
    expect(run.folder.startsWith(tmpdir())).toBe(true)
    expect(existsSync(run.folder)).toBe(false)
    expect(run.stderr.trimEnd().split("\n").at(-1))
      .toBe("The run's temporary SQLite file was removed; pass --keep (or --database <file>) to keep the store and inspect it afterwards.")
  }, 120_000)

  it("keeps it when asked, naming the file and the command that inspects it; the report speaks in plain words", async () => {
    const run = await tinyRun({ keep: true })
    try {
      expect(existsSync(run.file)).toBe(true)
      expect(run.stderr).toContain(`The store is at SQLite ${run.file}; inspect it with:\n  npx --no-install connector-store status --database ${run.file}\n`)
      // Watch deferrals by reason, never the raw counter keys (`auth.true`).
      const text = formatReport(run.report)
      expect(run.report.watches.deferrals).toEqual({ offline: 2 })
      expect(text).toContain("verifications put off: offline 2")
      expect(text).not.toMatch(/\.(true|false)\b/)
      expect(text).toMatch(/ · \d+\.\d s of simulated time\n/)
      expect(text).toContain("one per entity written back, not one per write-back")
      expect(text).toContain("repair_failed is a watch whose verifications ran out")
    } finally {
      rmSync(run.folder, { recursive: true, force: true })
    }
  }, 120_000)

  it("keeps the temporary database of a run that found a violation, and says where", async () => {
    let stdout = ""
    let stderr = ""
    const code = await runSimulationCommand({ seed: "ci", operations: 24, runners: 3, json: true, blindResend: true }, {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { isTTY: false, write: (text: string) => (stderr += text) },
      env: {}
    })
    const report = JSON.parse(stdout) as SimulationReport
    const file = report.database.replace(/^SQLite /, "")
    try {
      expect(code).toBe(1)
      expect(existsSync(file)).toBe(true)
      expect(stderr).toContain(`The store is at SQLite ${file} (kept because an invariant failed); inspect it with:`)
    } finally {
      rmSync(dirname(file), { recursive: true, force: true })
    }
  }, 180_000)
})

describe("the fleet of child processes", () => {
  it("leaves no timer behind once it stopped (its kill timer, the killer's pause), so the command exits with its report", async () => {
    // Every timer set while the fleet runs, until it fires or is cleared.
    const pending = new Set<unknown>()
    const { setTimeout: set, clearTimeout: clear } = globalThis
    globalThis.setTimeout = ((callback: () => void, ms?: number) => {
      const timer = set(() => {
        pending.delete(timer)
        callback()
      }, ms)
      pending.add(timer)
      return timer
    }) as typeof setTimeout
    globalThis.clearTimeout = ((timer: Parameters<typeof clearTimeout>[0]) => {
      pending.delete(timer)
      clear(timer)
    }) as typeof clearTimeout
    try {
      const plan = makePlan("stop", "stoptag", 2)
      const world = new World("stop", plan, { crashes: true, faults: false, clock: realClock })
      const fleet = startProcessFleet({
        database: freshSqlitePath(), seed: "stop", runTag: "stoptag", operations: 2, processes: 1, runners: 1, world, crashes: true,
        onError: () => undefined
      })
      await fleet.stop()
      expect(pending.size).toBe(0)
    } finally {
      globalThis.setTimeout = set
      globalThis.clearTimeout = clear
    }
  }, 60_000)
})

describe("--explain", () => {
  it("walks one write-back for a newcomer: one line per step, relative times, no raw epochs or tokens", async () => {
    const walkthrough = await explainWriteBack({ database: freshSqlitePath() })
    const expected = [
      /^The user edits/,
      /^Runner A claims the write under the laptop's idempotency key/,
      /^The same claim again .*: busy\./,
      /^Runner A marks its request sent before it leaves \(sent\): attempt 1/,
      /answer never arrives \(timeout\)/,
      /^A's lease lapsed at \+\d+ ms\. The due sweep lists the operation/,
      /^Runner B takes the operation over\. Because A's request may have landed, the store hands B a reissue/,
      /^Runner B marks its request sent \(sent\): attempt 2\./,
      /^The provider refuses the conditional update: 412/,
      /^Runner B looks the event up: it carries the edit\. B finalizes: the operation is committed/,
      /^Runner A wakes up .*: lease-lost\./,
      /compares it with the document's winner: verified\.$/,
      /^The document's write state is committed; the due sweep has nothing more to do for it\.$/,
      /^At the provider: 2 requests for this edit, 1 applied\./
    ]
    expect(walkthrough.steps.map((s) => s.meaning)).toHaveLength(expected.length)
    walkthrough.steps.forEach((step, i) => expect(step.meaning).toMatch(expected[i]!))
    const times = walkthrough.steps.map((s) => s.atMs)
    expect([...times].sort((x, y) => x - y)).toEqual(times)
    // The header names the database file, whose random name may be all digits: judge the steps.
    const stepLines = walkthrough.text.split("\n").slice(2)
    expect(stepLines.join("\n")).not.toMatch(/\d{12,}/)
    expect(stepLines.join("\n")).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/)
    expect(stepLines.every((line) => /^\s*\+\d+(\.\d+)? m?s {2}\S/.test(line))).toBe(true)
  }, 60_000)
})

describe("bad options", () => {
  it("are refused with an error naming the option, before the database is touched", async () => {
    const database = freshSqlitePath()
    await expect(runSimulation({ database, operations: 0 })).rejects.toThrow(/operations must be an integer from 1/)
    await expect(runSimulation({ database, runners: 1.5 })).rejects.toThrow(/runners must be an integer/)
    await expect(runSimulation({ database, processes: -1 })).rejects.toThrow(/processes must be an integer/)
    await expect(runSimulation({ database, durationMs: 5 })).rejects.toThrow(/duration must be an integer from 100/)
    expect(existsSync(database)).toBe(false)
  })
})

const main = fileURLToPath(new URL("../packages/simulation/dist/main.js", import.meta.url))
const runMain = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(process.execPath, [main, ...args], { timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stdout, stderr })))

describe("the npm start command", () => {
  it("prints the walkthrough with --explain, and takes --file as the database", async () => {
    const database = freshSqlitePath()
    const { code, stdout } = await runMain(["--explain", "--file", database])
    expect(code).toBe(0)
    expect(stdout).toContain(`One write-back, step by step (SQLite ${database}`)
    expect(existsSync(database)).toBe(true)
  }, 60_000)

  it("refuses bad arguments with one line naming what was wrong and exit code 2", async () => {
    for (const [args, named] of [[["--operations", "many"], "--operations"], [["--duration", "soon"], "--duration"], [["--bogus"], "--bogus"]] as const) {
      const { code, stdout, stderr } = await runMain(args)
      expect(code).toBe(2)
      expect(stdout).toBe("")
      expect(stderr.trim().split("\n")).toHaveLength(1)
      expect(stderr).toContain(named)
    }
  }, 60_000)
})

describe("the invariant checks on a hand-made run", () => {
  const plan = makePlan("hand", "t", 3)
  const rowOf = (index: number, state: ConnectorOperation["state"]): ConnectorOperation => {
    const op = plan.operations[index]!
    return {
      callerDID: op.callerDID, operationID: op.operationID, nodeKey: `node-${index}`, ...plan.scope, op: op.op,
      target: "calendars/primary", sourceID: op.document.entityID, deterministicEventID: op.document.entityID,
      payloadHash: "h", reissueIntent: { kind: "reconcile" }, providerEtag: null, documentID: op.document.documentID,
      resultEntity: null, state, attempts: 1, nextAttemptAt: null, lastKind: null, lastHTTPStatus: null, deferReason: null,
      sendMarker: null, inDoubtSince: null, version: 1, incarnation: null, leaseToken: null, leaseExpiresAt: null, createdAt: 1, updatedAt: 1
    }
  }
  const watchOf = (index: number) => {
    const d = plan.operations[index]!.document
    return { ...plan.scope, sourceID: d.entityID, documentID: d.documentID } as unknown as ProjectionWatch
  }
  const keyOf = (opIndex: number) => `${plan.operations[opIndex]!.callerDID}/${plan.operations[opIndex]!.operationID}`
  // The ledger entries of the testkit's provider model: `n` in the order they left, `appliedAs` in the order they applied.
  let serial = 0
  const entry = (opIndex: number, attempt: number, applied: boolean, reissued: boolean, appliedAs = serial + 1): LedgerEntry => ({
    n: ++serial, opIndex, attempt, fault: "none", answer: applied ? 200 : 412, at: attempt,
    request: { key: keyOf(opIndex), op: "update", entityID: "evt", reissue: reissued ? "conditional-update" : null },
    fate: "ok", actor: "runner", arrival: "arrived", applied, alreadyGone: false, status: applied ? 200 : 412, late: false,
    ...(applied ? { appliedAs } : {})
  })
  const base = {
    plan,
    rows: [rowOf(0, "committed"), rowOf(1, "committed"), rowOf(2, "dead")],
    watches: [watchOf(0), watchOf(1)],
    ledger: [entry(0, 1, true, false), entry(1, 1, true, false), entry(2, 1, false, false)],
    deletions: [] as ReadonlyArray<CheckedDeletion>,
    entitiesAtProvider: [] as ReadonlyArray<string>,
    incompleteRefused: 2,
    incompleteListed: 0,
    finished: true,
    collected: 0
  }
  const broken = (inputs: typeof base) => checkInvariants(inputs).filter((i) => !i.holds).map((i) => [i.name, i.violations])

  it("hold for a clean run", () => {
    expect(broken(base)).toEqual([])
  })

  it("catch a second apply by a plain re-send, and a sanctioned reissue that applied on top of an earlier apply, but not one a late plain request landed on", () => {
    const twice = "no write applied twice at the provider except by a sanctioned reissue"
    expect(broken({ ...base, ledger: [...base.ledger, entry(0, 2, true, false)] })).toEqual([[
      twice, [`${keyOf(0)} applied 2 times by requests that were not sanctioned reissues: #1 update by runner (ok), #4 update by runner (ok)`]
    ]])
    expect(broken({ ...base, ledger: [...base.ledger, entry(0, 2, true, true)] })).toEqual([[
      twice, [`${keyOf(0)} applied again by the sanctioned reissue #5 update by runner (conditional-update), on top of #1 update by runner`]
    ]])
    // The first request arrived late, after the reissue had applied: the reissue was right, the network's late delivery is no double apply.
    expect(broken({ ...base, ledger: [...base.ledger, entry(0, 2, true, true, 0)] })).toEqual([])
  })

  it("catch a commit the provider never saw, a dead write it applied, and a commit without a watch", () => {
    const ledger = [entry(1, 1, true, false), entry(2, 1, true, false)]
    const inDoubt = { ...rowOf(2, "dead"), inDoubtSince: 5 }
    expect(broken({ ...base, ledger: [...base.ledger, entry(2, 2, true, false)], rows: [rowOf(0, "committed"), rowOf(1, "committed"), inDoubt] }))
      .toEqual([])
    expect(broken({ ...base, ledger, watches: [watchOf(1)] }).map(([name]) => name)).toEqual([
      "every committed write was applied at the provider",
      "no write reported failed (dead, not in doubt) was applied at the provider",
      "every committed write's watch is verified or reported"
    ])
  })

  it("catch a deletion from a run that was not complete, of an entity the provider still has, or any listing of an incomplete run", () => {
    const deletion = { documentID: "doc", entityID: "evt", runID: "run" }
    expect(broken({ ...base, deletions: [{ ...deletion, runState: "complete", stillAtProvider: false }] })).toEqual([])
    expect(broken({ ...base, deletions: [{ ...deletion, runState: "abandoned", stillAtProvider: false }] })).toEqual([[
      "no deletion from an incomplete relist", ["doc: deleted from run run, which is abandoned"]
    ]])
    expect(broken({ ...base, deletions: [{ ...deletion, runState: "complete", stillAtProvider: true }] })).toEqual([[
      "no deletion from an incomplete relist", ["doc: deleted locally, but evt still exists at the provider"]
    ]])
    expect(broken({ ...base, incompleteListed: 1 }).map(([name]) => name)).toEqual(["no deletion from an incomplete relist"])
  })

  it("catch retention taking a write that no newer write of its document supersedes", () => {
    expect(broken({ ...base, rows: base.rows.slice(1), ledger: base.ledger.slice(1), watches: [watchOf(1)], collected: 1 })).toEqual([[
      "retention collected only superseded finished writes",
      [`${plan.operations[0]!.operationID}: gone, though no newer write of ${plan.operations[0]!.document.documentID} is stored`]
    ]])
  })
})

describe("the inspect line", () => {
  it("names a Postgres database without any password, in the user part or the query", () => {
    const line = inspectCommand("postgres://sim:Ux7secret@127.0.0.1:5432/app?password=Qz9secret&sslmode=disable")
    expect(line).not.toMatch(/Ux7secret|Qz9secret/)
    expect(line).toContain("sslmode=disable")
    expect(line).toContain("127.0.0.1:5432/app")
  })
})
