import { ConnectorStore, type PromiseConnectorStore, StoreSnapshot } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { existsSync } from "node:fs"
import { Context, Effect, Exit, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput, KEY } from "./operations.fixtures.js"
import { identityOf, NOW } from "./support/contract/fixtures.js"
import { freshSqlitePath } from "./support/databases.js"
import { adaptersUnderTest } from "./support/stores.js"

const rejection = async (run: () => unknown): Promise<Record<string, unknown>> => {
  try {
    await run()
  } catch (error) {
    return error as Record<string, unknown>
  }
  throw new Error("expected a rejection")
}

const adapters = await adaptersUnderTest()

const openPromise = async (name: string, options: Record<string, unknown> = {}): Promise<PromiseConnectorStore<unknown>> => {
  if (name === "memory") return Memory.openMemoryConnectorStore(options) as PromiseConnectorStore<unknown>
  const adapter = adapters.find((a) => a.name === name)!
  return await Sql.openConnectorStore({ ...(await adapter.connection()), ...options }) as PromiseConnectorStore<unknown>
}

describe.each(adapters.map((a) => a.name))("StoreClosed on %s", (name) => {
  it("every Promise call after close() rejects with StoreClosed naming the method; closing again is harmless", async () => {
    const store = await openPromise(name, { now: () => NOW })
    await store.claimOperation(claimInput())
    await store.close()
    for (const [method, call] of [
      ["getWatch", () => store.getWatch(identityOf())],
      ["claimOperation", () => store.claimOperation(claimInput())],
      ["getOperation", () => store.getOperation(KEY)],
      ["listDueOperations", () => store.listDueOperations(NOW)],
      ["runEffect", () => store.runEffect(Effect.void)]
    ] as const) {
      const error = await rejection(call)
      expect(error).toMatchObject({ _tag: "StoreClosed", method })
      expect(String(error["message"])).toBe(`${method}: the store is closed`)
    }
    await expect(store.close()).resolves.toBeUndefined()
  })

  it("an Effect API call after the layer's scope closed fails with StoreClosed naming the method", async () => {
    const adapter = adapters.find((a) => a.name === name)!
    const service = await Effect.runPromise(Effect.scoped(Effect.map(Layer.build(adapter.layer({})), Context.get(ConnectorStore))))
    const exit = await Effect.runPromiseExit(service.getOperation(KEY))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toMatchObject({
      _tag: "StoreClosed",
      method: "getOperation"
    })
  })
})

describe("open options are refused before anything opens", () => {
  const common: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
    [{ now: "yesterday" }, "options.now"],
    [{ readWinner: 42 }, "options.readWinner"],
    [{ readWinners: {} }, "options.readWinners"],
    [{ operationPolicy: "fast" }, "options.operationPolicy"],
    [{ operationPolicy: { leaseMs: -1 } }, "options.operationPolicy.leaseMs"],
    [{ operationPolicy: { backoff: { jitter: "lots" } } }, "options.operationPolicy.backoff.jitter"],
    [{ observability: { tracer: true } }, "options.observability"]
  ]
  const sqlOnly: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
    [{ url: "" }, "options.url"],
    [{ url: 7 }, "options.url"],
    [{ tablePrefix: "Bad-Prefix" }, "options.tablePrefix"],
    [{ tablePrefix: "x".repeat(41) }, "options.tablePrefix"],
    [{ maxConnections: 0 }, "options.maxConnections"],
    [{ maxConnections: 2.5 }, "options.maxConnections"],
    [{ busyTimeoutMs: -1 }, "options.busyTimeoutMs"]
  ]

  it.each([...common, ...sqlOnly])("openConnectorStore(%j) rejects with InvalidInput naming %s, and creates no file", async (bad, field) => {
    const url = freshSqlitePath()
    const error = await rejection(() => Sql.openConnectorStore({ url, ...bad } as never))
    expect(error).toMatchObject({ _tag: "InvalidInput", method: "openConnectorStore", field })
    expect(existsSync(url)).toBe(false)
  })

  it.each(common)("openMemoryConnectorStore(%j) throws InvalidInput naming %s", async (bad, field) => {
    const error = await rejection(() => Memory.openMemoryConnectorStore(bad as never))
    expect(error).toMatchObject({ _tag: "InvalidInput", method: "openMemoryConnectorStore", field })
  })

  it("options that are not an object are refused", async () => {
    expect(await rejection(() => Sql.openConnectorStore(null as never))).toMatchObject({ _tag: "InvalidInput", field: "options" })
    expect(await rejection(() => Memory.openMemoryConnectorStore(5 as never))).toMatchObject({ _tag: "InvalidInput", field: "options" })
  })

  it("the Effect API's SQL layer fails with InvalidInput for a bad table prefix, and creates no file", async () => {
    const url = freshSqlitePath()
    const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(Sql.layer({ url, tablePrefix: "drop table;" }))))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toMatchObject({
      _tag: "InvalidInput",
      method: "layer",
      field: "options.tablePrefix"
    })
    expect(existsSync(url)).toBe(false)
  })
})

describe.each(["memory", "sqlite"])("an injected clock that returns no time, on %s", (name) => {
  it.each([Number.NaN, 1.5, -1, Number.POSITIVE_INFINITY, "soon"])(
    "a reading of %s rejects the call with InvalidClockReading naming it, and writes nothing",
    async (reading) => {
      let now: unknown = NOW
      const store = await openPromise(name, { now: () => now })
      try {
        await store.claimOperation(claimInput({ operationID: "op-before" }))
        const before = await store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))
        now = reading
        const error = await rejection(() => store.claimOperation(claimInput()))
        expect(error).toMatchObject({ _tag: "InvalidClockReading", method: "claimOperation", reading: String(reading) })
        expect(await store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))).toEqual(before)
      } finally {
        await store.close()
      }
    }
  )
})

describe("errors raised below the boundary name the public method", () => {
  it("IdempotencyConflict, WinnerReadFailed and ReservedArmReason carry the method called", async () => {
    const store = Memory.openMemoryConnectorStore({
      now: () => NOW,
      readWinner: () => {
        throw new Error("document store down")
      }
    })
    try {
      await store.claimOperation(claimInput())
      await expect(store.claimOperation(claimInput({ payloadHash: "other" })))
        .rejects.toMatchObject({ _tag: "IdempotencyConflict", method: "claimOperation" })
      const seeded = await store.runEffect(Effect.flatMap(ConnectorStore, (s) =>
        Effect.flatMap(s.claimOperation(claimInput({ operationID: "op-2" })), (claim) =>
          claim.outcome === "claimed" ? Effect.succeed(claim.lease.token) : Effect.dieMessage(claim.outcome))))
      await store.markOperationSent({ ...KEY, operationID: "op-2" }, { leaseToken: seeded })
      const failed = await rejection(() =>
        store.finalizeOperationAndArmWatch({ ...KEY, operationID: "op-2" }, {
          leaseToken: seeded,
          sourceID: "src-1",
          documentID: "doc-1",
          providerEtag: "etag-1",
          resultEntity: null,
          watchDueAt: NOW
        }))
      expect(failed).toMatchObject({ _tag: "WinnerReadFailed", method: "finalizeOperationAndArmWatch" })
      expect(String(failed["message"])).toMatch(/^finalizeOperationAndArmWatch: reading the current winner of document doc-1 failed/)
      await expect(store.armWatch(identityOf(), "finalize" as never, { dueAt: NOW }))
        .rejects.toMatchObject({ _tag: "ReservedArmReason", method: "armWatch" })
    } finally {
      await store.close()
    }
  })
})
