import { ConnectorStore, PersistenceError } from "@connector-store/core"
import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimFor, rejectionOf, sleep } from "./faults.support.js"
import { freshSqlitePath } from "./support/databases.js"

/**
 * The longest the event loop may stall while a call waits for the lock: a
 * loaded machine's timers and collections (up to about 170 ms seen in CI),
 * well under each wait below (1 s and more), which a wait in the driver
 * would stall it for whole.
 */
const STALL_MS = 400

/**
 * The longest gap between ticks of a 10 ms timer from now until `stop`:
 * a call that waited for the lock inside the driver would stall it for as
 * long as it waited.
 */
const stallMeter = () => {
  let last = performance.now()
  let worst = 0
  const tick = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last)
    last = now
  }, 10)
  return {
    stop: async () => {
      await sleep(30)
      clearInterval(tick)
      return worst
    }
  }
}

/** Another connection to `url` (as another process would hold it) holding the write lock until `release`. */
const holdWriteLock = (url: string) => {
  const other = new Database(url)
  other.exec("BEGIN IMMEDIATE")
  let held = true
  return {
    release: () => {
      if (!held) return
      held = false
      other.exec("ROLLBACK")
      other.close()
    }
  }
}

const key = (id: string) => ({ callerDID: "did:caller:faults", operationID: id })

/** The operation "sent", claimed and marked sent on `store`: a finalize of it, ready to run (a transaction). */
const sentOperation = async (store: SqlConnectorStore) => {
  const claim = await store.claimOperation(claimFor("sent"))
  if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
  await store.markOperationSent(key("sent"), { leaseToken: claim.lease.token })
  const input = { leaseToken: claim.lease.token, sourceID: "src-sent", documentID: "doc-sent", watchDueAt: store.now() }
  return { finalize: () => store.finalizeOperationAndArmWatch(key("sent"), input) }
}

/**
 * While another connection holds a SQLite file's write lock, the store's
 * calls wait for it without holding the event loop: the driver's busy
 * handler would sleep the whole process for up to `busyTimeoutMs`.
 */
describe("a SQLite file whose write lock another connection holds", () => {
  const stores: Array<SqlConnectorStore> = []
  const holders: Array<{ readonly release: () => void }> = []

  afterEach(async () => {
    for (const holder of holders.splice(0)) holder.release()
    await Promise.all(stores.splice(0).map((store) => store.close()))
  })

  const open = async (bounds: { readonly busyTimeoutMs?: number; readonly callTimeoutMs?: number } = {}) => {
    const url = freshSqlitePath()
    const store = await openConnectorStore({ url, clock: "local", readWinner: () => "winner-1", ...bounds })
    stores.push(store)
    return { url, store }
  }

  const hold = (url: string) => {
    const holder = holdWriteLock(url)
    holders.push(holder)
    return holder
  }

  it("calls wait for it with the event loop free, and go on once it is released: single statements, transactions, both APIs", async () => {
    const { url, store } = await open({ busyTimeoutMs: 5_000 })
    const sent = await sentOperation(store)
    const holder = hold(url)
    const meter = stallMeter()
    setTimeout(holder.release, 1_000)
    const started = performance.now()
    const [claimed, effectClaimed, finalized, pending] = await Promise.all([
      store.claimOperation(claimFor("promise")),
      store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimFor("effect")))),
      sent.finalize(),
      store.createPendingAuth({
        state: "state-1",
        provider: "gcal",
        ownerDID: "did:owner:faults",
        codeVerifier: "v".repeat(43),
        redirectURL: "https://app.example/oauth/callback",
        scopes: ["calendar.read"],
        expiresAt: store.now() + 600_000
      })
    ])
    const elapsed = performance.now() - started
    expect(await meter.stop()).toBeLessThan(STALL_MS)
    expect(elapsed).toBeGreaterThanOrEqual(950)
    expect(claimed.outcome).toBe("claimed")
    expect(effectClaimed.outcome).toBe("claimed")
    expect(finalized.outcome).toBe("committed")
    expect(pending).toBeUndefined()
    expect(await store.getOperation(key("promise"))).toMatchObject({ state: "attempted" })
    expect(await store.consumePendingAuth("state-1")).toMatchObject({ provider: "gcal" })
  })

  it("while a transaction waits for the lock, reads of the same store are answered at once", async () => {
    const { url, store } = await open({ busyTimeoutMs: 5_000 })
    const sent = await sentOperation(store)
    const holder = hold(url)
    const finalized = sent.finalize()
    await sleep(50)
    const started = performance.now()
    const [read, effectRead] = await Promise.all([
      store.getOperation(key("sent")),
      store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.getOperation(key("sent"))))
    ])
    expect(performance.now() - started).toBeLessThan(STALL_MS)
    expect(read).toMatchObject({ state: "attempted" })
    expect(effectRead).toMatchObject({ _tag: "Some", value: { state: "attempted" } })
    holder.release()
    expect((await finalized).outcome).toBe("committed")
  })

  it("past busyTimeoutMs a call fails lock-timeout, naming its method, and writes nothing; the event loop ran meanwhile", async () => {
    const { url, store } = await open({ busyTimeoutMs: 1_000 })
    hold(url)
    const meter = stallMeter()
    const started = performance.now()
    const error = await rejectionOf(store.claimOperation(claimFor("refused")))
    const elapsed = performance.now() - started
    expect(await meter.stop()).toBeLessThan(STALL_MS)
    expect(error).toBeInstanceOf(PersistenceError)
    expect(error).toMatchObject({ reason: "lock-timeout", method: "claimOperation" })
    expect(elapsed).toBeGreaterThanOrEqual(950)
    expect(elapsed).toBeLessThan(1_000 + 1_500)
    holders.splice(0).forEach((holder) => holder.release())
    expect(await store.getOperation(key("refused"))).toBeNull()
  })

  it("the call bound ends a wait shorter than the busy timeout: timeout, nothing written, the store answers after", async () => {
    const { url, store } = await open({ busyTimeoutMs: 10_000, callTimeoutMs: 1_000 })
    const sent = await sentOperation(store)
    const before = await store.getOperation(key("sent"))
    hold(url)
    const meter = stallMeter()
    const started = performance.now()
    const [promiseError, effectError, finalizeError] = await Promise.all([
      rejectionOf(store.claimOperation(claimFor("bound"))),
      rejectionOf(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimFor("bound-effect"))))),
      // A transaction waiting to begin: given up at the bound, it hands the connection's turn on.
      rejectionOf(sent.finalize())
    ])
    const elapsed = performance.now() - started
    expect(await meter.stop()).toBeLessThan(STALL_MS)
    expect(promiseError).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method: "claimOperation" })
    expect(effectError).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method: "claimOperation" })
    expect(finalizeError).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method: "finalizeOperationAndArmWatch" })
    expect(elapsed).toBeLessThan(1_000 + 1_500)
    holders.splice(0).forEach((holder) => holder.release())
    expect(await store.getOperation(key("bound"))).toBeNull()
    expect(await store.getOperation(key("bound-effect"))).toBeNull()
    expect(await store.getOperation(key("sent"))).toEqual(before)
    expect((await store.claimOperation(claimFor("after"))).outcome).toBe("claimed")
  })
})
