import { type ConnectorOperation, ConnectorStore } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { keyLabel, NOW, operationRow } from "./support/contract/fixtures.js"
import { expectedCollection } from "./support/contract/keepRule.js"
import { at, onFreshStore, seedOperations, storedOperation } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

// Retention at its edges, on every adapter, with expected results written
// out by hand (and checked against the tests' own keep rule): a lease
// expiring exactly now, equal creation times decided by the caller and then
// the operation id, and rows linked to a document.

const adapters = await adaptersUnderTest()

const finished = (overrides: Partial<ConnectorOperation>) =>
  operationRow({ state: "committed", documentID: "doc-1", updatedAt: NOW - 10, ...overrides })

const collect = (before: number, limit: number) =>
  Effect.flatMap(ConnectorStore, (store) => store.collectFinishedOperations({ before, limit }))

const surviving = (rows: ReadonlyArray<ConnectorOperation>) =>
  Effect.map(
    Effect.forEach(rows, (row) => Effect.map(storedOperation(row), (stored) => stored === undefined ? [] : [keyLabel(row)])),
    (found) => found.flat().sort()
  )

/** Seeds `rows`, collects at `NOW`, and checks both the hand-written and the keep rule's expectation. */
const collectsExactly = (rows: ReadonlyArray<ConnectorOperation>, gone: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    expect([...expectedCollection(rows, NOW, 10, NOW)].sort()).toEqual([...gone].sort())
    yield* at(NOW)
    yield* seedOperations(...rows)
    expect(yield* collect(NOW, 10)).toBe(gone.length)
    expect(yield* surviving(rows)).toEqual(rows.map(keyLabel).filter((key) => !gone.includes(key)).sort())
  })

for (const adapter of adapters) {
  describe(`retention edges on ${adapter.name}`, () => {
    it.effect("a lease expiring exactly now still holds its row; one that expired a millisecond ago does not", () =>
      onFreshStore(adapter, {}, collectsExactly([
        finished({ operationID: "live", documentID: null, leaseToken: "t", leaseExpiresAt: NOW }),
        finished({ operationID: "lapsed", documentID: null, leaseToken: "t", leaseExpiresAt: NOW - 1 }),
        finished({ operationID: "updated-now", documentID: null, updatedAt: NOW })
      ], ["did:caller:1/lapsed"])))

    it.effect("equal creation times: the caller decides which row is an owner's newest, before the operation id", () =>
      onFreshStore(adapter, {}, collectsExactly([
        // x and y tie on createdAt; by caller, x (did:b) is owner 1's newest on doc-1, so it stays.
        finished({ callerDID: "did:b", operationID: "op-1", ownerDID: "did:owner:1", createdAt: 5 }),
        finished({ callerDID: "did:a", operationID: "op-2", ownerDID: "did:owner:1", createdAt: 5 }),
        // z is did:b's newest on doc-1 (under another owner), so x is not its caller's newest.
        finished({ callerDID: "did:b", operationID: "op-3", ownerDID: "did:owner:2", createdAt: 6 })
      ], [])))

    it.effect("equal creation times: a row whose owner's newer row wins only by caller goes", () =>
      onFreshStore(adapter, {}, collectsExactly([
        // y ties x on createdAt; x's caller (did:b) sorts after y's (did:a), so x is owner 1's newest.
        finished({ callerDID: "did:b", operationID: "op-1", ownerDID: "did:owner:1", createdAt: 5 }),
        finished({ callerDID: "did:a", operationID: "op-2", ownerDID: "did:owner:1", createdAt: 5 }),
        // w is did:a's newest on doc-1, under another owner: y is newest nowhere.
        finished({ callerDID: "did:a", operationID: "op-3", ownerDID: "did:owner:2", createdAt: 6 })
      ], ["did:a/op-2"])))

    it.effect("equal creation times and callers: the operation id decides", () =>
      onFreshStore(adapter, {}, collectsExactly([
        finished({ callerDID: "did:a", operationID: "op-1", createdAt: 5 }),
        finished({ callerDID: "did:a", operationID: "op-2", createdAt: 5 })
      ], ["did:a/op-1"])))

    it.effect("a document's newest committed row stays behind a newer dead one; an unlinked row goes", () =>
      onFreshStore(adapter, {}, collectsExactly([
        finished({ operationID: "old", createdAt: 1 }),
        finished({ operationID: "committed", createdAt: 2 }),
        finished({ operationID: "dead", createdAt: 3, state: "dead" }),
        finished({ operationID: "orphan", createdAt: 4, documentID: null })
      ], ["did:caller:1/old", "did:caller:1/orphan"])))
  })
}
