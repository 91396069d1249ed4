import { isInDoubt } from "../operation/doubt.js"
import { isDueOperation, keysetPage } from "../operation/due.js"
import type { ConnectorOperation, OperationState } from "../operation/ConnectorOperation.js"
import { isAfter, newestFirst, type TrackedPosition } from "../operation/reads.js"
import { compareCodePoints } from "../operation/retention.js"
import type { Millis, ProjectionWatch, VerificationStatus, WatchIdentity } from "../watch/ProjectionWatch.js"
import { isScheduleDue } from "../watch/transitions.js"

/** An operator's filter over every operation: each field present narrows; newest first by (createdAt, callerDID, operationID). */
export interface OperatorOperationFields {
  /** Only operations of this owner (DID). */
  readonly ownerDID?: string | undefined
  /** Only operations of this connector. */
  readonly connectorName?: string | undefined
  /** Only operations this caller (DID) submitted. */
  readonly callerDID?: string | undefined
  /** Only operations in one of these states. */
  readonly states?: ReadonlyArray<OperationState> | undefined
  /** Only operations on this local document. */
  readonly documentID?: string | undefined
  /** Only attempted operations due at this time (next attempt unset or not later). */
  readonly dueBy?: Millis | undefined
  /** Only operations in doubt (`true`) or not in doubt (`false`); see `isInDoubt`. */
  readonly inDoubt?: boolean | undefined
}

/** An operator's page request over every operation, as the repository sees it (cursor decoded). */
export interface OperatorOperationQuery extends OperatorOperationFields {
  /** The page size: at most this many rows. */
  readonly limit: number
  /** Only rows strictly older than this position. */
  readonly after?: TrackedPosition | undefined
}

/** True when `row` passes every filter of `query` (not the position or limit). */
export const matchesOperatorOperation = (row: ConnectorOperation, query: OperatorOperationQuery): boolean =>
  (query.ownerDID === undefined || row.ownerDID === query.ownerDID) &&
  (query.connectorName === undefined || row.connectorName === query.connectorName) &&
  (query.callerDID === undefined || row.callerDID === query.callerDID) &&
  (query.states === undefined || query.states.includes(row.state)) &&
  (query.documentID === undefined || row.documentID === query.documentID) &&
  (query.dueBy === undefined || isDueOperation(row, query.dueBy)) &&
  (query.inDoubt === undefined || isInDoubt(row) === query.inDoubt)

/** The reference answer to an `OperatorOperationQuery` over every row: filtered, newest first, after the position. */
export const operatorOperationPage = (
  rows: ReadonlyArray<ConnectorOperation>,
  query: OperatorOperationQuery
): ReadonlyArray<ConnectorOperation> =>
  rows
    .filter((row) => matchesOperatorOperation(row, query) && (query.after === undefined || isAfter(row, query.after)))
    .sort(newestFirst)
    .slice(0, query.limit)

/** An operator's filter over every watch. Each field present narrows. */
export interface OperatorWatchFields {
  /** Only watches of this owner (DID). */
  readonly ownerDID?: string | undefined
  /** Only watches of this connector. */
  readonly connectorName?: string | undefined
  /** Only watches in one of these verification statuses. */
  readonly statuses?: ReadonlyArray<VerificationStatus> | undefined
  /** Only watches projecting into this local document. */
  readonly documentID?: string | undefined
  /** Only watches whose scheduled attempt is due at this time (not verified, next set and not later). */
  readonly dueBy?: Millis | undefined
}

/** An operator's page request over every watch (cursor decoded), by identity in byte order. */
export interface OperatorWatchQuery extends OperatorWatchFields {
  /** The page size: at most this many rows. */
  readonly limit: number
  /** Only watches strictly after this identity. */
  readonly after?: WatchIdentity | undefined
}

const identityParts = (id: WatchIdentity) => [id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID]

/** The order of watch identities: part by part, in byte order. */
export const compareWatchIdentities = (a: WatchIdentity, b: WatchIdentity): number => {
  const left = identityParts(a)
  const right = identityParts(b)
  for (let i = 0; i < left.length; i++) {
    const order = compareCodePoints(left[i]!, right[i]!)
    if (order !== 0) return order
  }
  return 0
}

/** True when `row` passes every filter of `query` (not the position or limit). */
export const matchesOperatorWatch = (row: ProjectionWatch, query: OperatorWatchQuery): boolean =>
  (query.ownerDID === undefined || row.ownerDID === query.ownerDID) &&
  (query.connectorName === undefined || row.connectorName === query.connectorName) &&
  (query.statuses === undefined || query.statuses.includes(row.verificationStatus)) &&
  (query.documentID === undefined || row.documentID === query.documentID) &&
  (query.dueBy === undefined || isScheduleDue(row, query.dueBy))

/** The reference answer to an `OperatorWatchQuery` over every row. */
export const operatorWatchPage = (
  rows: ReadonlyArray<ProjectionWatch>,
  query: OperatorWatchQuery
): ReadonlyArray<ProjectionWatch> =>
  keysetPage(rows, (row) => matchesOperatorWatch(row, query), compareWatchIdentities, query.after, query.limit)
