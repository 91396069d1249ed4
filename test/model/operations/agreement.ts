import { type ConnectorOperation, ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"
import { expect } from "vitest"
import type { ModelStore } from "./ModelStore.js"
import { DOCUMENTS, KEYS, keyLabel, MODEL_POLICY, type OperationModel, PARTY } from "./OperationModel.js"

/** Every operation the store holds (all share one owner, so one tracked page sees them all). */
export const storedOperations = (real: ModelStore): Promise<ReadonlyArray<ConnectorOperation>> =>
  real.value(Effect.flatMap(ConnectorStore, (store) =>
    Effect.map(store.listTrackedOperations({ visibleTo: PARTY.ownerDID, limit: 500 }), (page) => page.operations)))

const keyIndex = (row: { readonly callerDID: string; readonly operationID: string }): number =>
  KEYS.findIndex((key) => key.callerDID === row.callerDID && key.operationID === row.operationID)

/**
 * Compares every row of the store with the model, then checks the
 * invariants the issue names, on the store's own rows: one row per key, at
 * most one live lease (and only the newest runner's), no committed operation
 * that could be driven again, attempts within the limit, and a watch for
 * every committed operation's document.
 */
export const expectAgreement = async (model: OperationModel, real: ModelStore): Promise<void> => {
  const rows = await storedOperations(real)
  const labels = rows.map((row) => `${row.callerDID}/${row.operationID}`)
  expect(new Set(labels).size, "one row per key").toBe(labels.length)
  expect(labels.slice().sort()).toEqual(Array.from(model.operations.keys()).map(keyLabel).sort())

  for (const row of rows) {
    const index = keyIndex(row)
    const op = model.operations.get(index)!
    expect({
      state: row.state,
      attempts: row.attempts,
      lease: row.leaseToken === null ? null : { token: row.leaseToken, expiresAt: row.leaseExpiresAt },
      sendMarker: row.sendMarker,
      inDoubtSince: row.inDoubtSince,
      nextAttemptAt: row.nextAttemptAt,
      deferReason: row.deferReason,
      documentID: row.documentID,
      sourceID: row.sourceID,
      payloadHash: row.payloadHash,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      version: row.version
    }, keyLabel(index)).toEqual({
      state: op.state,
      attempts: op.attempts,
      lease: op.lease,
      sendMarker: op.sendMarker,
      inDoubtSince: op.inDoubtSince,
      nextAttemptAt: op.nextAttemptAt,
      deferReason: op.deferReason,
      documentID: op.documentID,
      sourceID: op.sourceID,
      payloadHash: op.payloadHash,
      createdAt: op.createdAt,
      updatedAt: op.updatedAt,
      version: op.version
    })

    expect(row.attempts).toBeLessThanOrEqual(MODEL_POLICY.maxAttempts)
    if (row.leaseToken !== null) {
      expect(row.state, "only an attempted operation is leased").toBe("attempted")
      const runners = model.runners.get(index)!
      expect(row.leaseToken, "the lease is the newest runner's").toBe(runners[runners.length - 1])
    }
    if (row.state === "committed") {
      expect(row.leaseToken === null && row.nextAttemptAt === null, "a committed operation cannot be driven again").toBe(true)
    }
  }

  const watches = await real.value(Effect.flatMap(ConnectorStore, (store) => store.listWatchesByDocuments(DOCUMENTS)))
  const bySource = new Map(watches.map((w) => [w.sourceID, w]))
  expect(bySource.size).toBe(watches.length)
  expect(Array.from(bySource.keys()).sort()).toEqual(Array.from(model.watches.keys()).sort())
  for (const [source, expected] of model.watches) {
    const watch = bySource.get(source)!
    expect(watch).toMatchObject({
      ...PARTY,
      sourceID: source,
      documentID: expected.documentID,
      repairGeneration: expected.generation,
      verificationStatus: "pending_verification",
      observedWinnerDigest: "w",
      nextAttemptAt: expected.nextAttemptAt,
      version: expected.version
    })
  }
  const documents = watches.map((w) => w.documentID)
  expect(new Set(documents).size, "one watch per document").toBe(documents.length)
  for (const row of rows) {
    if (row.state === "committed") expect(documents, "a committed operation's document is watched").toContain(row.documentID)
  }
}
