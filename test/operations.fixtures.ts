import {
  type ClaimOperationInput,
  type ClaimResult,
  type ConnectorOperation,
  ConnectorStore,
  type OperationKey,
  OperationPolicy,
  type OperationPolicySettings,
  type WinnerReaders
} from "@connector-store/core"
import { Effect, Layer } from "effect"
import { expect } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { at, onFreshStore } from "./support/contract/store.js"
import type { AdapterUnderTest, StoreServices } from "./support/stores.js"

/** The key most operation tests claim. */
export const KEY: OperationKey = { callerDID: "did:caller:1", operationID: "op-1" }

/** The policy of the contract stores: short numbers that are easy to reason about. */
export const POLICY: OperationPolicySettings = {
  leaseMs: 10_000,
  maxAttempts: 3,
  backoff: { baseDelayMs: 1_000, maxDelayMs: 8_000, jitter: "equal" },
  deferMs: 60_000
}

/** A claim of `KEY`: an update of `src-1` from `doc-1`, re-sendable as a conditional update. */
export const claimInput = (overrides: Partial<ClaimOperationInput> = {}): ClaimOperationInput => ({
  ...KEY,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: "src-1",
  deterministicEventID: "event-1",
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: "doc-1",
  ...overrides
})

/** The key of a claim input. */
export const keyOf = (row: OperationKey): OperationKey => ({ callerDID: row.callerDID, operationID: row.operationID })

/**
 * Runs `body` on a fresh store of `adapter` with the clock at `now` (NOW by
 * default), winners read by `readers`, and `policy` (POLICY by default).
 */
export const onOperationStore = <A, E>(
  adapter: AdapterUnderTest,
  readers: WinnerReaders,
  body: Effect.Effect<A, E, StoreServices>,
  policy: OperationPolicySettings = POLICY
) =>
  onFreshStore(
    { ...adapter, layer: (r) => Layer.provide(adapter.layer(r), Layer.succeed(OperationPolicy, policy)) },
    readers,
    Effect.zipRight(at(NOW), body)
  )

/** Claims and insists on `claimed`; returns the claim. */
export const claimed = (input: ClaimOperationInput = claimInput()) =>
  Effect.flatMap(ConnectorStore, (store) =>
    Effect.map(store.claimOperation(input), (result) => {
      expect(result.outcome).toBe("claimed")
      return result as Extract<ClaimResult, { outcome: "claimed" }>
    }))

/** Claims `input` and marks its request sent; returns the lease token. */
export const claimedAndSent = (input: ClaimOperationInput = claimInput()) =>
  Effect.gen(function*() {
    const claim = yield* claimed(input)
    const store = yield* ConnectorStore
    const sent = yield* store.markOperationSent(keyOf(input), { leaseToken: claim.lease.token })
    expect(sent.outcome).toBe("sent")
    return claim.lease.token
  })

/** A stored operation row fixture for seeding through the port (attempted, unleased, due). */
export const attemptedRow = (overrides: Partial<ConnectorOperation> = {}): ConnectorOperation => ({
  ...KEY,
  nodeKey: "node-seeded",
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: "src-1",
  deterministicEventID: "event-1",
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: "doc-1",
  resultEntity: null,
  state: "attempted",
  attempts: 1,
  nextAttemptAt: NOW - 1_000,
  lastKind: null,
  lastHTTPStatus: null,
  deferReason: null,
  sendMarker: null,
  inDoubtSince: null,
  version: 4,
  incarnation: "inc-seeded",
  leaseToken: null,
  leaseExpiresAt: null,
  createdAt: NOW - 60_000,
  updatedAt: NOW - 30_000,
  ...overrides
})

export { NOW }
