import type { ConnectorOperation, ProjectionWatch, WatchIdentity } from "@connector-store/core"

/** The instant most contract tests treat as "now" (epoch ms). */
export const NOW = 1_700_000_000_000

/** A watch identity; each part can be overridden. */
export const identityOf = (overrides: Partial<WatchIdentity> = {}): WatchIdentity => ({
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  sourceID: "src-1",
  ...overrides
})

/**
 * A stored watch row: by default a pending watch of generation 1, due an
 * hour ago, unclaimed, with both watermarks set and version 3.
 */
export const watchRow = (overrides: Partial<ProjectionWatch> = {}): ProjectionWatch => ({
  ...identityOf(),
  documentID: "doc-1",
  verifiedStateDigest: "digest-verified",
  observedWinnerDigest: "digest-observed",
  verificationStatus: "pending_verification",
  verificationAttempts: 1,
  repairGeneration: 1,
  nextAttemptAt: NOW - 3_600_000,
  claimedUntil: null,
  deferReason: null,
  version: 3,
  createdAt: NOW - 86_400_000,
  updatedAt: NOW - 7_200_000,
  ...overrides
})

/** The identity part of a watch row. */
export const identityOfRow = (row: WatchIdentity): WatchIdentity => ({
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  accountKey: row.accountKey,
  sourceID: row.sourceID
})

let nodeKeys = 0

/**
 * A stored operation row: by default committed, unleased, linked to
 * `doc-1`, created and last updated a day before `NOW`. Every row gets its
 * own node key.
 */
export const operationRow = (overrides: Partial<ConnectorOperation> = {}): ConnectorOperation => ({
  callerDID: "did:caller:1",
  operationID: "op-1",
  nodeKey: `node-${++nodeKeys}`,
  ownerDID: "did:owner:1",
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: "src-1",
  deterministicEventID: "event-1",
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional" },
  providerEtag: null,
  documentID: "doc-1",
  resultEntity: null,
  state: "committed",
  attempts: 1,
  nextAttemptAt: null,
  lastKind: null,
  lastHTTPStatus: null,
  deferReason: null,
  sendMarker: null,
  inDoubtSince: null,
  version: 2,
  incarnation: null,
  leaseToken: null,
  leaseExpiresAt: null,
  createdAt: NOW - 86_400_000,
  updatedAt: NOW - 86_400_000,
  ...overrides
})

/** The idempotency key of an operation, as a comparable string. */
export const keyLabel = (row: { readonly callerDID: string; readonly operationID: string }): string =>
  `${row.callerDID}/${row.operationID}`
