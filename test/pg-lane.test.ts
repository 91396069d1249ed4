import { type PromiseWinnerReaders } from "@connector-store/core"
import { LaneDatabase } from "@connector-store/core/adapter"
import { openConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import pg from "pg"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { type Losses, pgPortsWithLane, type Seen, watchedLane } from "./support/direct.js"
import { clock, expectLostRaceBudget, gatedReader, id, normalized, promiseStoreOver, readers, script, seeded } from "./support/laneScript.js"

/**
 * The Promise API's lane on Postgres: the hot methods run on the pool with
 * one Promise per statement, no fiber. Every test compares with, or hands
 * over to, the Effect path, which is what the lane must match.
 */

let url: string
let admin: pg.Client
const closing: Array<() => Promise<void>> = []

beforeAll(async () => {
  if (!pgAvailable) return
  url = await pgDatabaseForFile()
  admin = new pg.Client({ connectionString: url })
  await admin.connect()
})
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()))
  clock.now = NOW
})
afterAll(async () => {
  await admin?.end()
})

/**
 * A Promise store on Postgres under a fresh table prefix, built as
 * `openConnectorStore` builds one, with its lane watched (and its writes
 * made to lose as `lose` says). `lane: false` gives the store no readers
 * for the lane, so every call takes the Effect path.
 */
const storeOn = async (readers: PromiseWinnerReaders<SqlTransaction>, options: { lane: boolean; lose?: Losses }) => {
  const seen: Seen = { begun: 0, busy: 0 }
  const prefix = freshPrefix()
  const { store, runtime } = promiseStoreOver(
    Layer.provideMerge(
      Layer.effect(LaneDatabase, Effect.map(LaneDatabase, (db) => watchedLane(db, seen, options.lose ?? { watchUpdates: 0 }))),
      pgPortsWithLane(url, prefix)
    ),
    readers,
    { lane: options.lane, dialect: "pg" },
    closing
  )
  return { store, seen, runtime, table: `${prefix}projection_watch` }
}

/** The store's connections (by application name) that sit in an open transaction. */
const idleInTransaction = async () =>
  Number(
    (await admin.query(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`
    )).rows[0].n
  )

describe.runIf(pgAvailable)("the Promise API's lane on Postgres", () => {
  it("answers every hot call, and leaves every row, exactly as the Effect methods on the ports do", async () => {
    const lane = await storeOn(readers, { lane: true })
    const laneAnswers = await script(lane.store)
    clock.now = NOW
    const ports = await storeOn(readers, { lane: false })
    const portAnswers = await script(ports.store)
    expect(normalized(laneAnswers)).toEqual(normalized(portAnswers))
    expect(lane.seen.begun).toBeGreaterThan(0)
    expect(ports.seen.begun).toBe(0)
  })

  it("runs concurrent calls on connections of their own, and hands every one back out of its transaction", async () => {
    const { release, readers: slow } = gatedReader()
    const { store, seen } = await storeOn(slow, { lane: true })
    const rows = Array.from({ length: 6 }, (_, n) =>
      watchRow({ sourceID: `src-${n}`, documentID: `doc-${n}`, verificationStatus: "pending_verification", nextAttemptAt: NOW }))
    await store.runEffect(seedWatches(...rows))
    const arming = rows.map((_, n) => store.armWatch(identityOf({ sourceID: `src-${n}` }), "manual", { dueAt: NOW }))
    try {
      // Every call holds a transaction of its own (new pooled connections take a moment), waiting on its reader.
      for (let waited = 0; seen.begun < 6 && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
      expect(seen.begun).toBe(6)
      // A call counted as begun may still be running its locked read for a moment before it waits idle on its reader.
      let idle = await idleInTransaction()
      for (let waited = 0; idle < 6 && waited < 5_000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        idle = await idleInTransaction()
      }
      expect(idle).toBe(6)
      // Single statements run beside them on other pooled clients.
      expect(await store.claimOperation(claimInput())).toMatchObject({ outcome: "claimed" })
    } finally {
      release()
    }
    expect(await Promise.all(arming)).toEqual(rows.map(() => "opened"))
    expect(await idleInTransaction()).toBe(0)
    for (const [n, row] of rows.entries()) {
      expect(await store.getWatch(identityOf({ sourceID: `src-${n}` }))).toMatchObject({
        repairGeneration: row.repairGeneration + 1,
        observedWinnerDigest: `w-doc-${n}`
      })
    }
  })

  it("retries lost writes and gives up after 6 tries with ConcurrentUpdateExhausted, counted in the store's metrics", async () => {
    const lose = { watchUpdates: 0 }
    const { store, seen } = await storeOn(readers, { lane: true, lose })
    await expectLostRaceBudget(store, seen, lose)
    expect(await idleInTransaction()).toBe(0)
  })

  it("rejects with WinnerReadFailed naming the method when the reader throws or rejects, and writes nothing", async () => {
    for (const readWinner of [() => { throw new Error("down") }, async () => { throw new Error("down") }]) {
      const { store } = await storeOn({ readWinner }, { lane: true })
      await store.runEffect(seedWatches(seeded))
      await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({
        _tag: "WinnerReadFailed",
        method: "armWatch",
        documentID: "doc-1"
      })
      expect(await store.getWatch(id)).toEqual(seeded)
      expect(await idleInTransaction()).toBe(0)
    }
  })

  const refusals = [
    {
      what: "a statement fails (a CHECK constraint)",
      refuse: (table: string) => [`ALTER TABLE ${table} ADD CONSTRAINT refuse_${table} CHECK (repair_generation < 0) NOT VALID`],
      undo: (table: string) => `ALTER TABLE ${table} DROP CONSTRAINT refuse_${table}`,
      error: { operation: "watch.update", reason: "constraint" }
    },
    {
      what: "the COMMIT fails (a deferred constraint trigger: the update runs, the COMMIT refuses it)",
      refuse: (table: string) => [
        `CREATE FUNCTION refuse_${table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$`,
        `CREATE CONSTRAINT TRIGGER refuse AFTER UPDATE ON ${table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_${table}()`
      ],
      undo: (table: string) => `DROP TRIGGER refuse ON ${table}`,
      error: { operation: "transaction", driverMessage: "refused at commit" }
    }
  ]
  for (const refusal of refusals) {
    it(`rejects with a classified PersistenceError naming the method when ${refusal.what}, keeps nothing, and goes on after`, async () => {
      const { store, runtime, table } = await storeOn(readers, { lane: true })
      await store.runEffect(seedWatches(seeded))
      const sql = (text: string) => runtime.runPromise(Effect.flatMap(SqlClient, (client) => client.unsafe(text)))
      for (const statement of refusal.refuse(table)) await sql(statement)
      await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({
        _tag: "PersistenceError",
        method: "armWatch",
        ...refusal.error
      })
      expect(await idleInTransaction()).toBe(0)
      await sql(refusal.undo(table))
      expect(await store.getWatch(id)).toEqual(seeded)
      expect(await store.armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
    })
  }
})

describe.runIf(pgAvailable)("a winner reader's handle on the Postgres lane (openConnectorStore)", () => {
  it("queries inside the call's own transaction: it may take the row lock the transaction holds, NOWAIT", async () => {
    const prefix = freshPrefix()
    const table = `${prefix}projection_watch`
    const handles: Array<string> = []
    const store = await openConnectorStore({
      url,
      tablePrefix: prefix,
      clock: "local",
      readWinner: async (documentID, handle) => {
        handles.push(handle.dialect)
        // On any other connection this fails at once: the call's transaction holds the row's lock.
        const rows = await handle.query<{ source_id: string }>(
          `SELECT source_id FROM ${table} WHERE document_id = $1 FOR UPDATE NOWAIT`,
          [documentID]
        )
        return `w-${rows[0]?.source_id}`
      }
    })
    closing.push(() => store.close())
    await store.runEffect(seedWatches(seeded))
    expect(await store.armWatch(id, "manual", { dueAt: store.now() })).toBe("opened")
    expect(await store.getWatch(id)).toMatchObject({ observedWinnerDigest: `w-${id.sourceID}` })
    expect(handles).toEqual(["pg"])
  })
})

describe.runIf(pgAvailable)("the Postgres lane when the server ends the transaction", () => {
  /** A store whose reader waits for `gate` (and whatever `inside` does with the handle) before it answers. */
  const gatedStore = async (inside: (handle: SqlTransaction) => Promise<void>) => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => release = resolve)
    const store = await openConnectorStore({
      url,
      tablePrefix: freshPrefix(),
      clock: "local",
      readWinner: async (documentID, handle) => {
        await gate
        await inside(handle)
        return `w-${documentID}`
      }
    })
    closing.push(() => store.close())
    await store.runEffect(seedWatches(seeded))
    return { store, release }
  }

  it("fails a call whose transaction's backend was terminated mid-call as unreachable, keeps nothing, and goes on", async () => {
    const { store, release } = await gatedStore(async () => undefined)
    const arming = store.armWatch(id, "manual", { dueAt: store.now() })
    let backends: Array<number> = []
    for (let waited = 0; backends.length === 0 && waited < 5_000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      backends = (await admin.query(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`
      )).rows.map((row: { pid: number }) => row.pid)
    }
    expect(backends).toHaveLength(1)
    await admin.query(`SELECT pg_terminate_backend($1)`, [backends[0]])
    release()
    await expect(arming).rejects.toMatchObject({ _tag: "PersistenceError", method: "armWatch", reason: "unreachable" })
    expect(await store.getWatch(id)).toEqual(seeded)
    expect(await store.armWatch(id, "manual", { dueAt: store.now() })).toBe("opened")
    expect(await idleInTransaction()).toBe(0)
  })

  it("fails a call whose reader caught a failed query: the server rolls the transaction back at COMMIT, and the call must not say it committed", async () => {
    const { store, release } = await gatedStore(async (handle) => {
      // A failed statement aborts a Postgres transaction; catching it does not undo that.
      await handle.query("SELECT 1 / 0").catch(() => undefined)
    })
    release()
    // An ingress arm whose winner fails the gate writes nothing: the COMMIT comes straight after the read.
    await expect(store.armWatch(id, "ingress", { dueAt: store.now(), triggeringWinner: "not-the-winner" })).rejects.toMatchObject({
      _tag: "PersistenceError",
      method: "armWatch",
      operation: "transaction"
    })
    expect(await store.getWatch(id)).toEqual(seeded)
    expect(await idleInTransaction()).toBe(0)
  })
})
