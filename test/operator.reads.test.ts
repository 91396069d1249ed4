import { ConnectorStore, type ConnectorOperation, type OperatorPage } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { attemptedRow, NOW, onOperationStore } from "./operations.fixtures.js"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import { failsChangingNothing, seedOperations, seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

const op = (operationID: string, createdAt: number, patch: Partial<ConnectorOperation> = {}) =>
  attemptedRow({ operationID, nodeKey: `node-${operationID}`, createdAt, ...patch })

/** A varied table: every state, two owners, two connectors, callers, documents, due or not, in doubt or not. */
const table = [
  op("a", NOW - 9_000, { state: "committed", nextAttemptAt: null }),
  op("b", NOW - 8_000, { state: "dead", nextAttemptAt: null, ownerDID: "did:owner:2" }),
  op("c", NOW - 7_000, { state: "reconcile_only", sendMarker: "run-c", nextAttemptAt: null }),
  op("d", NOW - 6_000, { nextAttemptAt: NOW + 60_000, connectorName: "jira", documentID: "doc-2", inDoubtSince: NOW - 10_000 }),
  op("e", NOW - 5_000, { nextAttemptAt: NOW - 1, sendMarker: "run-e", leaseToken: "lease-e", leaseExpiresAt: NOW + 5_000 }),
  op("f", NOW - 5_000, { callerDID: "did:caller:2", nextAttemptAt: null }),
  op("g", NOW - 1_000, { state: "dead", sendMarker: "run-g", nextAttemptAt: null, documentID: null })
]

const ids = (page: OperatorPage<ConnectorOperation>) => page.items.map((row) => row.operationID)

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) => onOperationStore(adapter, {}, body)

  describe(`operator reads on ${adapter.name}`, () => {
    it.effect("listOperations: every operation newest first, each filter narrowing on its own", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(...table)
        const store = yield* ConnectorStore
        // Ties on createdAt go by callerDID then operationID, descending: f (did:caller:2) before e.
        expect(ids(yield* store.listOperations())).toEqual(["g", "f", "e", "d", "c", "b", "a"])
        expect(ids(yield* store.listOperations({ ownerDID: "did:owner:2" }))).toEqual(["b"])
        expect(ids(yield* store.listOperations({ connectorName: "jira" }))).toEqual(["d"])
        expect(ids(yield* store.listOperations({ callerDID: "did:caller:2" }))).toEqual(["f"])
        expect(ids(yield* store.listOperations({ states: ["dead", "reconcile_only"] }))).toEqual(["g", "c", "b"])
        expect(ids(yield* store.listOperations({ states: [] }))).toEqual([])
        expect(ids(yield* store.listOperations({ documentID: "doc-2" }))).toEqual(["d"])
        expect(ids(yield* store.listOperations({ dueBy: NOW }))).toEqual(["f", "e"])
        expect(ids(yield* store.listOperations({ inDoubt: true }))).toEqual(["g", "e", "d", "c"])
        expect(ids(yield* store.listOperations({ inDoubt: false }))).toEqual(["f", "b", "a"])
        expect(ids(yield* store.listOperations({ states: ["dead"], inDoubt: false }))).toEqual(["b"])
      })))

    it.effect("listOperations pages with a cursor: no row twice, none lost, null cursor on the last page", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(...table)
        const store = yield* ConnectorStore
        const seen: Array<string> = []
        let cursor: string | undefined
        let pages = 0
        do {
          const page = yield* store.listOperations({ limit: 3, ...(cursor === undefined ? {} : { cursor }) })
          seen.push(...ids(page))
          cursor = page.nextCursor ?? undefined
          pages++
        } while (cursor !== undefined && pages < 10)
        expect(seen).toEqual(["g", "f", "e", "d", "c", "b", "a"])
        expect(pages).toBe(3)
      })))

    it.effect("listWatches: by identity, filtered by owner, connector, status, document and due, paged", () =>
      onStore(Effect.gen(function*() {
        yield* seedWatches(
          watchRow({ sourceID: "s1", documentID: "d1", verificationStatus: "verified", nextAttemptAt: null }),
          watchRow({ sourceID: "s2", documentID: "d2", verificationStatus: "repair_failed", nextAttemptAt: null }),
          watchRow({ sourceID: "s3", documentID: "d3", nextAttemptAt: NOW + 1_000 }),
          watchRow({ sourceID: "s4", documentID: "d4", nextAttemptAt: NOW - 1_000, connectorName: "jira" }),
          watchRow({ sourceID: "s0", documentID: "d0", ownerDID: "did:owner:0" })
        )
        const store = yield* ConnectorStore
        const sources = (page: { items: ReadonlyArray<{ sourceID: string }> }) => page.items.map((w) => w.sourceID)
        expect(sources(yield* store.listWatches())).toEqual(["s0", "s1", "s2", "s3", "s4"])
        expect(sources(yield* store.listWatches({ statuses: ["repair_failed"] }))).toEqual(["s2"])
        expect(sources(yield* store.listWatches({ ownerDID: "did:owner:0" }))).toEqual(["s0"])
        expect(sources(yield* store.listWatches({ connectorName: "jira" }))).toEqual(["s4"])
        expect(sources(yield* store.listWatches({ documentID: "d3" }))).toEqual(["s3"])
        expect(sources(yield* store.listWatches({ dueBy: NOW }))).toEqual(["s0", "s4"])
        const first = yield* store.listWatches({ limit: 2 })
        expect(sources(first)).toEqual(["s0", "s1"])
        const second = yield* store.listWatches({ limit: 2, cursor: first.nextCursor! })
        expect(sources(second)).toEqual(["s2", "s3"])
        const last = yield* store.listWatches({ limit: 2, cursor: second.nextCursor! })
        expect([sources(last), last.nextCursor]).toEqual([["s4"], null])
      })))

    it.effect("getStoreStatus: counts by state and status, live leases, in doubt, and the oldest due items", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(...table)
        yield* seedWatches(
          watchRow({ sourceID: "s1", documentID: "d1", verificationStatus: "repair_failed", nextAttemptAt: null }),
          watchRow({ sourceID: "s2", documentID: "d2", nextAttemptAt: NOW - 500 }),
          watchRow({ sourceID: "s3", documentID: "d3", nextAttemptAt: NOW - 200 })
        )
        const store = yield* ConnectorStore
        yield* store.startRelistRun({ ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" })
        const status = yield* store.getStoreStatus()
        expect(status).toEqual({
          at: NOW,
          operations: { attempted: 3, committed: 1, dead: 2, reconcile_only: 1 },
          watches: { pending_verification: 2, verified: 0, repair_failed: 1 },
          relistRuns: { started: 1, listing: 0, complete: 0, abandoned: 0, superseded: 0 },
          leasesHeld: 1,
          inDoubt: 4,
          givenUpCandidates: 0,
          syncStates: { total: 0, leasesHeld: 0, staleLeases: 0 },
          pendingAuthorizations: { live: 0, expired: 0 },
          // f has no next attempt: due since its creation (NOW - 5000), before e (NOW - 1).
          oldestDueOperation: { callerDID: "did:caller:2", operationID: "f", dueAt: NOW - 5_000 },
          oldestDueWatch: { identity: identityOf({ sourceID: "s2" }), dueAt: NOW - 500 },
          durability: expect.objectContaining({ failover: null })
        })
        yield* TestClock.adjust(Duration.seconds(10))
        expect((yield* store.getStoreStatus()).leasesHeld).toBe(0)
      })))

    it.effect("an empty store has zero counts and no oldest due item", () =>
      onStore(Effect.gen(function*() {
        const status = yield* Effect.flatMap(ConnectorStore, (s) => s.getStoreStatus())
        expect(status.operations).toEqual({ attempted: 0, committed: 0, dead: 0, reconcile_only: 0 })
        expect([status.oldestDueOperation, status.oldestDueWatch, status.inDoubt]).toEqual([null, null, 0])
      })))

    it.effect("listRelistRuns: newest first, filtered by state; findOperationByNodeKey sees any operation", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(...table)
        const store = yield* ConnectorStore
        const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
        const first = yield* store.startRelistRun(scope)
        yield* TestClock.adjust(Duration.seconds(1))
        const second = yield* store.startRelistRun(scope)
        expect((yield* store.listRelistRuns()).items.map((r) => r.runID)).toEqual([second.runID, first.runID])
        expect((yield* store.listRelistRuns({ states: ["superseded"] })).items.map((r) => r.runID)).toEqual([first.runID])
        const page = yield* store.listRelistRuns({ limit: 1 })
        expect((yield* store.listRelistRuns({ limit: 1, cursor: page.nextCursor! })).items.map((r) => r.runID))
          .toEqual([first.runID])
        const found = yield* store.findOperationByNodeKey("node-b")
        expect(found._tag === "Some" && found.value.operationID).toBe("b")
        expect((yield* store.findOperationByNodeKey("node-zz"))._tag).toBe("None")
      })))

    it.effect("bad filters are InvalidInput naming the field, before anything is read", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const cases = [
          [store.listOperations({ states: ["gone" as never] }), "filter.states"],
          [store.listOperations({ limit: 0 }), "filter.limit"],
          [store.listOperations({ limit: 501 }), "filter.limit"],
          [store.listOperations({ cursor: "not-a-cursor" }), "filter.cursor"],
          [store.listOperations({ dueBy: Number.NaN }), "filter.dueBy"],
          [store.listOperations({ inDoubt: "yes" as never }), "filter.inDoubt"],
          [store.listOperations({ ownerDID: "" }), "filter.ownerDID"],
          [store.listWatches({ statuses: ["failed" as never] }), "filter.statuses"],
          [store.listWatches({ cursor: "eyJ4IjoxfQ" }), "filter.cursor"],
          [store.listRelistRuns({ states: ["running" as never] }), "filter.states"],
          [store.findOperationByNodeKey(""), "nodeKey"]
        ] as const
        for (const [call, field] of cases) {
          expect(yield* failsChangingNothing(call as Effect.Effect<unknown, { readonly field?: string }>))
            .toMatchObject({ _tag: "InvalidInput", field })
        }
      })))
  })
}
