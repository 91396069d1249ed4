import {
  ConnectorStore,
  type PromiseConnectorStore,
  type RelistScope,
  StoreSnapshot,
  WatchRepository
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

/** The documented number of failed applies that gives a candidate up, stated on its own (not read from the code). */
const SWEEP_APPLY_ATTEMPTS = 5

const adapters = await adaptersUnderTest()

const scope: RelistScope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
const watches = ["gone", "stuck", "moved"].map((sourceID) =>
  watchRow({ ...scope, sourceID, documentID: `doc-${sourceID}`, verifiedStateDigest: "d1", updatedAt: NOW - 1_000 })
)

/**
 * A store with something in every relist table for a refused call to
 * disturb: a complete run with open, decided and given-up candidates, and a
 * run still listing in another scope. Returns the complete run's id.
 */
const seedSweep = Effect.gen(function*() {
  yield* seedWatches(...watches)
  const store = yield* ConnectorStore
  const run = yield* store.startRelistRun(scope)
  yield* store.commitSweepCheckpoint(run.runID, {
    page: 1,
    cursor: null,
    receipts: [{ sourceID: "moved", digest: "d2" }],
    complete: true
  })
  yield* store.recordSweepOutcome({ runID: run.runID, sourceID: "gone" }, "delete_local")
  yield* store.recordSweepOutcome({ runID: run.runID, sourceID: "stuck" }, "delete_local")
  for (let i = 0; i < SWEEP_APPLY_ATTEMPTS; i++) {
    yield* store.recordSweepApplyFailure({ runID: run.runID, sourceID: "stuck" }, { kind: "network", message: "down" })
  }
  const listing = yield* store.startRelistRun({ ...scope, accountKey: "acct-2" })
  yield* store.commitSweepCheckpoint(listing.runID, { page: 1, cursor: "c1", receipts: [{ sourceID: "x", digest: null }] })
  return run.runID
})

interface BadCall {
  readonly method: string
  readonly args: ReadonlyArray<unknown>
  readonly field: string
}

const notObjects: ReadonlyArray<unknown> = [undefined, null, 5, "x", []]
const badIDs: ReadonlyArray<unknown> = ["", undefined, null, 5]
const badCounts: ReadonlyArray<unknown> = [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "5", undefined]

/** Every malformed call of the relist API, each wrong in exactly one field. */
const badCalls = (runID: string): ReadonlyArray<BadCall> => {
  const ref = { runID, sourceID: "gone" }
  const identity = { ...scope, sourceID: "stuck" }
  const page = { limit: 10 }
  const checkpoint = { page: 1, cursor: null, receipts: [] }
  const badScopes: ReadonlyArray<readonly [unknown, string]> = [
    ...notObjects.map((value) => [value, "scope"] as const),
    [{ ...scope, ownerDID: "" }, "scope.ownerDID"],
    [{ ...scope, connectorName: 5 }, "scope.connectorName"],
    [{ ...scope, model: undefined }, "scope.model"],
    [{ ...scope, accountKey: null }, "scope.accountKey"]
  ]
  const badRefs: ReadonlyArray<readonly [unknown, string]> = [
    ...notObjects.map((value) => [value, "ref"] as const),
    ...badIDs.map((value) => [{ ...ref, runID: value }, "ref.runID"] as const),
    ...badIDs.map((value) => [{ ...ref, sourceID: value }, "ref.sourceID"] as const)
  ]
  const badIdentities: ReadonlyArray<readonly [unknown, string]> = [
    ...notObjects.map((value) => [value, "identity"] as const),
    [{ ...identity, ownerDID: "" }, "identity.ownerDID"],
    [{ ...identity, accountKey: 7 }, "identity.accountKey"],
    [{ ...identity, sourceID: undefined }, "identity.sourceID"]
  ]
  const badPages = (prefix: string): ReadonlyArray<readonly [unknown, string]> => [
    ...notObjects.map((value) => [value, prefix] as const),
    ...badCounts.map((limit) => [{ limit }, `${prefix}.limit`] as const),
    [{ limit: 10, after: "" }, `${prefix}.after`],
    [{ limit: 10, after: 5 }, `${prefix}.after`]
  ]
  const badReceipts: ReadonlyArray<unknown> = [
    undefined,
    null,
    "a",
    { length: 1 },
    [null],
    [{}],
    [{ sourceID: "", digest: null }],
    [{ sourceID: "a" }],
    [{ sourceID: "a", digest: 5 }],
    [{ sourceID: "a", digest: "d" }, { sourceID: 5, digest: "d" }]
  ]
  return [
    ...badScopes.flatMap(([value, field]): ReadonlyArray<BadCall> => [
      { method: "startRelistRun", args: [value], field },
      { method: "getSweepCheckpoint", args: [value], field },
      { method: "listGivenUpSweepCandidates", args: [value, page], field }
    ]),
    ...badIDs.flatMap((value): ReadonlyArray<BadCall> => [
      { method: "getRelistRun", args: [value], field: "runID" },
      { method: "recordRelistReceipt", args: [value, []], field: "runID" },
      { method: "commitSweepCheckpoint", args: [value, checkpoint], field: "runID" },
      { method: "abandonRelistRun", args: [value], field: "runID" },
      { method: "listSweepReceipts", args: [value, page], field: "runID" },
      { method: "listSweepCandidates", args: [value, page], field: "runID" }
    ]),
    ...badReceipts.map((value): BadCall => ({ method: "recordRelistReceipt", args: [runID, value], field: "receipts" })),
    ...notObjects.map((value): BadCall => ({ method: "commitSweepCheckpoint", args: [runID, value], field: "checkpoint" })),
    ...[0, -1, 1.5, Number.NaN, "1", undefined].map((value): BadCall => ({
      method: "commitSweepCheckpoint",
      args: [runID, { ...checkpoint, page: value }],
      field: "checkpoint.page"
    })),
    ...[undefined, 5, {}].map((value): BadCall => ({
      method: "commitSweepCheckpoint",
      args: [runID, { ...checkpoint, cursor: value }],
      field: "checkpoint.cursor"
    })),
    { method: "commitSweepCheckpoint", args: [runID, { ...checkpoint, complete: "yes" }], field: "checkpoint.complete" },
    ...badReceipts.map((value): BadCall => ({
      method: "commitSweepCheckpoint",
      args: [runID, { ...checkpoint, receipts: value }],
      field: "checkpoint.receipts"
    })),
    ...badPages("page").map(([value, field]): BadCall => ({ method: "listSweepReceipts", args: [runID, value], field })),
    ...badPages("page").map(([value, field]): BadCall => ({ method: "listGivenUpSweepCandidates", args: [scope, value], field })),
    ...badPages("options").map(([value, field]): BadCall => ({ method: "listSweepCandidates", args: [runID, value], field })),
    { method: "listSweepCandidates", args: [runID, { ...page, kind: "gone" }], field: "options.kind" },
    ...[-0.1, 1.5, Number.NaN, "0.5", null].map((value): BadCall => ({
      method: "listSweepCandidates",
      args: [runID, { ...page, maxDeletionFraction: value }],
      field: "options.maxDeletionFraction"
    })),
    {
      method: "listSweepCandidates",
      args: [runID, { ...page, acceptDeletionsBeyondLimit: "yes" }],
      field: "options.acceptDeletionsBeyondLimit"
    },
    ...badRefs.flatMap(([value, field]): ReadonlyArray<BadCall> => [
      { method: "recordSweepOutcome", args: [value, "keep"], field },
      { method: "markSweepCandidateApplied", args: [value], field },
      { method: "recordSweepApplyFailure", args: [value, { kind: "k", message: "m" }], field }
    ]),
    ...["delete", "", undefined, null].map((value): BadCall => ({ method: "recordSweepOutcome", args: [ref, value], field: "outcome" })),
    ...notObjects.map((value): BadCall => ({ method: "recordSweepApplyFailure", args: [ref, value], field: "failure" })),
    ...[{ kind: "", message: "m" }, { message: "m" }].map((value): BadCall => ({
      method: "recordSweepApplyFailure",
      args: [ref, value],
      field: "failure.kind"
    })),
    ...[{ kind: "k" }, { kind: "k", message: 5 }].map((value): BadCall => ({
      method: "recordSweepApplyFailure",
      args: [ref, value],
      field: "failure.message"
    })),
    ...badIdentities.flatMap(([value, field]): ReadonlyArray<BadCall> => [
      { method: "rearmSweepCandidate", args: [value], field },
      { method: "getSweepCandidate", args: [value], field }
    ]),
    ...notObjects.map((value): BadCall => ({ method: "collectRelistRuns", args: [value], field: "params" })),
    ...[Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, "1", undefined, null].map((before): BadCall => ({
      method: "collectRelistRuns",
      args: [{ before, limit: 10 }],
      field: "params.before"
    })),
    ...badCounts.map((limit): BadCall => ({ method: "collectRelistRuns", args: [{ before: NOW + 1e9, limit }], field: "params.limit" }))
  ]
}

const methods = Array.from(new Set(badCalls("run").map((call) => call.method)))
const label = (call: BadCall) =>
  `${call.method}(${call.args.map((arg) => arg === undefined ? "undefined" : Number.isNaN(arg) ? "NaN" : JSON.stringify(arg)).join(", ")})`

type AnyMethods = Record<string, (...args: ReadonlyArray<unknown>) => unknown>

for (const adapter of adapters) {
  describe(`bad input to the relist Effect API on ${adapter.name}`, () => {
    for (const method of methods) {
      it.effect(`${method} refuses every malformed call with InvalidInput naming the field, and changes nothing`, () =>
        onFreshStore(adapter, {}, Effect.gen(function*() {
          yield* at(NOW)
          const runID = yield* seedSweep
          const store = (yield* ConnectorStore) as unknown as AnyMethods
          const calls = badCalls(runID).filter((call) => call.method === method)
          expect(calls.length).toBeGreaterThan(0)
          for (const call of calls) {
            const refused = Effect.suspend(() => store[method]!(...call.args) as Effect.Effect<unknown, unknown>)
            expect(yield* failsChangingNothing(refused), label(call)).toMatchObject({ _tag: "InvalidInput", method, field: call.field })
          }
        })))
    }
  })

  const entryPoint = adapter.name === "memory" ? "openMemoryConnectorStore" : `openConnectorStore on ${adapter.name}`
  describe(`bad input to the relist Promise API (${entryPoint})`, () => {
    let store: PromiseConnectorStore<unknown>
    let runID: string
    const runPorts = <A>(effect: Effect.Effect<A, unknown, ConnectorStore | WatchRepository | StoreSnapshot>) =>
      store.runEffect(effect as unknown as Effect.Effect<A, unknown, ConnectorStore>)
    const snapshot = () => runPorts(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))

    beforeAll(async () => {
      store = adapter.name === "memory"
        ? openMemoryConnectorStore({ now: () => NOW })
        : await openConnectorStore({ ...(await adapter.connection()), now: () => NOW })
      runID = await runPorts(seedSweep)
    })
    afterAll(() => store.close())

    it("every malformed call rejects with InvalidInput naming the field, and changes nothing", async () => {
      const methodsOf = store as unknown as AnyMethods
      const before = await snapshot()
      for (const call of badCalls(runID)) {
        await expect(Promise.resolve().then(() => methodsOf[call.method]!(...call.args)), label(call))
          .rejects.toMatchObject({ _tag: "InvalidInput", method: call.method, field: call.field })
      }
      expect(await snapshot()).toEqual(before)
      expect((await store.listSweepCandidates(runID, { limit: 10, maxDeletionFraction: 1 })).map((c) => c.sourceID)).toEqual(["gone", "moved"])
    })
  })
}
