import type { ConnectorOperation, OperationState } from "@connector-store/core"
import fc from "fast-check"
import { NOW, operationRow } from "./fixtures.js"

/** Mostly finished rows, so a pass often has more to collect than its limit allows. */
const state = fc.oneof(
  { arbitrary: fc.constant<OperationState>("committed"), weight: 4 },
  { arbitrary: fc.constant<OperationState>("dead"), weight: 3 },
  { arbitrary: fc.constantFrom<OperationState>("attempted", "reconcile_only"), weight: 1 }
)

/** The lease a row is under, relative to `NOW` (mostly none). */
const lease = fc.constantFrom(
  { leaseToken: null, leaseExpiresAt: null },
  { leaseToken: null, leaseExpiresAt: null },
  { leaseToken: null, leaseExpiresAt: null },
  { leaseToken: null, leaseExpiresAt: NOW + 5 },
  { leaseToken: "lease", leaseExpiresAt: NOW + 5 },
  { leaseToken: "lease", leaseExpiresAt: NOW },
  { leaseToken: "lease", leaseExpiresAt: NOW - 5 },
  { leaseToken: "lease", leaseExpiresAt: null }
)

/**
 * One operation row from a small universe, so partitions collide often:
 * few callers (whose code-point and dictionary orders differ), owners,
 * documents, creation times and update times around `NOW`, so ties in
 * every ordering column are common.
 */
const row = fc.record({
  callerDID: fc.constantFrom("did:a", "did:B", "did:é", "did:aa"),
  operationID: fc.constantFrom("op-x", "op-Y", "op-z", "op-é"),
  ownerDID: fc.constantFrom("did:owner:1", "did:owner:1", "did:owner:2"),
  documentID: fc.constantFrom(null, "doc-1", "doc-1", "doc-2"),
  state,
  // Biased to ties: equal creation times make the (caller, operation id) tie-break decide the newest row.
  createdAt: fc.oneof({ arbitrary: fc.constant(2), weight: 2 }, { arbitrary: fc.integer({ min: 1, max: 3 }), weight: 1 }),
  updatedAt: fc.integer({ min: NOW - 2, max: NOW + 1 }),
  lease
}).map(({ lease, ...fields }): ConnectorOperation => operationRow({ ...fields, ...lease }))

/** A table of operations (unique keys) and the parameters of one retention pass over it. */
export const retentionCase = fc.record({
  rows: fc.uniqueArray(row, { minLength: 1, maxLength: 20, selector: (op) => `${op.callerDID}\u0000${op.operationID}` }),
  before: fc.constantFrom(NOW - 2, NOW, NOW + 2),
  limit: fc.integer({ min: 1, max: 3 })
})
