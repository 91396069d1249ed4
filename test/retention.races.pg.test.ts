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

/** Two stores on one prefix (the retrier's clock at NOW, the cleanup's a minute ahead) and a raw client. */
const setup = async (rows: ReadonlyArray<ConnectorOperation>) => {
  const connection = await postgres!.connection()
  const retrier = await openConnectorStore({ ...connection, clock: "local", now: () => NOW })
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
  /** Resolves once `count` statements of this database wait on a lock. */
  const waiting = async (count: number) => {
    for (;;) {
      const { rows: [row] } = await holder.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`
      )
      if (Number(row!.n) >= count) return
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
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
})
