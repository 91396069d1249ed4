import {
  clockFrom,
  ConcurrentUpdateExhausted,
  ConnectorStore,
  OperationPolicy,
  PersistenceError,
  StoreMetrics,
  WinnerReader,
  type WinnerReaders,
  WinnerReadFailed
} from "@connector-store/core"
import { DirectDatabase } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { SqliteConnection } from "@connector-store/sql-adapter"
import { SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import { Context, Deferred, Effect, Exit, Fiber, Layer, ManagedRuntime, Metric, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { seedWatches, storedWatch } from "./support/contract/store.js"
import { claimInput, KEY } from "./operations.fixtures.js"
import { freshSqlitePath } from "./support/databases.js"
import { type Seen, sqlitePortsWithDirect, watchedDirect } from "./support/direct.js"

/**
 * The direct path (DirectDatabase on the project's SQLite client): hot
 * transitions run in one synchronous step when the database is free. These
 * tests look at what only that path can get wrong: taking the Effect path
 * when a transaction is open, rolling back and handing the connection on
 * after every kind of failure, and the lost-race budget.
 */

const runtimes: Array<ManagedRuntime.ManagedRuntime<unknown, unknown>> = []
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.dispose()))
})

/** A store on a fresh SQLite file, its direct database watched, winners read by `readers`. */
const storeOn = (readers: WinnerReaders, lose = { watchUpdates: 0, operationUpdates: 0 }) => {
  const seen: Seen = { begun: 0, busy: 0 }
  const ports = sqlitePortsWithDirect(freshSqlitePath())
  const direct = Layer.effect(DirectDatabase, Effect.map(DirectDatabase, (db) => watchedDirect(db, seen, lose)))
  const runtime = ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.succeed(WinnerReader, readers)),
      Layer.provideMerge(Layer.provideMerge(direct, ports)),
      Layer.provide(OperationPolicy.layer(undefined))
    )
  )
  runtimes.push(runtime as ManagedRuntime.ManagedRuntime<unknown, unknown>)
  return { runtime, seen }
}

const id = identityOf()
const pending = watchRow({ verificationStatus: "pending_verification", nextAttemptAt: NOW - 1, claimedUntil: NOW + 30_000 })
const verification = { generation: pending.repairGeneration, claimedUntil: NOW + 30_000, fetchedDigest: "stale", maxAttempts: 5, dueAt: NOW + 60_000 }

describe("hot transitions on the project's SQLite client (the direct path)", () => {
  it("runs on the direct rows while the database is free, and on the ports, waiting its turn, while another transaction is open", async () => {
    const { runtime, seen } = storeOn({ readWinner: () => Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(pending))
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))).toBe("opened")
    expect(seen).toEqual({ begun: 1, busy: 0 })

    // Another fiber's transaction holds the connection until `release`.
    const release = await runtime.runPromise(Deferred.make<void>())
    const holding = await runtime.runPromise(Deferred.make<void>())
    const holder = runtime.runFork(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)))))
    await runtime.runPromise(Deferred.await(holding))
    const arming = runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))
    await new Promise((resolve) => setTimeout(resolve, 50))
    // Refused once, by the call's one direct try: it waits on the ports, and tries no direct begin again.
    expect(seen.busy).toBe(1)
    let settled = false
    void arming.then(() => settled = true)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(settled).toBe(false)
    await runtime.runPromise(Deferred.succeed(release, undefined))
    await runtime.runPromise(Fiber.join(holder))
    expect(await arming).toBe("opened")
    expect(await runtime.runPromise(storedWatch(id))).toMatchObject({ repairGeneration: pending.repairGeneration + 2 })
  })

  it("never runs a write of its own inside another fiber's open transaction: it waits, and outlives that transaction's rollback", async () => {
    const claimable = watchRow({ verificationStatus: "pending_verification", nextAttemptAt: 0, claimedUntil: null })
    const { runtime } = storeOn({ readWinner: () => Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(claimable))
    const release = await runtime.runPromise(Deferred.make<void>())
    const holding = await runtime.runPromise(Deferred.make<void>())
    // This transaction ends in a rollback: anything run inside it is undone.
    const holder = runtime.runFork(Effect.flatMap(SqlClient, (sql) =>
      sql.withTransaction(Effect.zipRight(
        Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)),
        Effect.fail("rolled back")
      ))))
    await runtime.runPromise(Deferred.await(holding))
    const claiming = runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimInput())))
    const watchClaim = runtime.runPromise(Effect.flatMap(ConnectorStore, (s) =>
      s.claimWatchAttempt(id, { until: Date.now() + 30_000, generation: claimable.repairGeneration, now: Date.now() })))
    await new Promise((resolve) => setTimeout(resolve, 30))
    await runtime.runPromise(Deferred.succeed(release, undefined))
    await runtime.runPromise(Effect.exit(Fiber.join(holder)))
    expect(await claiming).toMatchObject({ outcome: "claimed" })
    expect(await watchClaim).toBe(true)
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.getOperation(KEY)))).toMatchObject({ _tag: "Some" })
    expect(await runtime.runPromise(storedWatch(id))).toMatchObject({ version: claimable.version + 1 })
  })

  it("rolls back and hands the connection on when the winner read fails: typed WinnerReadFailed, nothing written", async () => {
    const boom = new WinnerReadFailed({ documentID: pending.documentID, cause: new Error("document store down") })
    let failing = true
    const { runtime, seen } = storeOn({ readWinner: () => failing ? Effect.fail(boom) : Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(pending))
    const exit = await runtime.runPromiseExit(Effect.flatMap(ConnectorStore, (s) => s.recordVerification(id, verification)))
    expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "WinnerReadFailed", method: "recordVerification" } } })
    expect(await runtime.runPromise(storedWatch(id))).toEqual(pending)
    failing = false
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.recordVerification(id, verification)))).toBe("pending")
    expect(seen).toEqual({ begun: 2, busy: 0 })
  })

  it("rolls back and hands the connection on when interrupted during an asynchronous winner read", async () => {
    const { runtime } = storeOn({ readWinner: () => Effect.never })
    await runtime.runPromise(seedWatches(pending))
    const reading = runtime.runFork(Effect.flatMap(ConnectorStore, (s) => s.recordVerification(id, verification)))
    await new Promise((resolve) => setTimeout(resolve, 20))
    const exit = await runtime.runPromise(Fiber.interrupt(reading))
    expect(Exit.isInterrupted(exit)).toBe(true)
    // The connection is free again (a write outside any transaction runs), and nothing was written.
    expect(await runtime.runPromise(storedWatch(id))).toEqual(pending)
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) =>
      s.deferWatch(id, { nextAttemptAt: NOW + 1, generation: pending.repairGeneration, claimedUntil: NOW + 30_000 })))).toBe(true)
  })

  it("puts the fiber's context back after a winner read joined to the transaction: read, failed or not, no transaction connection is left", async () => {
    let failing = false
    const { runtime, seen } = storeOn({
      readWinner: () => Effect.flatMap(Effect.sleep(1), () => failing ? Effect.fail(new WinnerReadFailed({ documentID: pending.documentID, cause: "down" })) : Effect.succeed("w-1"))
    })
    await runtime.runPromise(seedWatches(pending))
    const left = await runtime.runPromise(Effect.gen(function*() {
      const store = yield* ConnectorStore
      // The winner read suspends, so the transition goes on after it, joined to the transaction.
      const verified = yield* store.recordVerification(id, verification)
      const afterRead = yield* Effect.serviceOption(TransactionConnection)
      failing = true
      const failed = yield* Effect.exit(store.armWatch(id, "manual", { dueAt: NOW }))
      const afterFailure = yield* Effect.serviceOption(TransactionConnection)
      return { verified, failed: Exit.isFailure(failed), left: [afterRead._tag, afterFailure._tag] }
    }))
    expect(left).toEqual({ verified: "pending", failed: true, left: ["None", "None"] })
    expect(seen.begun).toBe(2)
  })

  it("calls the winner reader once per read, whether its effect answers at once or suspends", async () => {
    const calls: Array<string> = []
    let suspend = false
    const { runtime, seen } = storeOn({
      readWinner: (documentID) => {
        calls.push(documentID)
        return suspend ? Effect.promise(async () => "w-1") : Effect.succeed("w-1")
      }
    })
    await runtime.runPromise(seedWatches(pending))
    const verify = Effect.flatMap(ConnectorStore, (s) => s.recordVerification(id, verification))
    expect(await runtime.runPromise(verify)).toBe("pending")
    expect(calls).toEqual([pending.documentID])
    suspend = true
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))).toBe("opened")
    expect(calls).toEqual([pending.documentID, pending.documentID])
    expect(seen.begun).toBe(2)
  })

  it("turns a driver failure inside the transaction into a classified PersistenceError, rolled back, the connection handed on", async () => {
    const { runtime } = storeOn({ readWinner: () => Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(pending))
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      sql.unsafe(`CREATE TRIGGER refuse BEFORE UPDATE ON kubun_connector_projection_watch BEGIN SELECT RAISE(ABORT, 'refused'); END`)))
    const exit = await runtime.runPromiseExit(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))
    if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
    expect(exit.cause.error).toBeInstanceOf(PersistenceError)
    expect(exit.cause.error).toMatchObject({ operation: "watch.update", method: "armWatch", reason: "constraint" })
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql.unsafe(`DROP TRIGGER refuse`)))
    expect(await runtime.runPromise(storedWatch(id))).toEqual(pending)
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))).toBe("opened")
  })

  it("retries a lost write whole, and fails with ConcurrentUpdateExhausted after 6 tries, nothing written", async () => {
    const lose = { watchUpdates: 5, operationUpdates: 0 }
    const { runtime, seen } = storeOn({ readWinner: () => Effect.succeed("w-1") }, lose)
    await runtime.runPromise(seedWatches(pending))
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))).toBe("opened")
    expect(seen.begun).toBe(6)
    lose.watchUpdates = 6
    const exit = await runtime.runPromiseExit(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))
    if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
    expect(exit.cause.error).toBeInstanceOf(ConcurrentUpdateExhausted)
    expect(exit.cause.error).toMatchObject({ method: "armWatch", attempts: 6 })
    expect(seen.begun).toBe(12)
    expect(await runtime.runPromise(storedWatch(id))).toMatchObject({ repairGeneration: pending.repairGeneration + 1 })
  })

  it("runs a claim's first try with no transaction, and after it loses, the next under the lock", async () => {
    const lose = { watchUpdates: 0, operationUpdates: 0 }
    const { runtime, seen } = storeOn({}, lose)
    const first = await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimInput())))
    expect(first).toMatchObject({ outcome: "claimed" })
    expect(seen.begun).toBe(0)
    // The lease lapses; a takeover's unlocked write loses once, then the locked try wins.
    lose.operationUpdates = 1
    const later = claimInput()
    const takeover = await runtime.runPromise(
      Effect.withClock(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(later)), clockFrom(() => Date.now() + 10 * 60_000))
    )
    expect(takeover).toMatchObject({ outcome: "claimed" })
    expect(seen.begun).toBe(1)
    const row = await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.getOperation(KEY)))
    expect(row).toMatchObject({ _tag: "Some", value: { state: "attempted" } })
  })

  it("counts a call its synchronous attempt answered in the store's metrics, with its outcome", async () => {
    const { runtime } = storeOn({ readWinner: () => Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(pending))
    const opened = Metric.tagged(Metric.tagged(StoreMetrics.calls, "method", "armWatch"), "outcome", "opened")
    const count = () => runtime.runPromise(Effect.map(Metric.value(opened), (state) => state.count))
    const before = await count()
    expect(await runtime.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(id, "manual", { dueAt: NOW })))).toBe("opened")
    expect(await count()).toBe(before + 1)
  })

  it("fails a hot call with StoreClosed once the store's layer has closed, touching nothing", async () => {
    const { runtime } = storeOn({ readWinner: () => Effect.succeed("w-1") })
    await runtime.runPromise(seedWatches(pending))
    const scope = await runtime.runPromise(Scope.make())
    const context = await runtime.runPromise(Layer.buildWithScope(Layer.fresh(ConnectorStore.layer), scope))
    const store = Context.get(context, ConnectorStore)
    await runtime.runPromise(Scope.close(scope, Exit.void))
    const exit = await runtime.runPromiseExit(store.armWatch(id, "manual", { dueAt: NOW }))
    expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "StoreClosed", method: "armWatch" } } })
    expect(await runtime.runPromise(storedWatch(id))).toEqual(pending)
  })

  it("never begins ahead of a fiber already waiting: right after a release, while the woken waiter has not run, the database is not free", async () => {
    const { runtime } = storeOn({})
    const observed = await runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient
      const shared = SqliteConnection.connectionOf(sql)!
      const gate = yield* Deferred.make<void>()
      const holding = yield* Deferred.make<void>()
      // The holder looks at the database in the same fiber step as its release.
      const holder = yield* Effect.fork(Effect.zipRight(
        sql.withTransaction(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(gate))),
        Effect.sync(() => {
          const connection = shared.beginNow()
          if (connection !== undefined) shared.endNow(false)
          return connection === undefined
        })
      ))
      yield* Deferred.await(holding)
      const waiter = yield* Effect.fork(sql.withTransaction(sql`SELECT 1`))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      const refused = yield* Fiber.join(holder)
      yield* Fiber.join(waiter)
      // Once the waiter has had its turn, the database is free again.
      const after = shared.beginNow()
      if (after !== undefined) shared.endNow(false)
      return { refused, freeAfter: after !== undefined }
    }))
    expect(observed).toEqual({ refused: true, freeAfter: true })
  })
})

describe("the memory database's lock, for the direct path", () => {
  it("is not free right after a release while the woken waiter has not run", async () => {
    const db = new Memory.MemoryDatabase()
    const observed = await Effect.runPromise(Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const holding = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(Effect.zipRight(
        db.withTransaction(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(gate))),
        Effect.sync(() => db.isFree())
      ))
      yield* Deferred.await(holding)
      const waiter = yield* Effect.fork(db.withTransaction(Effect.void))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      const free = yield* Fiber.join(holder)
      yield* Fiber.join(waiter)
      return { free, after: db.isFree() }
    }))
    expect(observed).toEqual({ free: false, after: true })
  })
})
