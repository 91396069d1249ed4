import {
  type ClaimOperationInput,
  type ConnectorOperation,
  decideDueClaim,
  decideEnqueue,
  decideOperationClaim,
  type FailoverDoubt,
  type OperationPolicySettings,
  StoreMetrics
} from "@connector-store/core"
import { Effect, Metric } from "effect"
import { openConnectorStore, readGeneration, type SqlConnectorStore } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import { copyFileSync, existsSync, rmSync } from "node:fs"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { editOf, EventLedger, tally, writeBack, type WriteBackEnd } from "./support/failoverLedger.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const POLICY: OperationPolicySettings = {
  leaseMs: 10_000,
  maxAttempts: 3,
  backoff: { baseDelayMs: 1_000, maxDelayMs: 8_000, jitter: "equal" },
  deferMs: 60_000
}
const NOW = 1_700_000_000_000
const FRESH = { nodeKey: "node-1", incarnation: "inc-1", leaseToken: "lease-1" }
const WINDOW: FailoverDoubt = { noticedAt: NOW - 1_000, until: NOW + 60_000, lookbackFrom: NOW - 61_000 }

const claimed = (row: ConnectorOperation | undefined, input: ClaimOperationInput, doubt: FailoverDoubt | undefined, now = NOW) => {
  const decision = decideOperationClaim(row, input, FRESH, POLICY, now, doubt)
  if (decision.conflict) throw new Error("conflict")
  return decision
}

/** The row of `input` after a clean first claim `ago` ms before NOW, released again (its lease lapsed, never marked). */
const releasedRow = (input: ClaimOperationInput, updatedAt: number): ConnectorOperation => {
  const first = claimed(undefined, input, undefined, updatedAt).next!
  return { ...first, leaseToken: null, leaseExpiresAt: null, updatedAt }
}

describe("the claim decision under a failover's doubt", () => {
  it("a new key with a safe re-send is claimed in doubt, with its reissue", () => {
    const decision = claimed(undefined, claimInput(), WINDOW)
    expect(decision.result).toMatchObject({ outcome: "claimed", created: true, reissue: { kind: "conditional-update", ifMatch: "etag-0" } })
    expect(decision.next).toMatchObject({ state: "attempted", inDoubtSince: NOW, leaseToken: "lease-1" })
  })

  it("a new key with no safe re-send is parked reconcile_only, unleased, for a person", () => {
    const decision = claimed(undefined, claimInput({ reissueIntent: { kind: "reconcile" } }), WINDOW)
    expect(decision.result.outcome).toBe("finished")
    expect(decision.next).toMatchObject({ state: "reconcile_only", inDoubtSince: NOW, leaseToken: null, leaseExpiresAt: null, attempts: 0 })
  })

  it("a new key claimed with markSent is marked in the same write, in doubt", () => {
    const decision = claimed(undefined, claimInput({ markSent: true }), WINDOW)
    expect(decision.result).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update" } })
    expect(decision.next).toMatchObject({ inDoubtSince: NOW, sendMarker: "lease-1", attempts: 1 })
  })

  it("a known key never marked is claimed in doubt inside the window", () => {
    const row = releasedRow(claimInput(), NOW - 5 * 60_000 - 61_000)
    const decision = claimed(row, claimInput(), WINDOW)
    expect(decision.result).toMatchObject({ outcome: "claimed", created: false, reissue: { kind: "conditional-update" } })
    expect(decision.next?.inDoubtSince).toBe(NOW)
  })

  it("an enqueue of a new key queues it in doubt; of a known key it changes nothing", () => {
    const queued = decideEnqueue(undefined, claimInput(), FRESH, NOW, WINDOW)
    expect(queued).toMatchObject({ conflict: false, next: { state: "attempted", inDoubtSince: NOW, leaseToken: null } })
    expect(decideEnqueue(undefined, claimInput(), FRESH, NOW, undefined)).toMatchObject({ next: { inDoubtSince: null } })
    const row = releasedRow(claimInput(), NOW - 1_000)
    expect(decideEnqueue(row, claimInput(), FRESH, NOW, WINDOW)).toMatchObject({ next: undefined, result: { outcome: "known" } })
  })

  it("a due claim is decided the same way", () => {
    const row = releasedRow(claimInput(), NOW - 120_000)
    expect(decideDueClaim(row, "lease-2", 10_000, POLICY, NOW, WINDOW).result).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update" } })
    expect(decideDueClaim(row, "lease-2", 10_000, POLICY, NOW, undefined).result).toMatchObject({ outcome: "claimed", reissue: null })
  })

  it("after the window only rows last written in the lookback, and not since, stay in doubt", () => {
    const after = WINDOW.until + 1
    const inLookback = releasedRow(claimInput(), WINDOW.noticedAt - 30_000)
    const older = releasedRow(claimInput(), WINDOW.lookbackFrom - 1)
    const since = releasedRow(claimInput(), WINDOW.noticedAt + 10)
    expect(claimed(inLookback, claimInput(), WINDOW, after).result).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update" } })
    expect(claimed(older, claimInput(), WINDOW, after).result).toMatchObject({ outcome: "claimed", reissue: null })
    expect(claimed(since, claimInput(), WINDOW, after).result).toMatchObject({ outcome: "claimed", reissue: null })
    expect(claimed(undefined, claimInput(), WINDOW, after).result).toMatchObject({ outcome: "claimed", reissue: null })
  })

  it("without a doubt, or with it ended, a claim is decided as before", () => {
    const ended: FailoverDoubt = { noticedAt: WINDOW.noticedAt, until: NOW - 1, lookbackFrom: WINDOW.noticedAt }
    for (const doubt of [undefined, ended]) {
      expect(claimed(undefined, claimInput(), doubt).result).toMatchObject({ outcome: "claimed", reissue: null })
      expect(claimed(undefined, claimInput(), doubt).next?.inDoubtSince).toBeNull()
    }
  })

  it("a busy or scheduled row is left as it is; a committed one stays finished", () => {
    const busy = claimed(undefined, claimInput(), undefined, NOW - 1_000).next!
    expect(claimed(busy, claimInput(), WINDOW).result.outcome).toBe("busy")
    const scheduled = { ...releasedRow(claimInput(), NOW - 1_000), nextAttemptAt: NOW + 5_000 }
    expect(claimed(scheduled, claimInput(), WINDOW).result.outcome).toBe("scheduled")
    const committed = { ...releasedRow(claimInput(), NOW - 1_000), state: "committed" as const }
    expect(claimed(committed, claimInput(), WINDOW)).toMatchObject({ result: { outcome: "finished" }, next: undefined })
  })
})

const WATCH_DUE = NOW + 3_600_000

/** The metrics of the failover doubt, as an exporter reads them. */
const doubtfulCount = () => Effect.runSync(Metric.value(StoreMetrics.failoverDoubtfulClaims)).count
const gauge = () => Effect.runSync(Metric.value(StoreMetrics.failoverDoubtUntil)).value

/** Runs every edit of `ns` through `store`, one after another. */
const replay = async (store: SqlConnectorStore, ns: ReadonlyArray<number>, ledger: EventLedger) => {
  const ends: Array<WriteBackEnd> = []
  for (const n of ns) ends.push(await writeBack(store, editOf(n), ledger, WATCH_DUE))
  return ends
}
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Waits (polling, bounded) until `check` holds. */
const until = async (check: () => boolean, what: string, ms = 10_000) => {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const generationIn = (path: string, prefix = "kubun_connector_") => {
  const db = new Database(path, { readonly: true })
  try {
    return Number((db.prepare(`SELECT generation FROM ${prefix}server_history WHERE id = 1`).get() as { generation: number }).generation)
  } finally {
    db.close()
  }
}

/** An older copy of a SQLite file, put back: the 100 write-backs, a copy after the first 50, every edit replayed. */
const restoredSqlite = async (options: { readonly failoverDoubtMs?: number }) => {
  const path = freshSqlitePath()
  const ledger = new EventLedger()
  const first = await openConnectorStore({ url: path, operationPolicy: POLICY, readWinner: () => null, ...options })
  expect(await replay(first, range(1, 50), ledger)).not.toContain("reissued")
  await first.close()
  const copy = `${path}.backup`
  copyFileSync(path, copy)
  const copied = generationIn(copy)
  const second = await openConnectorStore({ url: path, operationPolicy: POLICY, readWinner: () => null, ...options })
  await replay(second, range(51, 100), ledger)
  // The store raises its generation beside the file within a second of writing: a copy older than that is told apart.
  await until(() => (readGeneration(`${path}-generation`) ?? 0) > copied, "the generation to pass the copy's")
  await second.close()
  for (const suffix of ["", "-wal", "-shm"]) if (existsSync(`${path}${suffix}`)) rmSync(`${path}${suffix}`)
  copyFileSync(copy, path)
  const restored = await openConnectorStore({ url: path, operationPolicy: POLICY, readWinner: () => null, ...options })
  return { restored, ledger, path }
}

describe("an older copy of a SQLite file put back", () => {
  it("is noticed at open: every edit it forgot is re-sent only with its reissue, none applied twice", async () => {
    const { ledger, restored } = await restoredSqlite({})
    try {
      const status = await restored.getStoreStatus()
      expect(status.durability).toMatchObject({ backend: "sqlite", canLoseAcknowledgedWrites: true, detecting: true })
      expect(status.durability.failover).toMatchObject({ doubtfulClaims: 0, ended: null })
      expect(gauge()).toBe(status.durability.failover!.until)
      const counted = doubtfulCount()
      const ends = await replay(restored, range(1, 100), ledger)
      // 1..50 the copy has committed; of 51..100, the 45 with a conditional re-send go out with it (412, then looked
      // up: ours had landed), the 5 without one wait for a person.
      expect(tally(ends)).toEqual({ already: 50, reissued: 45, reconcile_only: 5 })
      expect(ledger.doubleApplied).toBe(0)
      expect((await restored.getStoreStatus()).durability.failover?.doubtfulClaims).toBe(50)
      expect(doubtfulCount() - counted).toBe(50)
    } finally {
      await restored.close()
    }
  })

  it("with the window set to 0 nothing is in doubt, and the forgotten edits are applied twice", async () => {
    const { ledger, restored } = await restoredSqlite({ failoverDoubtMs: 0 })
    try {
      await replay(restored, range(1, 100), ledger)
      // The figure: every one of the 50 edits the copy forgot, applied a second time.
      expect(ledger.doubleApplied).toBe(50)
    } finally {
      await restored.close()
    }
  })

  it("an operator ends the window early: claims are decided as usual again, and who ended it is on record", async () => {
    const { restored } = await restoredSqlite({})
    try {
      expect(await restored.endFailoverDoubt({ by: "ops@example.com" })).toMatchObject({ outcome: "ended", failover: { ended: { by: "ops@example.com" } } })
      expect(gauge()).toBe(0)
      await expect(restored.endFailoverDoubt({ by: "" })).rejects.toMatchObject({ _tag: "InvalidInput", field: "input.by" })
      expect((await restored.claimOperation(editOf(77))).outcome === "claimed" && (await restored.getOperation(editOf(77))))
        .toMatchObject({ inDoubtSince: null })
      expect(await restored.endFailoverDoubt({ by: "ops@example.com" })).toEqual({ outcome: "none" })
      expect((await restored.getStoreStatus()).durability.failover?.ended?.by).toBe("ops@example.com")
    } finally {
      await restored.close()
    }
  })

  it("an edit enqueued in the window is queued in doubt: the worker's claim, even after the window, hands out its reissue", async () => {
    const { restored } = await restoredSqlite({})
    try {
      expect(await restored.enqueueOperation(editOf(201))).toMatchObject({ outcome: "enqueued", operation: { inDoubtSince: expect.any(Number) } })
      await restored.endFailoverDoubt({ by: "ops@example.com" })
      const due = await restored.claimDueOperations({ limit: 10 })
      expect(due.claimed.find((claim) => claim.operation.operationID === "edit-201")).toMatchObject({ reissue: { kind: "conditional-update" } })
      expect((await restored.enqueueOperation(editOf(202))).operation.inDoubtSince).toBeNull()
    } finally {
      await restored.close()
    }
  })

  it("a file opened again as it was is not taken for a restore", async () => {
    const path = freshSqlitePath()
    for (let i = 0; i < 3; i++) {
      const store = await openConnectorStore({ url: path, readWinner: () => null })
      await store.claimOperation(editOf(i))
      expect((await store.getStoreStatus()).durability.failover).toBeNull()
      await store.close()
    }
  })

  it("refuses bad options, and synchronous replication, which SQLite cannot give, before writing anything", async () => {
    const path = freshSqlitePath()
    await expect(openConnectorStore({ url: path, failoverDoubtMs: -1 })).rejects.toMatchObject({ _tag: "InvalidInput", field: "options.failoverDoubtMs" })
    await expect(openConnectorStore({ url: path, serverCheckMs: 1.5 })).rejects.toMatchObject({ _tag: "InvalidInput", field: "options.serverCheckMs" })
    await expect(openConnectorStore({ url: path, generationFile: "" })).rejects.toMatchObject({ _tag: "InvalidInput", field: "options.generationFile" })
    await expect(openConnectorStore({ url: path, requireSynchronousReplication: true })).rejects.toMatchObject({ _tag: "ReplicationNotSynchronous" })
    const db = new Database(path, { readonly: true })
    expect(db.prepare("SELECT count(*) AS n FROM sqlite_master").get()).toEqual({ n: 0 })
    db.close()
  })
})

describe.runIf(pgAvailable)("Postgres: a server that is not the one that acknowledged the store's writes", () => {
  const opened: Array<SqlConnectorStore> = []
  afterAll(async () => {
    for (const store of opened) await store.close().catch(() => undefined)
  })
  const open = async (url: string, prefix: string, extra: Record<string, unknown> = {}) => {
    const store = await openConnectorStore({ url, tablePrefix: prefix, operationPolicy: POLICY, readWinner: () => null, ...extra })
    opened.push(store)
    return store
  }

  it("reports how the server replicates, and refuses to open without synchronous replication when asked, writing nothing", async () => {
    const url = await pgDatabaseForFile()
    const prefix = freshPrefix()
    const store = await open(url, prefix)
    const { durability } = await store.getStoreStatus()
    expect(durability).toMatchObject({
      backend: "postgres",
      canLoseAcknowledgedWrites: true,
      detecting: true,
      failover: null,
      replication: { synchronousStandbyNames: "", standbys: [] },
      server: { timeline: expect.any(Number), systemIdentifier: expect.stringMatching(/^\d+$/) }
    })
    const other = freshPrefix()
    await expect(openConnectorStore({ url, tablePrefix: other, requireSynchronousReplication: true })).rejects.toMatchObject({
      _tag: "ReplicationNotSynchronous",
      method: "openConnectorStore",
      synchronousStandbyNames: ""
    })
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const tables = await client.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE $1", [`${other}%`])
      expect(tables.rows[0]).toEqual({ n: 0 })
    } finally {
      await client.end()
    }
  })

  it("a recorded timeline that is not the server's opens the window: forgotten edits go out only with their reissue", async () => {
    const url = await pgDatabaseForFile()
    const prefix = freshPrefix()
    const ledger = new EventLedger()
    const first = await open(url, prefix)
    await replay(first, range(1, 40), ledger)
    await first.close()
    // What a promoted replica that was behind holds: the rows of edits 21..40 never reached it, and the history it
    // replicated names the old primary's timeline.
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      await client.query(`DELETE FROM ${prefix}operation WHERE operation_id = ANY($1)`, [range(21, 40).map((n) => `edit-${n}`)])
      await client.query(`DELETE FROM ${prefix}projection_watch WHERE document_id = ANY($1)`, [range(21, 40).map((n) => `doc-${n}`)])
      await client.query(`UPDATE ${prefix}server_history SET timeline = timeline + 7`)
    } finally {
      await client.end()
    }
    const promoted = await open(url, prefix)
    const noticed = (await promoted.getStoreStatus()).durability.failover
    expect(noticed).toMatchObject({ doubtfulClaims: 0, ended: null })
    expect(noticed!.from.timeline).toBe(noticed!.to.timeline! + 7)
    const ends = await replay(promoted, range(1, 40), ledger)
    expect(tally(ends)).toEqual({ already: 20, reissued: 18, reconcile_only: 2 })
    expect(ledger.doubleApplied).toBe(0)
    // Another process opening now adopts the recorded window rather than noticing anew, with the claims it cost.
    expect((await promoted.getStoreStatus()).durability.failover?.doubtfulClaims).toBe(20)
    const beside = await open(url, prefix)
    expect((await beside.getStoreStatus()).durability.failover).toMatchObject({ noticedAt: noticed!.noticedAt, doubtfulClaims: 20 })
    expect(await beside.claimOperation(editOf(99))).toMatchObject({ outcome: "claimed", reissue: { kind: "conditional-update" } })
  })
})
