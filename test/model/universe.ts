import type { ConnectorOperation, WatchIdentity } from "@connector-store/core"
import fc from "fast-check"

/**
 * The small world the model tests draw from: few enough names that random
 * commands keep hitting the same rows, clash on the same documents and
 * race the same winners.
 */
export const OWNERS = ["did:owner:a", "did:owner:b"] as const
/** Connectors of the universe; `resumeAuthDeferred` also names one no row has. */
export const CONNECTORS = ["gcal", "jira"] as const
/** Sources: two watches of one owner and connector may differ only by source. */
export const SOURCES = ["src-1", "src-2"] as const
/** The one model every watch and operation is of. */
export const MODEL = "Event"
/** The one provider account every watch and operation is under. */
export const ACCOUNT = "acct"
/** Documents the watches follow (operations use the first two, so their partitions fill). */
export const DOCUMENTS = ["doc-1", "doc-2", "doc-3", "doc-4"] as const
/** Winner digests a document converges on. */
export const DIGESTS = ["w1", "w2", "w3"] as const
/** Callers of write-back operations (the owners are separate parties). */
export const CALLERS = ["did:caller:x", "did:caller:y"] as const
/** Idempotency ids per caller. */
export const OPERATION_IDS = ["op-1", "op-2", "op-3", "op-4"] as const

/** Where the clock of every run starts. */
export const START_TIME = 100

/** Every watch identity of the universe (2 owners × 2 connectors × 2 sources). */
export const IDENTITIES: ReadonlyArray<WatchIdentity> = OWNERS.flatMap((ownerDID) =>
  CONNECTORS.flatMap((connectorName) =>
    SOURCES.map((sourceID) => ({ ownerDID, connectorName, model: MODEL, accountKey: ACCOUNT, sourceID }))
  )
)

/** A short label for a watch identity in command names and messages. */
export const labelOf = (id: WatchIdentity): string =>
  `${id.ownerDID.slice(-1)}/${id.connectorName}/${id.sourceID}`

/** Any watch identity of the universe. */
export const identityArb = fc.constantFrom(...IDENTITIES)
/** Any document of the universe. */
export const documentArb = fc.constantFrom(...DOCUMENTS)
/** Any winner digest. */
export const digestArb = fc.constantFrom(...DIGESTS)
/** A watermark: a digest, or now and then none. */
export const digestOrNullArb = fc.option(digestArb, { nil: null, freq: 4 })

/** An operation row with every field the tests do not vary set to a fixed value. */
export const operationRow = (
  fields: Pick<
    ConnectorOperation,
    | "callerDID" | "operationID" | "ownerDID" | "connectorName" | "documentID" | "state" | "attempts" | "nextAttemptAt"
    | "deferReason" | "version" | "leaseToken" | "leaseExpiresAt" | "createdAt" | "updatedAt"
  >
): ConnectorOperation => ({
  ...fields,
  nodeKey: `node:${fields.callerDID}:${fields.operationID}`,
  model: MODEL,
  op: "update",
  accountKey: ACCOUNT,
  target: "target-1",
  sourceID: fields.documentID === null ? null : "src-1",
  deterministicEventID: `event:${fields.operationID}`,
  payloadHash: "hash-1",
  reissueIntent: { kind: "conditional-update" },
  providerEtag: null,
  resultEntity: null,
  lastKind: null,
  lastHTTPStatus: null,
  sendMarker: null,
  inDoubtSince: null,
  incarnation: null
})
