import { existsSync } from "node:fs"
import { createServer, type Server, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it, it as vitestIt } from "vitest"
import { failureOf, jsonOf, runCli, runCliHere } from "./support/cli/run.js"
import { type CliDatabase, dbArgs, openForCheck, seedGivenUpCandidate, seedStore } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// What each command does is run in this process (`runCliHere`); the environment fallback, help, unreachable
// databases and `simulate` spawn the built CLI (`npm run build` first).

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<CliDatabase> }> = [
  { name: "sqlite", fresh: async () => ({ url: freshSqlitePath() }) },
  ...(pgAvailable
    ? [{ name: "postgres", fresh: async () => ({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }) }]
    : [])
]

const KEY = ["--caller", "did:caller:1"] as const
const op = (id: string) => [...KEY, "--operation", id]
const brokenWatch = ["--owner", "did:owner:1", "--connector", "gcal", "--model", "Event", "--account", "acct-1", "--source", "src-broken"]

for (const { name, fresh } of databases) {
  // The databases' suites run beside each other (each its own database), the tests of each one after another.
  describe(`connector-store CLI on ${name}`, { timeout: 600_000, concurrent: true }, () => {
    const it = vitestIt.sequential
    /** A freshly seeded store and a runner of the CLI against it. */
    const seeded = async () => {
      const db = await fresh()
      const seed = await seedStore(db)
      const cli = (...args: ReadonlyArray<string>) => runCliHere([...args, ...dbArgs(db)])
      return { db, seed, cli }
    }

    it("migrate creates the schema once; a second run applies nothing", async () => {
      const db = await fresh()
      const first = await runCliHere(["migrate", ...dbArgs(db)])
      expect(first.code).toBe(0)
      expect(first.stdout).toMatch(/: applied migrations 1, 2, 3(, \d+)+\n$/)
      const again = jsonOf<{ applied: Array<number> }>(await runCliHere(["migrate", "--json", ...dbArgs(db)]))
      expect(again.applied).toEqual([])
    })

    it("status counts every table by state, and names what needs a person", async () => {
      const { cli } = await seeded()
      const status = jsonOf(await cli("status", "--json"))
      expect(status.operations).toEqual({ attempted: 1, committed: 2, dead: 1, reconcile_only: 1 })
      expect(status.watches).toEqual({ pending_verification: 1, verified: 0, repair_failed: 1 })
      expect(status.relistRuns).toEqual({ started: 1, listing: 0, complete: 0, abandoned: 0, superseded: 0 })
      expect([status.leasesHeld, status.inDoubt, status.inFlightRelistRuns, status.givenUpCandidates]).toEqual([1, 1, 1, 0])
      expect(status.oldestDueWatch.identity.sourceID).toBe("src-committed")
      expect(status.syncStates).toEqual({ total: 3, leasesHeld: 1, staleLeases: 1 })
      expect(status.pendingAuthorizations).toEqual({ live: 1, expired: 2 })
      expect(status.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(status.durability).toMatchObject({ canLoseAcknowledgedWrites: true, failover: null })
      const text = await cli("status")
      expect(text.code).toBe(0)
      expect(text.stdout).toMatch(/^in doubt:\s+1$/m)
      expect(text.stdout).toMatch(/^repair_failed watches:\s+1$/m)
      expect(text.stdout).toMatch(/^sync states:\s+3: leases held 1, stale 1$/m)
      expect(text.stdout).toMatch(/^pending authorizations:\s+live 1, expired 2$/m)
      expect(text.stdout).toMatch(/^durability:\s+an acknowledged write can be lost on a failover or restore: /m)
      expect(text.stdout).toMatch(/^failover:\s+none noticed$/m)
      const ended = await cli("end-failover-doubt", "--by", "ops@example.com")
      expect([ended.code, ended.stdout.trim()]).toEqual([0, "no window of doubt is in force"])
      expect(text.stdout).toMatch(/^oldest due watch:\s+did:owner:1\/gcal\/Event\/acct-1\/src-committed, due \d+\w+ ago( \(\d{4}-\d\d-\d\d \d\d:\d\dZ\))?$/m)
    })

    it("operations: a table by default, JSON with --json, filters, and a cursor through every page", async () => {
      const { cli } = await seeded()
      const table = await cli("operations")
      expect(table.code).toBe(0)
      const lines = table.stdout.trim().split("\n")
      expect(lines[0]).toMatch(/^CALLER\s+OPERATION\s+STATE\s+IN DOUBT\s+ATTEMPTS\s+NEXT ATTEMPT/)
      expect(lines).toHaveLength(6)
      expect(lines.find((line) => line.includes(" unknown "))).toMatch(/reconcile_only\s+yes\s+1\s+-/)
      expect(table.stdout).not.toMatch(/\b1\d{12}\b/)
      const ids = (run: Awaited<ReturnType<typeof cli>>) =>
        jsonOf<{ operations: Array<{ operationID: string }> }>(run).operations.map((row) => row.operationID).sort()
      expect(ids(await cli("operations", "--json", "--state", "reconcile_only", "--state", "dead"))).toEqual(["failed", "unknown"])
      expect(ids(await cli("operations", "--json", "--in-doubt"))).toEqual(["unknown"])
      expect(ids(await cli("operations", "--json", "--owner", "did:owner:2"))).toEqual(["running"])
      expect(ids(await cli("operations", "--json", "--connector", "jira"))).toEqual(["running"])
      expect(ids(await cli("operations", "--json", "--document", "doc-broken"))).toEqual(["broken"])
      expect(ids(await cli("operations", "--json", "--caller", "did:caller:other"))).toEqual([])
      const seen: Array<string> = []
      let cursor: string | null = null
      let pages = 0
      do {
        const page: { operations: Array<{ operationID: string; nextAttemptAt: string | null }>; nextCursor: string | null } =
          jsonOf(await cli("operations", "--json", "--limit", "2", ...(cursor === null ? [] : ["--cursor", cursor])))
        seen.push(...page.operations.map((row) => row.operationID))
        cursor = page.nextCursor
        pages++
      } while (cursor !== null && pages < 10)
      expect([seen.sort(), pages]).toEqual([["broken", "committed", "failed", "running", "unknown"], 3])
      const paged = await cli("operations", "--limit", "2")
      expect(paged.stdout).toMatch(/\nnext page: --cursor \S+\n$/)
    })

    it("watches: filtered by status and document, times as relative durations", async () => {
      const { cli } = await seeded()
      const failed = jsonOf<{ watches: Array<{ sourceID: string; verificationStatus: string; updatedAt: string }> }>(
        await cli("watches", "--json", "--status", "repair_failed")
      )
      expect(failed.watches.map((w) => [w.sourceID, w.verificationStatus])).toEqual([["src-broken", "repair_failed"]])
      expect(failed.watches[0]!.updatedAt).toMatch(/Z$/)
      const byDocument = jsonOf<{ watches: Array<{ sourceID: string }> }>(await cli("watches", "--json", "--document", "doc-committed"))
      expect(byDocument.watches.map((w) => w.sourceID)).toEqual(["src-committed"])
      const due = jsonOf<{ watches: Array<{ sourceID: string }> }>(await cli("watches", "--json", "--due"))
      expect(due.watches.map((w) => w.sourceID)).toEqual(["src-committed"])
      const table = await cli("watches")
      expect(table.stdout.split("\n")[0]).toMatch(/^OWNER\s+CONNECTOR\s+MODEL\s+ACCOUNT\s+SOURCE\s+DOCUMENT\s+STATUS/)
      expect(table.stdout).toMatch(/src-committed .* pending_verification\s+0\s+0\s+\d+\w+ ago/)
    })

    it("show: one operation by key or node key, one watch by document; an unknown one is a clear error", async () => {
      const { cli } = await seeded()
      const shown = await cli("show", "operation", ...op("unknown"))
      expect(shown.code).toBe(0)
      expect(shown.stdout).toMatch(/^state:\s+reconcile_only$/m)
      expect(shown.stdout).toMatch(/^in doubt:\s+yes \(request of run \S+ may have landed\)$/m)
      expect(shown.stdout).toMatch(/^last failure:\s+unknown$/m)
      expect(shown.stdout).toMatch(/^reissue intent:\s+\{"kind":"reconcile"\}$/m)
      const asJson = jsonOf<{ nodeKey: string; state: string; inDoubt: boolean; createdAt: string }>(
        await cli("show", "operation", "--json", ...op("failed"))
      )
      expect([asJson.state, asJson.inDoubt]).toEqual(["dead", false])
      const byNode = jsonOf<{ operationID: string }>(await cli("show", "operation", "--json", "--node-key", asJson.nodeKey))
      expect(byNode.operationID).toBe("failed")
      const watch = await cli("show", "watch", "--document", "doc-broken")
      expect(watch.stdout).toMatch(/^status:\s+repair_failed$/m)
      expect(watch.stdout).toMatch(/^source:\s+src-broken$/m)
      const missing = failureOf(await cli("show", "operation", ...op("nope")))
      expect(missing).toEqual({ code: 1, lines: ["connector-store: no operation did:caller:1/nope"] })
      const unnamed = failureOf(await cli("show", "operation", "--caller", "did:caller:1"))
      expect(unnamed).toEqual({ code: 1, lines: ["connector-store: name the operation with --caller and --operation (missing --operation)"] })
    })

    it("settle: committed with the provider's entity arms the watch; a known outcome is refused and unchanged", async () => {
      const { db, cli } = await seeded()
      const settled = await cli(
        "settle", ...op("unknown"), "--outcome", "committed", "--source", "src-found", "--document", "doc-unknown",
        "--etag", "etag-found", "--entity", "{\"id\":\"src-found\"}", "--watch-due", "10m"
      )
      expect(settled.code).toBe(0)
      expect(settled.stdout).toMatch(/^settled did:caller:1\/unknown as committed$/m)
      expect(settled.stdout).toMatch(/^armed watch did:owner:1\/gcal\/Event\/acct-1\/src-found: first verification due in (9|10)m$/m)
      const store = await openForCheck(db)
      try {
        const row = await store.getOperation({ callerDID: "did:caller:1", operationID: "unknown" })
        expect(row).toMatchObject({ state: "committed", sourceID: "src-found", providerEtag: "etag-found", resultEntity: { id: "src-found" } })
        const watch = await store.getWatchByDocument("doc-unknown")
        expect(watch).toMatchObject({ sourceID: "src-found", verificationStatus: "pending_verification" })
        expect(watch!.nextAttemptAt! - Date.now()).toBeGreaterThan(8 * 60_000)
      } finally {
        await store.close()
      }
      const refused = failureOf(await cli("settle", ...op("committed"), "--outcome", "dead"))
      expect(refused.code).toBe(1)
      expect(refused.lines).toHaveLength(1)
      expect(refused.lines[0]).toMatch(/^connector-store: settleOperation: refused for did:caller:1\/committed: it is committed/)
      const noSource = failureOf(await cli("settle", ...op("unknown"), "--outcome", "committed", "--document", "d"))
      expect(noSource).toEqual({ code: 1, lines: ["connector-store: --source is required to settle as committed"] })
      const badEntity = failureOf(await cli("settle", ...op("unknown"), "--outcome", "committed", "--source", "s", "--document", "d", "--entity", "{"))
      expect(badEntity.lines).toEqual(["connector-store: --entity must be a JSON value (the provider entity as the lookup found it)"])
    })

    it("settle dead, then retry: a dead operation not in doubt is due again; a reconcile_only one is refused", async () => {
      const { db, cli } = await seeded()
      const retryUnknown = failureOf(await cli("retry", ...op("unknown")))
      expect(retryUnknown.code).toBe(1)
      expect(retryUnknown.lines[0]).toMatch(/retryOperation: refused for did:caller:1\/unknown: it is reconcile_only/)
      const settled = jsonOf<{ operation: { state: string; inDoubt: boolean }; watch: null }>(
        await cli("settle", "--json", ...op("unknown"), "--outcome", "dead")
      )
      expect([settled.operation.state, settled.operation.inDoubt, settled.watch]).toEqual(["dead", false, null])
      const retried = await cli("retry", ...op("failed"))
      expect(retried.stdout.trim()).toBe("retried did:caller:1/failed: attempted, due now, attempts reset")
      const store = await openForCheck(db)
      try {
        expect(await store.getOperation({ callerDID: "did:caller:1", operationID: "failed" })).toMatchObject({
          state: "attempted",
          attempts: 0,
          leaseToken: null
        })
      } finally {
        await store.close()
      }
      const again = failureOf(await cli("retry", ...op("failed")))
      expect(again.lines[0]).toMatch(/it is attempted; only dead operations are retried$/)
    })

    it("rearm opens a new generation of a repair_failed watch; a missing flag or watch is a clear error", async () => {
      const { cli } = await seeded()
      const armed = await cli("rearm", ...brokenWatch, "--due", "now")
      expect(armed.code).toBe(0)
      expect(armed.stdout.trim()).toBe(
        "re-armed watch did:owner:1/gcal/Event/acct-1/src-broken: generation 1, pending_verification, due now"
      )
      const shown = jsonOf<{ verificationStatus: string; repairGeneration: number }>(await cli("show", "watch", "--json", ...brokenWatch))
      expect([shown.verificationStatus, shown.repairGeneration]).toEqual(["pending_verification", 1])
      const missing = failureOf(await cli("rearm", ...brokenWatch.slice(0, 8)))
      expect(missing.lines).toEqual(["connector-store: rearm needs --source (see connector-store rearm --help)"])
      const unknown = failureOf(await cli("rearm", ...brokenWatch.slice(0, 9), "src-none"))
      expect(unknown.lines).toEqual(["connector-store: rearmWatch: no watch did:owner:1/gcal/Event/acct-1/src-none"])
      const badDue = failureOf(await cli("rearm", ...brokenWatch, "--due", "soon"))
      expect(badDue.lines[0]).toMatch(/^connector-store: --due must be "now", a duration/)
    })

    it("collect deletes finished operations older than --before (duration or ISO date), at most --limit", async () => {
      const { cli } = await seeded()
      const recent = jsonOf<{ operations: number }>(await cli("collect", "--json", "--before", "7d"))
      expect(recent.operations).toBe(0)
      const future = await cli("collect", "--before", "2999-01-01", "--limit", "10", "--relist-runs")
      expect(future.stdout.trim()).toBe("collected 1 finished operation and 0 ended relist runs last updated before 2999-01-01T00:00:00.000Z")
      const listed = jsonOf<{ operations: Array<{ operationID: string }> }>(await cli("operations", "--json", "--state", "dead"))
      expect(listed.operations).toEqual([])
      const bad = failureOf(await cli("collect", "--before", "yesterday"))
      expect(bad.lines).toEqual(['connector-store: --before must be a duration like 7d or 12h, or an ISO date; got "yesterday"'])
    })

    it("relist list and abandon", async () => {
      const { cli, seed } = await seeded()
      const listed = jsonOf<{ runs: Array<{ runID: string; state: string; startedAt: string }> }>(await cli("relist", "list", "--json"))
      expect(listed.runs.map((run) => [run.runID, run.state])).toEqual([[seed.runID, "started"]])
      const abandoned = await cli("relist", "abandon", "--run", seed.runID)
      expect(abandoned.stdout.trim()).toBe(`abandoned relist run ${seed.runID}: it takes no more pages and yields no candidates`)
      const again = jsonOf<{ outcome: string }>(await cli("relist", "abandon", "--json", "--run", seed.runID))
      expect(again.outcome).toBe("already-ended")
      const table = await cli("relist", "list", "--state", "abandoned")
      expect(table.stdout).toMatch(new RegExp(`^${seed.runID}\\s+abandoned\\s+did:owner:1\\s+gcal`, "m"))
      const unknown = failureOf(await cli("relist", "abandon", "--run", "no-such-run"))
      expect(unknown.code).toBe(1)
      expect(unknown.lines).toHaveLength(1)
      expect(unknown.lines[0]).toMatch(/no-such-run/)
    })

    it("relist given-up lists a scope's given-up candidates; rearm-candidate opens one again", async () => {
      const { db, cli } = await seeded()
      await seedGivenUpCandidate(db)
      const scope = ["--owner", "did:owner:1", "--connector", "gcal", "--model", "Event", "--account", "acct-1"]
      const listed = jsonOf<{ candidates: Array<{ sourceID: string; kind: string; status: string; applyAttempts: number }> }>(
        await cli("relist", "given-up", "--json", ...scope)
      )
      expect(listed.candidates.map((c) => [c.sourceID, c.kind, c.status, c.applyAttempts])).toEqual([["src-broken", "deleted", "given_up", 5]])
      expect(jsonOf(await cli("status", "--json")).givenUpCandidates).toBe(1)
      const table = await cli("relist", "given-up", ...scope)
      expect(table.stdout).toMatch(/^src-broken\s+doc-broken\s+deleted\s+given_up\s+5\s+permission: not allowed$/m)
      const rearmed = await cli("relist", "rearm-candidate", ...scope, "--source", "src-broken")
      expect(rearmed.stdout.trim()).toBe("re-armed sweep candidate src-broken: open again, apply attempts reset")
      const again = await cli("relist", "rearm-candidate", ...scope, "--source", "src-broken")
      expect(again.stdout.trim()).toBe("sweep candidate src-broken is not given up; nothing changed")
      expect(jsonOf(await cli("relist", "given-up", "--json", ...scope)).candidates).toEqual([])
    })

    it("sync list shows where each lease stands; sync release clears a stale lease, a live one only with --force", async () => {
      const { cli } = await seeded()
      type Listed = { syncStates: Array<{ connectorName: string; ownerDID: string; lease: string; state: { leaseExpiresAt: string | null } }> }
      const listed = jsonOf<Listed>(await cli("sync", "list", "--json"))
      expect(listed.syncStates.map((row) => [row.connectorName, row.ownerDID, row.lease])).toEqual([
        ["gcal", "did:owner:1", "held"],
        ["jira", "did:owner:2", "stale"],
        ["slack", "did:owner:3", "none"]
      ])
      expect(JSON.stringify(listed)).not.toMatch(/token/i)
      expect(jsonOf<Listed>(await cli("sync", "list", "--json", "--lease", "stale")).syncStates.map((row) => row.connectorName)).toEqual(["jira"])
      const table = await cli("sync", "list", "--connector", "gcal")
      expect(table.stdout).toMatch(/^CONNECTOR\s+OWNER\s+STATUS\s+LEASE\s+LEASE EXPIRES/)
      expect(table.stdout).toMatch(/^gcal\s+did:owner:1\s+idle\s+held\s+in \d+\w+/m)

      const stale = await cli("sync", "release", "--connector", "jira", "--owner", "did:owner:2")
      expect(stale.stdout.trim()).toBe(
        "released the stale sync lease of jira/did:owner:2: the next claim takes it; its old holder's renewal reports lost"
      )
      const refused = failureOf(await cli("sync", "release", "--connector", "gcal", "--owner", "did:owner:1"))
      expect(refused.code).toBe(1)
      expect(refused.lines).toHaveLength(1)
      expect(refused.lines[0]).toMatch(/^connector-store: releaseSyncLeaseByOperator: refused for gcal\/did:owner:1: its lease is live until /)
      const none = await cli("sync", "release", "--connector", "slack", "--owner", "did:owner:3")
      expect(none.stdout.trim()).toBe("sync state slack/did:owner:3 holds no lease; nothing changed")
      const forced = jsonOf<{ outcome: string; was: string; state: { lease: string } }>(
        await cli("sync", "release", "--json", "--force", "--connector", "gcal", "--owner", "did:owner:1")
      )
      expect([forced.outcome, forced.was, forced.state.lease]).toEqual(["released", "held", "none"])
      expect(jsonOf(await cli("status", "--json")).syncStates).toEqual({ total: 3, leasesHeld: 0, staleLeases: 0 })
      const unknown = failureOf(await cli("sync", "release", "--connector", "nope", "--owner", "did:owner:1"))
      expect(unknown.lines).toEqual(["connector-store: releaseSyncLeaseByOperator: no sync state nope/did:owner:1"])
    })

    it("bad arguments: one clear line and a non-zero exit, nothing written", async () => {
      const { cli } = await seeded()
      const before = jsonOf(await cli("status", "--json"))
      for (const [args, expected] of [
        [["operations", "--limit", "0"], /^connector-store: --limit must be between 1 and 500, got 0$/],
        [["operations", "--state", "lost"], /attempted, committed, dead, reconcile_only/],
        [["operations", "--cursor", "garbage"], /^connector-store: listOperations: filter\.cursor is not a cursor this store returned$/],
        [["settle", ...op("unknown"), "--outcome", "maybe"], /committed, dead/],
        [["frobnicate"], /^connector-store: unknown command "frobnicate" for connector-store: use one of /]
      ] as const) {
        const failed = failureOf(await cli(...args))
        expect(failed.code, args.join(" ")).toBe(1)
        expect(failed.lines, args.join(" ")).toHaveLength(1)
        expect(failed.lines[0]).toMatch(expected)
      }
      // Only what a write would change: leases lapse and items fall due on their own while the test runs.
      const rows = (status: any) => [status.operations, status.watches, status.relistRuns, status.inDoubt, status.givenUpCandidates]
      expect(rows(jsonOf(await cli("status", "--json")))).toEqual(rows(before))
    })

    it("--database falls back to CONNECTOR_STORE_DATABASE; --help works on every command", async () => {
      const { db } = await seeded()
      const env = await runCli(["status", "--json", ...(db.tablePrefix === undefined ? [] : ["--table-prefix", db.tablePrefix])], {
        CONNECTOR_STORE_DATABASE: db.url
      })
      expect(jsonOf(env).operations.committed).toBe(2)
      const none = failureOf(await runCli(["status"]))
      expect(none.code).toBe(1)
      expect(none.lines).toEqual(["connector-store: --database is required (or set CONNECTOR_STORE_DATABASE)"])
      for (const command of [[], ["status"], ["operations"], ["show", "operation"], ["settle"], ["relist", "abandon"]]) {
        const help = await runCli([...command, "--help"])
        expect(help.code, command.join(" ")).toBe(0)
        expect(help.stdout, command.join(" ")).toMatch(/^Usage: connector-store/m)
      }
    })
  })
}

describe("a database that does not answer", { timeout: 120_000 }, () => {
  let silent: Server
  let port = 0
  const sockets: Array<Socket> = []
  beforeAll(async () => {
    // Accepts connections and never says a word, as a hung server or a black-holed route.
    silent = createServer((socket) => void sockets.push(socket))
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    port = (silent.address() as { port: number }).port
  })
  afterAll(() => {
    for (const socket of sockets) socket.destroy()
    return new Promise<void>((resolve) => silent.close(() => resolve()))
  })

  it("a silent Postgres server: a clear error within the connect timeout, no hang", async () => {
    const started = Date.now()
    const run = failureOf(await runCli(["status", "--connect-timeout", "2", "--database", `postgres://ops:secret@127.0.0.1:${port}/store`]))
    expect(run).toEqual({
      code: 1,
      lines: [`connector-store: cannot open database postgres://ops:***@127.0.0.1:${port}/store: unreachable: no answer within 2s`]
    })
    expect(Date.now() - started).toBeLessThan(60_000)
  })

  it("a closed Postgres port: a clear error naming the database, non-zero exit", async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const closedPort = (closed.address() as { port: number }).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const run = failureOf(await runCli(["operations", "--database", `postgres://postgres@127.0.0.1:${closedPort}/store`]))
    expect(run.code).toBe(1)
    expect(run.lines).toHaveLength(1)
    expect(run.lines[0]).toMatch(new RegExp(`^connector-store: cannot open database postgres://postgres@127\\.0\\.0\\.1:${closedPort}/store: `))
  })

  it("a SQLite path in a folder that does not exist: no such database, to inspect or to migrate", async () => {
    for (const command of ["status", "migrate"]) {
      expect(failureOf(await runCli([command, "--database", "/no/such/folder/store.sqlite"])), command).toEqual({
        code: 1,
        lines: ["connector-store: no such database: /no/such/folder/store.sqlite"]
      })
    }
  })
})

describe("connector-store simulate", { timeout: 300_000 }, () => {
  it("runs the simulation on a SQLite file: exit 0 and a JSON report whose invariants held", async () => {
    const file = freshSqlitePath()
    const run = await runCli(["simulate", "--operations", "8", "--runners", "2", "--seed", "1", "--json", "--database", file])
    const report = jsonOf<{ ok: boolean; seed: string; runners: number; database: string }>(run)
    expect([report.ok, report.seed, report.runners]).toEqual([true, "1", 2])
    expect(report.database).toContain(file)
    expect(existsSync(file)).toBe(true)
  })

  it("--file is --database (what .ci/run passes through npm start); the walkthrough with --explain", async () => {
    const file = freshSqlitePath()
    const run = await runCli(["simulate", "--explain", "--json", "--file", file])
    expect(jsonOf<{ steps: Array<unknown> }>(run).steps.length).toBeGreaterThan(0)
    expect(existsSync(file)).toBe(true)
  })

  it("bad options: one clear line, a non-zero exit, and no store created", async () => {
    for (const [args, expected] of [
      [["--operations", "abc"], /^connector-store: --operations must be a whole number, got "abc"$/],
      [["--runners", "-1"], /^connector-store: --runners must be a whole number, got "-1"$/],
      [["--duration", "soon"], /^connector-store: simulate: --duration must look like 90s, 2m or 500ms \(got "soon"\)$/],
      [["--seeed", "1"], /seeed/]
    ] as const) {
      const file = freshSqlitePath()
      const failed = failureOf(await runCli(["simulate", ...args, "--database", file]))
      expect(failed.code, args.join(" ")).toBe(1)
      expect(failed.lines, args.join(" ")).toHaveLength(1)
      expect(failed.lines[0]).toMatch(expected)
      expect(existsSync(file), args.join(" ")).toBe(false)
    }
  })

  it("--blind-resend is caught by the double-apply invariant: the run (deterministic for its seed) reports it and exits 1", async () => {
    const run = await runCli(["simulate", "--blind-resend", "--operations", "6", "--runners", "2", "--seed", "3", "--database", freshSqlitePath()])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/✗ no write applied twice at the provider except by a sanctioned reissue/)
    expect(run.stdout).toMatch(/applied \d+ times by requests that were not sanctioned reissues/)
    expect(run.stdout).toMatch(/AN INVARIANT FAILED/)
  })
})
