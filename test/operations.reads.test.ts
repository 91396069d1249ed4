import { type ConnectorOperation, ConnectorStore } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { attemptedRow, claimed, claimInput, KEY, NOW, onOperationStore } from "./operations.fixtures.js"
import { at, failsChangingNothing, seedOperations } from "./support/contract/store.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** Operations seen by different parties, on different documents, connectors and states, some created at the same instant. */
/**
 * The contract's newest-first order, written out here: created_at
 * descending, then caller DID, then operation id, both descending by their
 * UTF-8 bytes (code points, not locale).
 */
const newestFirst = (a: ConnectorOperation, b: ConnectorOperation): number =>
  b.createdAt - a.createdAt || Buffer.compare(Buffer.from(b.callerDID), Buffer.from(a.callerDID)) ||
  Buffer.compare(Buffer.from(b.operationID), Buffer.from(a.operationID))

const population = (): ReadonlyArray<ConnectorOperation> => {
  const rows: Array<ConnectorOperation> = []
  const states = ["attempted", "committed", "dead", "reconcile_only"] as const
  for (let i = 0; i < 37; i++) {
    rows.push(attemptedRow({
      callerDID: i % 3 === 0 ? "did:caller:2" : "did:caller:1",
      operationID: `op-${String(i).padStart(2, "0")}`,
      nodeKey: `node-${i}`,
      ownerDID: i % 5 === 0 ? "did:owner:other" : "did:owner:1",
      connectorName: i % 2 === 0 ? "gcal" : "jira",
      documentID: i % 4 === 0 ? null : `doc-${i % 3}`,
      state: states[i % 4]!,
      // Several rows share a creation instant, so the tie-breakers matter.
      createdAt: NOW - 1_000 * Math.floor(i / 3)
    }))
  }
  // Callers and operation ids that sort differently by byte order than by locale.
  rows.push(attemptedRow({ callerDID: "did:Caller:Z", operationID: "Op-ä", nodeKey: "node-u1", ownerDID: "did:owner:1", createdAt: NOW }))
  rows.push(attemptedRow({ callerDID: "did:caller:1", operationID: "op-Z", nodeKey: "node-u2", createdAt: NOW }))
  return rows
}

for (const adapter of adapters) {
  const onStore = <A, E>(body: Effect.Effect<A, E, StoreServices>) => onOperationStore(adapter, {}, body)

  describe(`operation reads on ${adapter.name}`, () => {
    it.effect("getOperation reads by idempotency key; an unknown key is none", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed()
        const store = yield* ConnectorStore
        expect(yield* store.getOperation(KEY)).toEqual(Option.some(claim.operation))
        expect(yield* store.getOperation({ ...KEY, operationID: "nope" })).toEqual(Option.none())
      })))

    it.effect("getOperationByNodeKey shows the operation to its caller and its owner only; anyone else gets none, as for an unknown key", () =>
      onStore(Effect.gen(function*() {
        const claim = yield* claimed(claimInput({ ownerDID: "did:owner:1" }))
        const store = yield* ConnectorStore
        const nodeKey = claim.operation.nodeKey
        expect(yield* store.getOperationByNodeKey(nodeKey, "did:caller:1")).toEqual(Option.some(claim.operation))
        expect(yield* store.getOperationByNodeKey(nodeKey, "did:owner:1")).toEqual(Option.some(claim.operation))
        expect(yield* store.getOperationByNodeKey(nodeKey, "did:stranger")).toEqual(Option.none())
        expect(yield* store.getOperationByNodeKey("unknown-node", "did:caller:1")).toEqual(Option.none())
      })))

    it.effect("listTrackedOperations pages through everything a DID may see, newest first, each row once", () =>
      onStore(Effect.gen(function*() {
        const rows = population()
        yield* seedOperations(...rows)
        const store = yield* ConnectorStore
        for (const viewer of ["did:caller:1", "did:owner:1", "did:owner:other"]) {
          const seen: Array<ConnectorOperation> = []
          let cursor: string | undefined
          for (let page = 0; page < 50; page++) {
            const result = yield* store.listTrackedOperations({ visibleTo: viewer, limit: 4, ...(cursor === undefined ? {} : { cursor }) })
            expect(result.operations.length).toBeLessThanOrEqual(4)
            seen.push(...result.operations)
            if (result.nextCursor === null) break
            cursor = result.nextCursor
          }
          const expected = rows.filter((row) => row.callerDID === viewer || row.ownerDID === viewer).sort(newestFirst)
          expect(seen.map((row) => `${row.callerDID}/${row.operationID}`)).toEqual(expected.map((row) => `${row.callerDID}/${row.operationID}`))
        }
      })))

    it.effect("a cursor stays valid while rows are added and removed: no row is repeated or skipped", () =>
      onStore(Effect.gen(function*() {
        const rows = population().filter((row) => row.callerDID === "did:caller:1")
        yield* seedOperations(...rows)
        const store = yield* ConnectorStore
        const first = yield* store.listTrackedOperations({ visibleTo: "did:caller:1", limit: 5 })
        // A new claim (newest of all) and the retention of old finished rows happen between pages.
        yield* at(NOW + 1)
        yield* claimed(claimInput({ operationID: "op-new", payloadHash: "h" }))
        const collected = yield* store.collectFinishedOperations({ before: NOW + 1_000, limit: 100 })
        expect(collected).toBeGreaterThan(0)
        const rest: Array<ConnectorOperation> = []
        let cursor = first.nextCursor
        while (cursor !== null) {
          const page = yield* store.listTrackedOperations({ visibleTo: "did:caller:1", limit: 5, cursor })
          rest.push(...page.operations)
          cursor = page.nextCursor
        }
        const all = [...first.operations, ...rest].map((row) => row.operationID)
        expect(new Set(all).size).toBe(all.length)
        // Every row still stored and older than the first page, in order; the
        // new claim is newer than the cursor, so it belongs to no later page.
        const last = first.operations[first.operations.length - 1]!
        const now = (yield* store.listTrackedOperations({ visibleTo: "did:caller:1", limit: 500 })).operations
        expect(rest.map((row) => row.operationID))
          .toEqual(now.filter((row) => newestFirst(row, last) > 0).map((row) => row.operationID))
        expect(rest.length).toBeLessThan(rows.length - first.operations.length)
      })))

    it.effect("listTrackedOperations filters by documents, states and connector; empty lists match nothing", () =>
      onStore(Effect.gen(function*() {
        const rows = population()
        yield* seedOperations(...rows)
        const store = yield* ConnectorStore
        const visible = rows.filter((row) => row.callerDID === "did:caller:1" || row.ownerDID === "did:caller:1")
        const ids = (list: ReadonlyArray<ConnectorOperation>) => list.map((row) => row.operationID).sort()
        const page = (filter: Parameters<typeof store.listTrackedOperations>[0]) =>
          Effect.map(store.listTrackedOperations({ limit: 500, ...filter }), (result) => ids(result.operations))
        expect(yield* page({ visibleTo: "did:caller:1", documentIDs: ["doc-1", "doc-2"] }))
          .toEqual(ids(visible.filter((row) => row.documentID === "doc-1" || row.documentID === "doc-2")))
        expect(yield* page({ visibleTo: "did:caller:1", states: ["committed", "dead"] }))
          .toEqual(ids(visible.filter((row) => row.state === "committed" || row.state === "dead")))
        expect(yield* page({ visibleTo: "did:caller:1", connectorName: "jira", states: ["attempted"] }))
          .toEqual(ids(visible.filter((row) => row.connectorName === "jira" && row.state === "attempted")))
        expect(yield* page({ visibleTo: "did:caller:1", documentIDs: [] })).toEqual([])
        expect(yield* page({ visibleTo: "did:caller:1", states: [] })).toEqual([])
      })))

    it.effect("a document filter of any length works (70 000 ids)", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(...population())
        const store = yield* ConnectorStore
        const documentIDs = Array.from({ length: 70_000 }, (_, i) => `doc-${i}`)
        const result = yield* store.listTrackedOperations({ visibleTo: "did:caller:1", documentIDs, limit: 500 })
        expect(result.operations.length).toBeGreaterThan(0)
        expect(result.operations.every((row) => row.documentID !== null)).toBe(true)
      })))

    it.effect("a cursor the store did not make is InvalidInput and reads nothing", () =>
      onStore(Effect.gen(function*() {
        const store = yield* ConnectorStore
        for (const cursor of ["garbage", Buffer.from("[1,2]").toString("base64url"), Buffer.from("[1.5,\"a\",\"b\"]").toString("base64url")]) {
          expect(yield* failsChangingNothing(store.listTrackedOperations({ visibleTo: "did:caller:1", cursor })))
            .toMatchObject({ _tag: "InvalidInput", field: "filter.cursor" })
        }
      })))

    it.effect("document write states: pending while any operation is attempted, else the newest ended one decides", () =>
      onStore(Effect.gen(function*() {
        const op = (operationID: string, documentID: string, state: ConnectorOperation["state"], createdAt: number) =>
          attemptedRow({ operationID, nodeKey: `n-${operationID}`, documentID, state, createdAt, nextAttemptAt: null })
        yield* seedOperations(
          op("a1", "doc-pending", "committed", NOW - 10),
          op("a2", "doc-pending", "attempted", NOW - 20),
          op("b1", "doc-committed", "dead", NOW - 10),
          op("b2", "doc-committed", "committed", NOW - 5),
          op("c1", "doc-failed", "committed", NOW - 10),
          op("c2", "doc-failed", "dead", NOW - 5),
          op("d1", "doc-unconfirmed", "committed", NOW - 10),
          op("d2", "doc-unconfirmed", "reconcile_only", NOW - 5),
          // Same instant: the caller and operation id break the tie ("e2" > "e1").
          op("e1", "doc-tie", "committed", NOW),
          op("e2", "doc-tie", "dead", NOW)
        )
        const store = yield* ConnectorStore
        const states = yield* store.getDocumentWriteStates(["doc-pending", "doc-committed", "doc-failed", "doc-unconfirmed", "doc-tie", "doc-none", "doc-pending"])
        expect(Object.fromEntries(states)).toEqual({
          "doc-pending": "pending",
          "doc-committed": "committed",
          "doc-failed": "failed",
          "doc-unconfirmed": "unconfirmed",
          "doc-tie": "failed",
          "doc-none": "none"
        })
      })))

    it.effect("document write states for more ids than one IN list holds", () =>
      onStore(Effect.gen(function*() {
        yield* seedOperations(attemptedRow({ documentID: "doc-1234" }))
        const store = yield* ConnectorStore
        const ids = Array.from({ length: 1_500 }, (_, i) => `doc-${i}`)
        const states = yield* store.getDocumentWriteStates(ids)
        expect(states.size).toBe(1_500)
        expect(states.get("doc-1234")).toBe("pending")
        expect(states.get("doc-1")).toBe("none")
      })))
  })
}
