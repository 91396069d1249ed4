import { type ConnectorOperation, OperationRepository, type PromiseConnectorStore } from "@connector-store/core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import pg from "pg"
import { afterEach, describe, expect, it } from "vitest"
import { attemptedRow, NOW } from "./operations.fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { postgresAdapter } from "./support/stores.js"

/**
 * Retention racing an operator on another store instance (its own pool), with
 * the interleaving forced by row locks held from a separate connection: the
 * cleanup has read its candidates and waits on a lock while the other store
 * commits a change that makes a row kept. Nothing may be deleted on the
 * reason it read before it waited.
 */
const postgres = pgAvailable ? await postgresAdapter() : undefined

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

const finished = (operationID: string, state: "committed" | "dead", age: number): ConnectorOperation =>
  attemptedRow({
    operationID,
    nodeKey: `node-${operationID}`,
    state,
    nextAttemptAt: null,
    createdAt: NOW - 60_000 + age,
    updatedAt: NOW - 30_000 + age
  })

/** A finished row still in doubt: its run's request may have landed, so an operator may settle it. */
const unconfirmed = (operationID: string, age: number): ConnectorOperation => ({
  ...finished(operationID, "dead", age),
  sendMarker: `run-${operationID}`,
  inDoubtSince: NOW - 40_000 + age
})

/** An attempted row driven by a runner holding lease `lease-<operationID>`. */
const leased = (operationID: string, age: number): ConnectorOperation =>
  attemptedRow({
    operationID,
    nodeKey: `node-${operationID}`,
    leaseToken: `lease-${operationID}`,
    leaseExpiresAt: NOW + 30_000,
    createdAt: NOW - 60_000 + age,
    updatedAt: NOW - 30_000 + age
  })

/**
 * Two stores on one prefix (the retrier's clock at `retrierNow`, NOW unless
 * given; the cleanup's a minute ahead, collecting before its own now) and a
 * raw client.
 */
const setup = async (rows: ReadonlyArray<ConnectorOperation>, retrierNow: number = NOW) => {
  const connection = await postgres!.connection()
  const retrier = await openConnectorStore({ ...connection, clock: "local", now: () => retrierNow, readWinner: () => null })
  closers.push(() => retrier.close())
  const cleaner = await openConnectorStore({ ...connection, clock: "local", now: () => NOW + 60_000 })
  closers.push(() => cleaner.close())
  await retrier.runEffect(Effect.flatMap(OperationRepository, (repo) => Effect.forEach(rows, (row) => repo.insert(row))))
  const holder = new pg.Client({ connectionString: connection.url })
  await holder.connect()
  closers.push(() => holder.end())
  const table = `${connection.tablePrefix}operation`
  /** Opens a transaction on its own connection that holds the row lock of `operationID` until released. */
  const hold = async (operationID: string) => {
    const client = new pg.Client({ connectionString: connection.url })
    await client.connect()
    closers.push(() => client.end())
    await client.query("BEGIN")
    await client.query(`SELECT 1 FROM ${table} WHERE operation_id = $1 FOR UPDATE`, [operationID])
    return () => client.query("COMMIT")
  }
  /** Resolves once `count` statements of this database wait on a lock; fails after 10 s. */
  const waiting = async (count: number) => {
    for (const started = Date.now(); Date.now() - started < 10_000;) {
      const { rows: [row] } = await holder.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`
      )
      if (Number(row!.n) >= count) return
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    throw new Error(`expected ${count} statements waiting on a lock within 10 s`)
  }
  const stored = async (store: PromiseConnectorStore<unknown>) =>
    (await Promise.all(rows.map((row) => store.getOperation(row)))).map((row) => row === null ? null : row.state)
  return { retrier, cleaner, hold, waiting, stored }
}

describe.runIf(postgres !== undefined)("retention racing other stores on Postgres", () => {
  it("keeps an operation a concurrent retry revived while the cleanup waited on its lock", async () => {
    // op-1 is dead and superseded by a newer committed op-2: collectable, until it is retried.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      finished("op-1", "dead", 0),
      finished("op-2", "committed", 1_000)
    ])
    const release = await hold("op-1")
    const retry = retrier.retryOperation({ callerDID: "did:caller:1", operationID: "op-1" })
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await release()
    expect((await retry).state).toBe("attempted")
    expect(await collect).toBe(0)
    expect(await stored(cleaner)).toEqual(["attempted", "committed"])
  })

  it("keeps an operation that became its partition's newest finished row when a concurrent retry revived the newer one", async () => {
    // op-1 is dead and superseded by a newer dead op-2; reviving op-2 makes op-1 the newest finished row again.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      finished("op-1", "dead", 0),
      finished("op-2", "dead", 1_000)
    ])
    const releaseOne = await hold("op-1")
    const releaseTwo = await hold("op-2")
    const retry = retrier.retryOperation({ callerDID: "did:caller:1", operationID: "op-2" })
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await releaseTwo()
    expect((await retry).state).toBe("attempted")
    await releaseOne()
    expect(await collect).toBe(0)
    expect(await stored(cleaner)).toEqual(["dead", "attempted"])
  })

  it("two cleanups racing delete only superseded rows and keep the partition's newest", async () => {
    const rows = [0, 1, 2, 3, 4].map((i) => finished(`op-${i}`, "committed", i * 1_000))
    const { retrier, cleaner, hold, waiting, stored } = await setup(rows)
    const release = await hold("op-0")
    const first = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 2 })
    await waiting(1)
    const second = retrier.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await release()
    const deleted = (await first) + (await second)
    expect(deleted).toBe(4)
    expect(await stored(cleaner)).toEqual([null, null, null, null, "committed"])
  })

  it("keeps an operation an operator settled as committed while the cleanup waited: it became its document's newest committed row", async () => {
    // op-1 is dead but in doubt and superseded by a newer dead op-2: collectable, until it is settled as committed.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      unconfirmed("op-1", 0),
      finished("op-2", "dead", 1_000)
    ])
    const release = await hold("op-1")
    const settle = retrier.settleOperation(
      { callerDID: "did:caller:1", operationID: "op-1" },
      { outcome: "committed", sourceID: "src-1", documentID: "doc-1", watchDueAt: NOW + 60_000 }
    )
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await release()
    expect((await settle).operation.state).toBe("committed")
    expect(await collect).toBe(0)
    expect(await stored(cleaner)).toEqual(["committed", "dead"])
  })

  it("keeps an operation whose newer partner an operator settled onto another document while the cleanup waited", async () => {
    // op-1 is superseded only by op-2, which is in doubt; settled onto doc-2, it leaves op-1 doc-1's newest row.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      finished("op-1", "dead", 0),
      unconfirmed("op-2", 1_000)
    ])
    const releaseOne = await hold("op-1")
    const releaseTwo = await hold("op-2")
    const settle = retrier.settleOperation(
      { callerDID: "did:caller:1", operationID: "op-2" },
      { outcome: "committed", sourceID: "src-2", documentID: "doc-2", watchDueAt: NOW + 60_000 }
    )
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await releaseTwo()
    expect((await settle).operation.documentID).toBe("doc-2")
    await releaseOne()
    expect(await collect).toBe(0)
    expect(await stored(cleaner)).toEqual(["dead", "committed"])
  })

  it("keeps an operation an operator settled while the cleanup waited, when the settle made it younger than the cutoff", async () => {
    // The operator's clock runs past the cleanup's cutoff: settled dead, op-1 stays dead but was touched after it was chosen.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      unconfirmed("op-1", 0),
      finished("op-2", "dead", 1_000)
    ], NOW + 120_000)
    const release = await hold("op-1")
    const settle = retrier.settleOperation({ callerDID: "did:caller:1", operationID: "op-1" }, { outcome: "dead" })
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await release()
    expect((await settle).operation.updatedAt).toBe(NOW + 120_000)
    expect(await collect).toBe(0)
    expect(await stored(cleaner)).toEqual(["dead", "dead"])
  })

  it("a finalize of a newer operation on the document while the cleanup waited: the cleanup decides on what it locked, the finalized row stays", async () => {
    // op-1 is superseded by op-2; op-3 is newer, attempted and leased. The cleanup waits on op-2 (op-1's witness)
    // while op-3's finalize commits; op-1 goes, op-2 stays this pass (it was its document's newest when chosen).
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      finished("op-1", "committed", 0),
      finished("op-2", "committed", 1_000),
      leased("op-3", 2_000)
    ])
    const releaseTwo = await hold("op-2")
    const releaseThree = await hold("op-3")
    const finalize = retrier.finalizeOperationAndArmWatch(
      { callerDID: "did:caller:1", operationID: "op-3" },
      { leaseToken: "lease-op-3", sourceID: "src-3", documentID: "doc-1", watchDueAt: NOW + 60_000 }
    )
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await releaseThree()
    expect((await finalize).outcome).toBe("committed")
    await releaseTwo()
    expect(await collect).toBe(1)
    expect(await stored(cleaner)).toEqual([null, "committed", "committed"])
    // The next pass sees the finalize: op-2 is superseded now, op-3 is the document's newest.
    expect(await cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })).toBe(1)
    expect(await stored(cleaner)).toEqual([null, null, "committed"])
  })

  it("deletes no more than it chose, when a settle while it waited made a row it locked collectable", async () => {
    // doc-2: op-1 is superseded by op-2 (op-1's witness). doc-1: op-3, dead in doubt, is superseded by a newer dead op-4.
    // Settled as committed onto doc-2, op-3 (the newest row) supersedes op-2 there; op-2 was not chosen, so it stays.
    const { retrier, cleaner, hold, waiting, stored } = await setup([
      { ...finished("op-1", "committed", 0), documentID: "doc-2" },
      { ...finished("op-2", "committed", 1_000), documentID: "doc-2" },
      unconfirmed("op-3", 2_000),
      finished("op-4", "dead", 3_000)
    ])
    const release = await hold("op-3")
    const settle = retrier.settleOperation(
      { callerDID: "did:caller:1", operationID: "op-3" },
      { outcome: "committed", sourceID: "src-3", documentID: "doc-2", watchDueAt: NOW + 60_000 }
    )
    await waiting(1)
    const collect = cleaner.collectFinishedOperations({ before: NOW + 60_000, limit: 10 })
    await waiting(2)
    await release()
    expect((await settle).operation.documentID).toBe("doc-2")
    expect(await collect).toBe(1)
    expect(await stored(cleaner)).toEqual([null, "committed", "committed", "dead"])
  })
})
