import { ConnectorStore, OperationPolicy, type PromiseWinnerReaders, WinnerReader } from "@connector-store/core"
import { DirectDatabase, fromPromiseReaders, makePromiseStore } from "@connector-store/core/adapter"
import { layerPorts, layerStockSqliteClient, type SqlTransaction, Tables } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import * as Memory from "@connector-store/memory-adapter"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { identityOf, NOW, watchRow } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { freshSqlitePath } from "./support/databases.js"
import { type Seen, sqlitePortsWithDirect, watchedDirect } from "./support/direct.js"
import { clock, expectLostRaceBudget, gatedReader, id, normalized, promiseStoreOver, readers, script, seeded } from "./support/laneScript.js"

/**
 * The Promise API's direct lane on the project's SQLite client: the hot
 * methods run on the DirectDatabase without a fiber. Every test compares
 * with, or hands over to, the Effect path, which is what the lane must
 * match.
 */

const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()))
})

/**
 * A Promise store on a fresh SQLite file, built as `openConnectorStore`
 * builds one, but with the direct database watched (and its watch writes
 * made to lose `lose.watchUpdates` times). `lane: false` gives the store no
 * readers for the lane, so every call takes the Effect path.
 */
const storeOn = async (
  readers: PromiseWinnerReaders<SqlTransaction>,
  options: { lane: boolean; lose?: { watchUpdates: number }; client?: "project" | "stock" }
) => {
  const seen: Seen = { begun: 0, busy: 0 }
  const lose = options.lose ?? { watchUpdates: 0 }
  const url = freshSqlitePath()
  const ports = sqlitePortsWithDirect(url)
  // The stock client has no DirectDatabase: every call there runs on the ports.
  const stockPorts = layerPorts.pipe(Layer.provideMerge(Tables.layer(undefined)), Layer.provideMerge(layerStockSqliteClient(url)))
  const { store, runtime } = promiseStoreOver(
    options.client === "stock"
      ? stockPorts
      : Layer.provideMerge(Layer.effect(DirectDatabase, Effect.map(DirectDatabase, (db) => watchedDirect(db, seen, lose))), ports),
    readers,
    { lane: options.lane, dialect: "sqlite" },
    closing
  )
  return { store, seen, runtime }
}

afterEach(() => {
  clock.now = NOW
})

/** A Promise store in memory: with the lane (the memory adapter's DirectDatabase), or on the ports alone. */
const memoryStoreOn = (readers: PromiseWinnerReaders<Memory.MemoryTransaction>, lane: boolean) => {
  const handle = Effect.succeed<Memory.MemoryTransaction>({ adapter: "memory" })
  const db = new Memory.MemoryDatabase()
  const ports = Layer.effectContext(Effect.sync(() => {
    const all = Memory.portsOf(db) as Context.Context<Memory.MemoryPorts | DirectDatabase>
    return lane ? all : Context.omit(DirectDatabase)(all)
  }))
  const runtime = ManagedRuntime.make(
    ConnectorStore.layer.pipe(
      Layer.provideMerge(Layer.succeed(WinnerReader, fromPromiseReaders(readers, handle))),
      Layer.provideMerge(ports as Layer.Layer<Memory.MemoryPorts>),
      Layer.provideMerge(OperationPolicy.layer(undefined))
    )
  )
  const store = makePromiseStore<Memory.MemoryTransaction>({
    runtime: runtime as never,
    handle,
    now: () => clock.now,
    readers: lane ? readers : undefined
  })
  closing.push(() => store.close())
  return store
}

describe("the Promise API's direct lane in memory", () => {
  it("answers every hot call, and leaves every row, exactly as the Effect methods on the ports do", async () => {
    const laneAnswers = await script(memoryStoreOn(readers, true) as never)
    clock.now = NOW
    const portAnswers = await script(memoryStoreOn(readers, false) as never)
    expect(normalized(laneAnswers)).toEqual(normalized(portAnswers))
  })
})

describe("the Promise API's direct lane on SQLite", () => {
  it("answers every hot call, and leaves every row, exactly as the Effect methods do, on the direct rows and on the ports", async () => {
    const lane = await storeOn(readers, { lane: true })
    const laneAnswers = await script(lane.store)
    // The Effect methods on the direct rows: the lane's begin count stays its own.
    clock.now = NOW
    const effect = await storeOn(readers, { lane: false })
    const effectAnswers = await script(effect.store)
    // The Effect methods on the ports (the stock client offers no direct rows).
    clock.now = NOW
    const ports = await storeOn(readers, { lane: false, client: "stock" })
    const portAnswers = await script(ports.store)
    expect(normalized(laneAnswers)).toEqual(normalized(portAnswers))
    expect(normalized(effectAnswers)).toEqual(normalized(portAnswers))
    expect(lane.seen.begun).toBeGreaterThan(0)
  })

  it("answers the same with an asynchronous reader, and meanwhile hands a second call to the Effect path, which waits its turn", async () => {
    const { release, readers: slowReader } = gatedReader()
    const { store, seen } = await storeOn(slowReader, { lane: true })
    await store.runEffect(seedWatches(seeded))
    const arming = store.armWatch(id, "manual", { dueAt: NOW })
    const claim = store.claimOperation(claimInput())
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(seen).toEqual({ begun: 1, busy: 0 })
    release()
    expect(await arming).toBe("opened")
    expect(await claim).toMatchObject({ outcome: "claimed" })
    expect(await store.getWatch(id)).toMatchObject({ repairGeneration: seeded.repairGeneration + 1, observedWinnerDigest: "w-doc-1" })
  })

  it("calls that find the connection held by an asynchronous lane call wait on the Effect path, and all run in the order they came", async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => release = resolve)
    const reads: Array<string> = []
    const reader = {
      readWinner: async (documentID: string) => {
        reads.push(documentID)
        if (documentID === "doc-1") await gate
        return `w-${documentID}`
      }
    }
    const { store, seen } = await storeOn(reader, { lane: true })
    const rows = [1, 2, 3].map((n) =>
      watchRow({ sourceID: `src-${n}`, documentID: `doc-${n}`, verificationStatus: "pending_verification", nextAttemptAt: NOW })
    )
    await store.runEffect(seedWatches(...rows))
    const identity = (n: number) => identityOf({ sourceID: `src-${n}` })
    const first = store.armWatch(identity(1), "manual", { dueAt: NOW })
    const waiting = store.armWatch(identity(2), "manual", { dueAt: NOW })
    await new Promise((resolve) => setTimeout(resolve, 20))
    // Refused once, by the lane: it waits on the ports, and tries no direct begin again.
    expect(seen).toEqual({ begun: 1, busy: 1 })
    release()
    expect(await first).toBe("opened")
    // The waiting call may have begun by now (it was first in line); the later one must not overtake it.
    const later = store.armWatch(identity(3), "manual", { dueAt: NOW })
    expect(reads.slice(0, 2)).toEqual(["doc-1", "doc-2"].slice(0, reads.length))
    expect(await Promise.all([waiting, later])).toEqual(["opened", "opened"])
    expect(reads).toEqual(["doc-1", "doc-2", "doc-3"])
  })

  it("rejects with WinnerReadFailed naming the method when the reader throws or rejects, and writes nothing", async () => {
    for (const readWinner of [() => { throw new Error("down") }, async () => { throw new Error("down") }, () => 42 as never]) {
      const { store } = await storeOn({ readWinner }, { lane: true })
      await store.runEffect(seedWatches(seeded))
      await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({
        _tag: "WinnerReadFailed",
        method: "armWatch",
        documentID: "doc-1"
      })
      expect(await store.getWatch(id)).toEqual(seeded)
      // The connection was handed on.
      expect(await store.claimOperation(claimInput())).toMatchObject({ outcome: "claimed" })
    }
  })

  it("retries lost writes and gives up after 6 tries with ConcurrentUpdateExhausted, counted in the store's metrics", async () => {
    const lose = { watchUpdates: 0 }
    const { store, seen } = await storeOn(readers, { lane: true, lose })
    await expectLostRaceBudget(store, seen, lose)
  })

  it("rejects with a classified PersistenceError naming the method on a driver failure, rolled back", async () => {
    const { store, runtime } = await storeOn(readers, { lane: true })
    await store.runEffect(seedWatches(seeded))
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) =>
      sql.unsafe(`CREATE TRIGGER refuse BEFORE UPDATE ON kubun_connector_projection_watch BEGIN SELECT RAISE(ABORT, 'refused'); END`)))
    await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({
      _tag: "PersistenceError",
      method: "armWatch",
      operation: "watch.update",
      reason: "constraint"
    })
    await runtime.runPromise(Effect.flatMap(SqlClient, (sql) => sql.unsafe(`DROP TRIGGER refuse`)))
    expect(await store.getWatch(id)).toEqual(seeded)
    expect(await store.armWatch(id, "manual", { dueAt: NOW })).toBe("opened")
  })

  it("hands a clock reading that is not a time to the Effect path, which refuses it with InvalidClockReading", async () => {
    const { store } = await storeOn(readers, { lane: true })
    await store.runEffect(seedWatches(seeded))
    clock.now = Number.NaN
    await expect(store.armWatch(id, "manual", { dueAt: NOW })).rejects.toMatchObject({ _tag: "InvalidClockReading", method: "armWatch" })
    clock.now = NOW
    expect(await store.getWatch(id)).toEqual(seeded)
  })
})
