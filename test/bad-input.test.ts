import {
  ConnectorStore,
  OperationRepository,
  type PromiseConnectorStore,
  StoreSnapshot,
  WatchRepository
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { badCallMethods, badCalls, describeArgs } from "./support/contract/badCalls.js"
import { NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedOperations, seedWatches } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** Rows every refused call must leave exactly as they are (each one some call could touch). */
const watches = [
  watchRow({ deferReason: "offline" }),
  watchRow({ sourceID: "src-auth", documentID: "doc-auth", deferReason: "auth" }),
  watchRow({ sourceID: "src-verified", documentID: "doc-verified", verificationStatus: "verified", nextAttemptAt: null })
]
const operations = [
  operationRow({ operationID: "orphan", documentID: null }),
  operationRow({ operationID: "deferred", state: "attempted", deferReason: "offline", nextAttemptAt: NOW + 5 })
]

type AnyMethods = Record<string, (...args: ReadonlyArray<unknown>) => unknown>

for (const adapter of adapters) {
  describe(`bad input to the Effect API on ${adapter.name}`, () => {
    for (const method of badCallMethods) {
      it.effect(`${method} refuses every malformed call with a typed error, reads nothing and changes nothing`, () => {
        const winners = new Winners({ "doc-1": "w", "doc-verified": "w-moved" })
        return onFreshStore(adapter, winners.single(), Effect.gen(function*() {
          yield* at(NOW)
          yield* seedWatches(...watches)
          yield* seedOperations(...operations)
          const store = (yield* ConnectorStore) as unknown as AnyMethods
          for (const call of badCalls.filter((c) => c.method === method)) {
            const refused = Effect.suspend(() => store[method]!(...call.args) as Effect.Effect<unknown, unknown>)
            const error = yield* failsChangingNothing(refused)
            expect(error, `${method}(${describeArgs(call.args)})`).toMatchObject(call.error)
          }
          expect([winners.singleReads, winners.batchReads]).toEqual([[], []])
        }))
      })
    }
  })

  const entryPoint = adapter.name === "memory" ? "openMemoryConnectorStore" : `openConnectorStore on ${adapter.name}`
  describe(`bad input to the Promise API (${entryPoint})`, () => {
    const reads: Array<string> = []
    const readWinner = (documentID: string) => {
      reads.push(documentID)
      return "w-moved"
    }
    let store: PromiseConnectorStore<unknown>
    // The Promise API types runEffect for ConnectorStore only; the runtime
    // behind it provides every port, which these test-only reads use.
    const runPorts = <A>(effect: Effect.Effect<A, unknown, WatchRepository | OperationRepository | StoreSnapshot>) =>
      store.runEffect(effect as unknown as Effect.Effect<A, unknown, ConnectorStore>)
    const snapshot = () => runPorts(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))

    beforeAll(async () => {
      store = adapter.name === "memory"
        ? openMemoryConnectorStore({ readWinner, now: () => NOW })
        : await openConnectorStore({ ...(await adapter.connection()), readWinner, now: () => NOW })
      await runPorts(Effect.zipRight(seedWatches(...watches), seedOperations(...operations)))
    })
    afterAll(() => store.close())

    for (const method of badCallMethods) {
      it(`${method} rejects every malformed call with a typed error and changes nothing`, async () => {
        const methods = store as unknown as AnyMethods
        for (const call of badCalls.filter((c) => c.method === method && c.effectOnly !== true)) {
          const before = await snapshot()
          const label = `${method}(${describeArgs(call.args)})`
          await expect(Promise.resolve().then(() => methods[method]!(...call.args)), label).rejects.toMatchObject(call.error)
          expect(await snapshot(), label).toEqual(before)
        }
        expect(reads).toEqual([])
      })
    }

    it("the store still works after the refusals", async () => {
      const watch = watches[0]!
      expect(await store.claimWatchAttempt(watch, { generation: 1, until: NOW + 10, now: NOW })).toBe(true)
      expect(await store.collectFinishedOperations({ before: NOW, limit: 10 })).toBe(1)
    })
  })
}
