import { openConnectorStore, type SqlConnectorStore, type SqlTransaction } from "@connector-store/sql-adapter"
import pg from "pg"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { claimInput, NOW } from "./operations.fixtures.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

/**
 * Named prepared statements on Postgres: the lane's statements are parsed
 * once per connection (or never kept, with `prepareStatements: false`),
 * and a column added under a running store leaves its prepared reads working.
 */

let url: string
let admin: pg.Client
const open: Array<SqlConnectorStore> = []

beforeAll(async () => {
  if (!pgAvailable) return
  url = await pgDatabaseForFile()
  admin = new pg.Client({ connectionString: url })
  await admin.connect()
})
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()))
})
afterAll(async () => {
  await admin?.end()
})

interface Prepared {
  readonly name: string
  readonly statement: string
}

/**
 * A store on one connection, so every statement runs in one session; its
 * winner reader notes the prepared statements that session holds.
 */
const storeOn = async (prepareStatements?: boolean) => {
  const clock = { now: NOW }
  const seen: Array<ReadonlyArray<Prepared>> = []
  const sessions: Array<number> = []
  const prefix = freshPrefix()
  const store = await openConnectorStore({
    url,
    tablePrefix: prefix,
    maxConnections: 1,
    now: () => clock.now,
    ...(prepareStatements === undefined ? {} : { prepareStatements }),
    readWinner: async (_documentID: string, tx: SqlTransaction) => {
      seen.push(await tx.query<Prepared>("SELECT name, statement FROM pg_prepared_statements"))
      sessions.push((await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid)
      return "winner"
    }
  })
  open.push(store)
  return { store, clock, seen, sessions, prefix }
}

/** Claim, send and finalize operation `operationID`, which arms the watch of its document. */
const lifecycle = async (store: SqlConnectorStore, clock: { now: number }, operationID: string) => {
  const key = { callerDID: "did:caller:1", operationID }
  const claim = await store.claimOperation(claimInput({ operationID, sourceID: `src-${operationID}` }))
  if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
  expect(await store.markOperationSent(key, { leaseToken: claim.lease.token })).toMatchObject({ outcome: "sent" })
  clock.now += 1_000
  const finalized = await store.finalizeOperationAndArmWatch(key, {
    leaseToken: claim.lease.token,
    sourceID: `src-${operationID}`,
    documentID: `doc-${operationID}`,
    providerEtag: "etag-1",
    resultEntity: { id: operationID },
    watchDueAt: clock.now + 5_000
  })
  expect(finalized).toMatchObject({ outcome: "committed" })
  expect(await store.getOperation(key)).toMatchObject({ state: "committed" })
  expect(await store.getWatchByDocument(`doc-${operationID}`)).toMatchObject({ observedWinnerDigest: "winner" })
}

const ours = (prepared: ReadonlyArray<Prepared>) => prepared.filter((statement) => statement.name.startsWith("cs_"))

describe.skipIf(!pgAvailable)("named prepared statements on postgres", () => {
  it("are on by default: the lane's statements are prepared once in the session that runs them", async () => {
    const { clock, prefix, seen, store } = await storeOn()
    for (const operationID of ["op-1", "op-2", "op-3"]) await lifecycle(store, clock, operationID)
    const [first, second, third] = seen.map((prepared) => ours(prepared).map((statement) => statement.name).sort())
    expect(ours(seen[0]!).some((statement) => statement.statement.includes(`${prefix}operation`))).toBe(true)
    // Each lifecycle reused the statements the one before prepared; once every one was prepared, none is added.
    expect(second).toEqual(expect.arrayContaining(first!))
    expect(third).toEqual(second)
  })

  it("are off with prepareStatements: false: the lifecycle runs and nothing is prepared", async () => {
    const { clock, seen, store } = await storeOn(false)
    await lifecycle(store, clock, "op-1")
    await lifecycle(store, clock, "op-2")
    expect(seen).toHaveLength(2)
    expect(seen.flatMap(ours)).toEqual([])
  })

  it("keep working when a migration adds a column to the tables under a running store", async () => {
    const { clock, prefix, seen, store } = await storeOn()
    await lifecycle(store, clock, "op-1")
    expect(ours(seen[0]!).length).toBeGreaterThan(0)
    for (const table of ["operation", "projection_watch", "sync_state", "pending_auth", "provider_limits"]) {
      await admin.query(`ALTER TABLE ${prefix}${table} ADD COLUMN added_later text`)
    }
    await lifecycle(store, clock, "op-2")
    // The same prepared statements served the second lifecycle.
    expect(ours(seen[1]!).map((statement) => statement.name).sort()).toEqual(
      expect.arrayContaining(ours(seen[0]!).map((statement) => statement.name).sort())
    )
  })

  it("are prepared again on a connection that replaced a terminated one", async () => {
    const { clock, prefix, seen, sessions, store } = await storeOn()
    await lifecycle(store, clock, "op-1")
    await admin.query("SELECT pg_terminate_backend($1)", [sessions[0]])
    // The first call after may find the dead connection; the pool replaces it.
    await store.getOperation({ callerDID: "did:caller:1", operationID: "op-1" }).catch(() => undefined)
    await lifecycle(store, clock, "op-2")
    expect(sessions[1]).not.toBe(sessions[0])
    expect(ours(seen[1]!).some((statement) => statement.statement.includes(`${prefix}operation`))).toBe(true)
  })

  it("refuses a prepareStatements that is not a boolean", async () => {
    await expect(openConnectorStore({ url, prepareStatements: "no" as unknown as boolean }))
      .rejects.toMatchObject({ _tag: "InvalidInput", field: "options.prepareStatements" })
  })
})
