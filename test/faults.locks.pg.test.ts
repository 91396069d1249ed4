import { ConnectorStore, type OperationKey, PersistenceError } from "@connector-store/core"
import { classified, classifyDriverFailure, openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startCommitDropProxy } from "./faults.proxy.js"
import { claimFor, rejectionOf, sleep, storedRows, withClient } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const key = (id: string): OperationKey => ({ callerDID: "did:caller:faults", operationID: id })

/** How late past its limit a call may end (timers, a loaded machine). */
const SLACK_MS = 1_500

/** What a call ended with, and how long it took. */
const ended = async (promise: Promise<unknown>): Promise<{ readonly error: unknown; readonly elapsed: number }> => {
  const started = performance.now()
  const error = await rejectionOf(promise)
  return { error, elapsed: performance.now() - started }
}

/**
 * Another session holds the operation row `id` of `prefix` locked (`SELECT
 * … FOR UPDATE` in an open transaction) until `release` rolls it back.
 */
const lockRow = async (url: string, prefix: string, id: string) => {
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  await holder.query("BEGIN")
  await holder.query(`SELECT * FROM ${prefix}operation WHERE operation_id = $1 FOR UPDATE`, [id])
  return {
    release: async () => {
      await holder.query("ROLLBACK")
      await holder.end()
    }
  }
}

/**
 * Waiting on a lock another session holds ends in bounded time on
 * Postgres: at the session's `lock_timeout` (reason `lock-timeout`), its
 * `statement_timeout` (reason `timeout`) or the store's call bound (reason
 * `timeout`), whichever comes first, and nothing of the call is written,
 * not even once the lock is released after it was answered.
 */
describe.runIf(pgAvailable)("a row locked by another session, on Postgres", () => {
  let url: string
  const stores: Array<SqlConnectorStore> = []

  beforeAll(async () => {
    url = await pgDatabaseForFile()
  })

  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()))
  })

  const open = async (bounds: { readonly lockTimeoutMs?: number; readonly statementTimeoutMs?: number; readonly callTimeoutMs?: number }) => {
    const prefix = freshPrefix()
    const store = await openConnectorStore({ url, tablePrefix: prefix, clock: "local", readWinner: () => "winner-1", ...bounds })
    stores.push(store)
    return { store, prefix }
  }

  /** A claimed operation `id` and its lease token. */
  const claimed = async (store: SqlConnectorStore, id: string) => {
    const claim = await store.claimOperation(claimFor(id))
    if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
    return claim.lease.token
  }

  /**
   * Runs `attempt` (a call that needs the locked row) while the row is
   * locked; expects it to end with `reason` within `limitMs`; then checks
   * nothing was written, even after the lock is gone, and that the call
   * succeeds once it is.
   */
  const whileLocked = async (
    store: SqlConnectorStore,
    prefix: string,
    id: string,
    attempt: () => Promise<unknown>,
    expected: { readonly reason: string; readonly method: string; readonly limitMs: number; readonly says?: RegExp }
  ) => {
    const before = await storedRows(url, prefix)
    const lock = await lockRow(url, prefix, id)
    let released = false
    try {
      const { error, elapsed } = await ended(attempt())
      expect(error).toBeInstanceOf(PersistenceError)
      expect(error).toMatchObject({ reason: expected.reason, method: expected.method })
      expect(elapsed).toBeLessThan(expected.limitMs + SLACK_MS)
      if (expected.says !== undefined) expect((error as PersistenceError).driverMessage).toMatch(expected.says)
      await lock.release()
      released = true
      // A statement still waiting for the lock would apply now: none may.
      await sleep(200)
      expect(await storedRows(url, prefix)).toEqual(before)
    } finally {
      if (!released) await lock.release()
    }
  }

  it("lock_timeout ends the wait with reason lock-timeout, Promise API (lane) and Effect API, nothing written", async () => {
    const { store, prefix } = await open({ lockTimeoutMs: 300 })
    const leaseToken = await claimed(store, "lock-promise")
    await whileLocked(store, prefix, "lock-promise", () => store.markOperationSent(key("lock-promise"), { leaseToken }), {
      reason: "lock-timeout",
      method: "markOperationSent",
      limitMs: 300
    })
    await whileLocked(
      store,
      prefix,
      "lock-promise",
      () => store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.markOperationSent(key("lock-promise"), { leaseToken }))),
      { reason: "lock-timeout", method: "markOperationSent", limitMs: 300 }
    )
    expect((await store.markOperationSent(key("lock-promise"), { leaseToken })).outcome).toBe("sent")
  })

  it("a locked transaction (finalize's SELECT … FOR UPDATE) ends with lock-timeout too, its transaction rolled back", async () => {
    const { store, prefix } = await open({ lockTimeoutMs: 300 })
    const leaseToken = await claimed(store, "lock-fin")
    expect((await store.markOperationSent(key("lock-fin"), { leaseToken })).outcome).toBe("sent")
    const finalize = { leaseToken, sourceID: "src-lock-fin", documentID: "doc-lock-fin", watchDueAt: store.now() }
    await whileLocked(store, prefix, "lock-fin", () => store.finalizeOperationAndArmWatch(key("lock-fin"), finalize), {
      reason: "lock-timeout",
      method: "finalizeOperationAndArmWatch",
      limitMs: 300
    })
    expect((await store.finalizeOperationAndArmWatch(key("lock-fin"), finalize)).outcome).toBe("committed")
  })

  it("statement_timeout (57014) shorter than the lock timeout ends the wait with reason timeout", async () => {
    const { store, prefix } = await open({ lockTimeoutMs: 5_000, statementTimeoutMs: 300 })
    const leaseToken = await claimed(store, "statement")
    await whileLocked(store, prefix, "statement", () => store.markOperationSent(key("statement"), { leaseToken }), {
      reason: "timeout",
      method: "markOperationSent",
      limitMs: 300,
      says: /statement timeout/
    })
    await whileLocked(
      store,
      prefix,
      "statement",
      () => store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.markOperationSent(key("statement"), { leaseToken }))),
      { reason: "timeout", method: "markOperationSent", limitMs: 300, says: /statement timeout/ }
    )
  })

  it("the call bound, shorter than both, ends the wait with reason timeout; the waiting statement is cancelled, so it never applies", async () => {
    const { store, prefix } = await open({ callTimeoutMs: 500 })
    const leaseToken = await claimed(store, "bound")
    await whileLocked(store, prefix, "bound", () => store.markOperationSent(key("bound"), { leaseToken }), {
      reason: "timeout",
      method: "markOperationSent",
      limitMs: 500
    })
    await whileLocked(
      store,
      prefix,
      "bound",
      () => store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.markOperationSent(key("bound"), { leaseToken }))),
      { reason: "timeout", method: "markOperationSent", limitMs: 500 }
    )
    const finalizeInput = { leaseToken, sourceID: "src-bound", documentID: "doc-bound", watchDueAt: store.now() }
    await whileLocked(store, prefix, "bound", () => store.finalizeOperationAndArmWatch(key("bound"), finalizeInput), {
      reason: "timeout",
      method: "finalizeOperationAndArmWatch",
      limitMs: 500
    })
    expect((await store.markOperationSent(key("bound"), { leaseToken })).outcome).toBe("sent")
  })
  it("when the cancel never reaches the server, the closed connection still ends the waiting statement, so it never applies", async () => {
    // The store reaches the server through a proxy that, once the call waits, lets no new connection through: its cancel is lost.
    const target = new URL(url)
    const proxy = await startCommitDropProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const viaProxy = new URL(url)
    viaProxy.port = String(proxy.port)
    const prefix = freshPrefix()
    const store = await openConnectorStore({ url: viaProxy.toString(), tablePrefix: prefix, clock: "local", callTimeoutMs: 500, readWinner: () => "winner-1" })
    try {
      const leaseToken = await claimed(store, "lost-cancel")
      /** `start`s a call, then lets no new connection through until it has ended. */
      const cancelLost = (method: string, start: () => Promise<unknown>) =>
        whileLocked(store, prefix, "lost-cancel", () => {
          const call = start()
          proxy.silenceNew()
          return call.finally(() => proxy.heal())
        }, { reason: "timeout", method, limitMs: 500 })
      await cancelLost("markOperationSent", () => store.markOperationSent(key("lost-cancel"), { leaseToken }))
      await cancelLost(
        "markOperationSent",
        () => store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.markOperationSent(key("lost-cancel"), { leaseToken })))
      )
      const finalizeInput = { leaseToken, sourceID: "src-lost-cancel", documentID: "doc-lost-cancel", watchDueAt: store.now() }
      await cancelLost("finalizeOperationAndArmWatch", () => store.finalizeOperationAndArmWatch(key("lost-cancel"), finalizeInput))
      expect((await store.markOperationSent(key("lost-cancel"), { leaseToken })).outcome).toBe("sent")
    } finally {
      proxy.heal()
      await store.close()
      await proxy.close()
    }
  })
})

/** A role allowed one connection, for the server's 53300. */
describe.runIf(pgAvailable)("the server refusing a connection for lack of slots (53300), on Postgres", () => {
  let url: string
  const role = `cs_limited_${process.pid}`

  beforeAll(async () => {
    url = await pgDatabaseForFile()
    await withClient(url, async (admin) => {
      await admin.query(`DROP ROLE IF EXISTS ${role}`)
      await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`)
    })
  })

  afterAll(async () => {
    await withClient(url, async (admin) => {
      await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined)
      await admin.query(`DROP ROLE IF EXISTS ${role}`)
    })
  })

  it("opening a store while the role's only connection is taken rejects with reason too-many-connections", async () => {
    const limited = new URL(url)
    limited.username = role
    const taken = new pg.Client({ connectionString: limited.toString() })
    await taken.connect()
    try {
      const failure = await rejectionOf(openConnectorStore({ url: limited.toString(), tablePrefix: freshPrefix(), clock: "local" }))
      expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "too-many-connections", method: "openConnectorStore" })
    } finally {
      await taken.end()
    }
  })
})

describe("the reasons of the new driver codes", () => {
  const reasonOf = (code: string, message = "driver said so") =>
    (classified(new PersistenceError({ operation: "test", cause: Object.assign(new Error(message), { code }) })) as PersistenceError).reason

  it("53300 is too-many-connections, 57014 timeout, 55P03 lock-timeout, SQLITE_CORRUPT corrupt", () => {
    expect(reasonOf("53300")).toBe("too-many-connections")
    expect(reasonOf("57014")).toBe("timeout")
    expect(reasonOf("55P03")).toBe("lock-timeout")
    expect(reasonOf("SQLITE_CORRUPT")).toBe("corrupt")
    expect(reasonOf("SQLITE_CORRUPT_INDEX")).toBe("corrupt")
  })

  it("pg's own time limits (a connection not made in time, no free client in time) are timeout", () => {
    const wrapped = new Error("Connection terminated due to connection timeout", { cause: new Error("Connection terminated unexpectedly") })
    expect((classified(new PersistenceError({ operation: "test", cause: wrapped })) as PersistenceError).reason).toBe("timeout")
    expect(classifyDriverFailure({ code: undefined, message: "timeout exceeded when trying to connect" })).toBe("timeout")
    expect(classifyDriverFailure({ code: undefined, message: "Connection terminated unexpectedly" })).toBe("unreachable")
  })
})
