import { ConnectorStore, WatchRepository, type WorkWake } from "@connector-store/core"
import { openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { proxiedDatabase } from "./faults.proxy.js"
import { claimFor, faultKey, rejectionOf, sentOperation, sleep, storedRows } from "./faults.support.js"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import { freshPrefix, pgAvailable } from "./support/databases.js"

/** The bounds of these stores: short, so a test sees them run out. */
const CALL_TIMEOUT_MS = 1_500
const CLOSE_TIMEOUT_MS = 500
/** How late past its bound a call (or close) may end: timers, a loaded machine, the margin close takes. */
const SLACK_MS = 1_500

const key = faultKey

/** What a call ended with, and when (ms after it started). */
interface Ended {
  readonly error: unknown
  readonly elapsed: number
}

const ended = (promise: Promise<unknown>): Promise<Ended> => {
  const started = performance.now()
  return promise.then(
    (value) => ({ error: new Error(`resolved: ${JSON.stringify(value)}`), elapsed: performance.now() - started }),
    (error: unknown) => ({ error, elapsed: performance.now() - started })
  )
}

/** A wait's answer, and how long it took. */
const timedWake = async (wait: Promise<WorkWake>) => {
  const started = performance.now()
  const wake = await wait
  return { wake, elapsed: performance.now() - started }
}

/**
 * A network partition that closes nothing, between the store and its
 * Postgres server (a proxy that stops forwarding, then heals): every call
 * ends within its bound, its pool slot is freed, nothing half-written
 * stays, the store answers again once the network heals, and close() ends
 * within its own bound.
 */
describe.runIf(pgAvailable)("a black-holed network under a Postgres store", () => {
  const database = proxiedDatabase()

  /** A store behind a proxy of its own, its calls bounded by `CALL_TIMEOUT_MS` unless told otherwise. */
  const open = async (overrides: { readonly callTimeoutMs?: number; readonly stallMs?: () => number } = {}) => {
    const { proxy, url } = await database.proxied()
    const prefix = freshPrefix()
    const store = await openConnectorStore({
      url,
      tablePrefix: prefix,
      maxConnections: 2,
      callTimeoutMs: overrides.callTimeoutMs ?? CALL_TIMEOUT_MS,
      connectTimeoutMs: 1_000,
      closeTimeoutMs: CLOSE_TIMEOUT_MS,
      clock: "local",
      readWinner: async () => {
        const stall = overrides.stallMs?.() ?? 0
        if (stall > 0) await sleep(stall)
        return "winner-1"
      }
    })
    database.track(store, proxy)
    return { store, proxy, prefix }
  }

  /** A claimed and sent operation `id`: the input that finalizes it. */
  const sent = async (store: SqlConnectorStore, id: string) => (await sentOperation(store, id)).finalize

  const expectTimedOut = (end: Ended, method: string): void => {
    expect(end.error, `${method} after ${Math.round(end.elapsed)} ms`).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method })
    expect(end.elapsed).toBeLessThan(CALL_TIMEOUT_MS + SLACK_MS)
  }

  it("calls in flight reject with timeout within callTimeoutMs, Promise API (lane and ports) and Effect API alike", async () => {
    const { store, proxy } = await open()
    const finalize = await sent(store, "hole-a")
    proxy.blackHole()
    const calls = await Promise.all([
      ended(store.finalizeOperationAndArmWatch(key("hole-a"), finalize)),
      ended(store.getOperation(key("hole-a"))),
      ended(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimFor("hole-b"))))),
      ended(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.getOperation(key("hole-a")))))
    ])
    expectTimedOut(calls[0]!, "finalizeOperationAndArmWatch")
    expectTimedOut(calls[1]!, "getOperation")
    expectTimedOut(calls[2]!, "claimOperation")
    expectTimedOut(calls[3]!, "getOperation")
  })

  it("with as many calls stuck as the pool has connections, new calls succeed once the network heals, without a reopen", async () => {
    let stallMs = 0
    const { store, proxy, prefix } = await open({ stallMs: () => stallMs })
    const first = await sent(store, "stuck-1")
    const second = await sent(store, "stuck-2")
    const before = await storedRows(database.direct(), prefix)
    // Two calls hold both connections (each in its transaction, its reader pausing) when the network goes;
    // a third waits for a connection: all end within the bound.
    stallMs = 300
    const holding = [
      ended(store.finalizeOperationAndArmWatch(key("stuck-1"), first)),
      ended(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key("stuck-2"), second))))
    ]
    await sleep(100)
    proxy.blackHole()
    stallMs = 0
    const stuck = await Promise.all([...holding, ended(store.claimOperation(claimFor("stuck-3")))])
    expectTimedOut(stuck[0]!, "finalizeOperationAndArmWatch")
    expectTimedOut(stuck[1]!, "finalizeOperationAndArmWatch")
    expectTimedOut(stuck[2]!, "claimOperation")

    proxy.heal()
    // Nothing of the stuck calls was written.
    expect(await storedRows(database.direct(), prefix)).toEqual(before)

    const again = await Promise.all([
      store.finalizeOperationAndArmWatch(key("stuck-1"), first),
      store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key("stuck-2"), second))),
      store.claimOperation(claimFor("stuck-3")),
      store.getOperation(key("stuck-1"))
    ])
    expect(again[0].outcome).toBe("committed")
    expect(again[1].outcome).toBe("committed")
    expect(again[2].outcome).toBe("claimed")
    expect((await storedRows(database.direct(), prefix)).operations.map((row) => [row.operation_id, row.state])).toEqual([
      ["stuck-1", "committed"],
      ["stuck-2", "committed"],
      ["stuck-3", "attempted"]
    ])
  })

  it("idle connections that went dark with the network are dropped when a call runs out, so the next calls after healing do not take them", async () => {
    let stallMs = 0
    const { store, proxy } = await open({ stallMs: () => stallMs })
    const one = await sent(store, "idle-1")
    const two = await sent(store, "idle-2")
    // Both connections made (two transactions at once), then idle in the pool.
    stallMs = 100
    await Promise.all([store.finalizeOperationAndArmWatch(key("idle-1"), one), store.finalizeOperationAndArmWatch(key("idle-2"), two)])
    stallMs = 0
    expect(proxy.accepted()).toBeGreaterThanOrEqual(2)

    proxy.blackHole()
    expectTimedOut(await ended(store.getOperation(key("idle-1"))), "getOperation")
    proxy.heal()
    const started = performance.now()
    const after = await Promise.all([store.getOperation(key("idle-1")), store.getOperation(key("idle-2"))])
    expect(after.map((row) => row?.state)).toEqual(["committed", "committed"])
    expect(performance.now() - started).toBeLessThan(CALL_TIMEOUT_MS)
  })

  it("a call whose network dies inside its transaction (before COMMIT) times out and commits nothing", async () => {
    let stallMs = 0
    const { store, proxy, prefix } = await open({ stallMs: () => stallMs })
    const finalize = await sent(store, "mid")
    const before = await storedRows(database.direct(), prefix)
    stallMs = 300
    const call = ended(store.finalizeOperationAndArmWatch(key("mid"), finalize))
    // The reader is waiting inside the open transaction when the network goes.
    await sleep(100)
    proxy.blackHole()
    expectTimedOut(await call, "finalizeOperationAndArmWatch")
    stallMs = 0
    proxy.heal()
    expect(await storedRows(database.direct(), prefix)).toEqual(before)
    expect((await store.finalizeOperationAndArmWatch(key("mid"), finalize)).outcome).toBe("committed")
  })

  it("a listening connection the partition caught is dropped once it stops answering: the wait is woken, and the next listens again", async () => {
    const { store, proxy, prefix } = await open()
    const mark = (await store.awaitWork({ since: 0, timeoutMs: 5_000 })).mark
    const waiting = timedWake(store.awaitWork({ since: mark, timeoutMs: 30_000 }))
    await sleep(100)
    // The listener's connection stays silent for good; new connections go through again.
    proxy.blackHole()
    proxy.heal()
    const woken = await waiting
    expect(woken.wake.woken).toBe("notified")
    // Found within two of its checks (2 s apart), not at the wait's timeout.
    expect(woken.elapsed).toBeLessThan(4_000 + SLACK_MS)

    // The next wait listens again (its reconnection is a notice); then another store's commit wakes the one after.
    await sleep(1_100)
    const again = await store.awaitWork({ since: woken.wake.mark, timeoutMs: 10_000 })
    expect(again.woken).toBe("notified")
    const next = timedWake(store.awaitWork({ since: again.mark, timeoutMs: 20_000 }))
    await sleep(100)
    const other = await openConnectorStore({ url: database.direct(), tablePrefix: prefix, readWinner: () => null })
    try {
      await other.runEffect(Effect.flatMap(WatchRepository, (watches) =>
        watches.insert(watchRow({ ...identityOf({ sourceID: "due-after-partition" }), nextAttemptAt: Date.now() - 1, claimedUntil: null }))))
      const heard = await next
      expect(heard.wake.woken).toBe("notified")
      expect(heard.elapsed).toBeLessThan(5_000)
    } finally {
      await other.close()
    }
  })

  it("a transaction the partition left open on the server (its close never heard) ends there soon after the call bound, freeing its locks", async () => {
    let stallMs = 0
    const { store, proxy, prefix } = await open({ callTimeoutMs: 1_000, stallMs: () => stallMs })
    const finalize = await sent(store, "severed")
    // Inside its transaction (the operation row and its document locked), waiting on the winner, when the network goes.
    stallMs = 10_000
    const caught = ended(store.finalizeOperationAndArmWatch(key("severed"), finalize))
    await sleep(200)
    proxy.sever()
    expect((await caught).error).toMatchObject({ _tag: "PersistenceError", reason: "timeout" })

    // Another worker, on a network that works, finalizes the same operation: it waits for the locks, and gets them.
    const other = await openConnectorStore({ url: database.direct(), tablePrefix: prefix, lockTimeoutMs: 8_000, readWinner: () => "winner-1" })
    try {
      const started = performance.now()
      expect((await other.finalizeOperationAndArmWatch(key("severed"), finalize)).outcome).toBe("committed")
      expect(performance.now() - started).toBeLessThan(5_000)
    } finally {
      await other.close()
    }
  })

  it("close() resolves within closeTimeoutMs while calls are stuck, and those calls reject typed", async () => {
    const { store, proxy } = await open({ callTimeoutMs: 20_000 })
    const finalize = await sent(store, "closing")
    proxy.blackHole()
    const calls = [
      ended(store.finalizeOperationAndArmWatch(key("closing"), finalize)),
      ended(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.getOperation(key("closing"))))),
      ended(store.getOperation(key("closing")))
    ]
    await sleep(100)
    const started = performance.now()
    await store.close()
    const took = performance.now() - started
    expect(took).toBeGreaterThanOrEqual(CLOSE_TIMEOUT_MS - 20)
    expect(took).toBeLessThan(CLOSE_TIMEOUT_MS + SLACK_MS)
    for (const end of await Promise.all(calls)) {
      const tag = (end.error as { readonly _tag?: unknown })._tag
      expect(tag === "StoreClosed" || (end.error as { readonly reason?: unknown }).reason === "timeout", String(end.error)).toBe(true)
      expect(end.elapsed).toBeLessThan(100 + CLOSE_TIMEOUT_MS + SLACK_MS)
    }
    expect(await rejectionOf(store.getOperation(key("closing")))).toMatchObject({ _tag: "StoreClosed", method: "getOperation" })
  })
})
