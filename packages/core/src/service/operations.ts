import { Effect, Option, Random } from "effect"
import {
  type ConcurrentUpdateExhausted,
  type CorruptRow,
  type InvalidInput,
  type PersistenceError,
  type WinnerReaderMissing,
  type WinnerReadFailed
} from "../errors.js"
import type { AttemptFailure, AttemptFailureResult, MarkSentResult } from "../operation/attempt.js"
import {
  asStoredJson,
  CLAIM_SHAPE,
  claimChecks,
  ENQUEUE_SHAPE,
  enqueueChecks,
  FAILURE,
  FINALIZE,
  FINALIZE_DELETE,
  KEY_SHAPE,
  keyChecks,
  MARK_SENT,
  RENEW,
  TRACKED
} from "../operation/checks.js"
import type { ClaimOperationInput, ClaimResult } from "../operation/claim.js"
import type { EnqueueOperationInput, EnqueueResult } from "../operation/enqueue.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
import { OperationEntropy } from "../operation/entropy.js"
import type { FinalizeDeleteInput, FinalizeDeleteResult, FinalizeOperationInput, FinalizeResult } from "../operation/finalize.js"
import type { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import type { RenewResult } from "../operation/lease.js"
import { OperationPolicy } from "../operation/policy.js"
import {
  decodeCursor,
  type DocumentWriteState,
  encodeCursor,
  isVisibleTo,
  positionOf,
  type TrackedQuery,
  writeStatesOf
} from "../operation/reads.js"
import type { CorruptRowReport } from "../ports/CorruptRows.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { WinnerReader } from "../ports/WinnerReader.js"
import { firstProblem, LIST, preparing, Rules, taking, validated } from "../validation.js"
import { makeRunners } from "./hot.js"
import { cursorOf, paged } from "./paging.js"
import { operationTransitions } from "./programs.js"
import { ServerHistory } from "../ports/ServerHistory.js"
import { chunksOf, DOCUMENT_CHUNK, singleWinnerReader } from "./winners.js"
import { ProviderLimitEnforcement } from "../limits/ProviderLimit.js"
import { TOO_MANY_REQUESTS } from "../limits/claim.js"
import { makeLimitedOperations } from "./limits.js"

/** The options of `renewOperationLease`. */
export interface RenewLeaseOptions {
  readonly leaseToken: string
  /** The new lease's length from now; the policy's `leaseMs` when absent. */
  readonly leaseMs?: number | undefined
}

/** The filter of `listTrackedOperations`. Empty `documentIDs` or `states` lists match nothing. */
export interface TrackedOperationFilter extends Omit<TrackedQuery, "limit" | "after"> {
  /** Page size (default 50, at most 500). */
  readonly limit?: number | undefined
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string | undefined
}

/** One page of tracked operations; `nextCursor` is null on the last page. */
export interface TrackedOperationsPage {
  readonly operations: ReadonlyArray<ConnectorOperation>
  readonly nextCursor: string | null
  /** The rows of this page left out because they cannot be decoded (reported again with the next page if after it). */
  readonly corrupt: ReadonlyArray<CorruptRowReport>
}

/** A call that addresses one row fails with `CorruptRow` when that row cannot be decoded (nothing is written). */
type RunnerErrors = InvalidInput | PersistenceError | ConcurrentUpdateExhausted | CorruptRow
type ReadErrors = InvalidInput | PersistenceError

/** The write-back operation half of the store's Effect API. */
export interface OperationMethods {
  /**
   * Creates or converges on the operation of an idempotency key (`decideOperationClaim`); under provider limits a claim they
   * hold is `scheduled` with `limitedBy`.
   */
  readonly claimOperation: (input: ClaimOperationInput) => Effect.Effect<ClaimResult, RunnerErrors | IdempotencyConflict>
  /** Extends the caller's lease (a heartbeat during a long provider call). */
  readonly renewOperationLease: (key: OperationKey, options: RenewLeaseOptions) => Effect.Effect<RenewResult, RunnerErrors>
  /** Counts the attempt before the request leaves: a crash then leaves the operation in doubt, never re-sent blindly. */
  readonly markOperationSent: (
    key: OperationKey,
    options: { readonly leaseToken: string }
  ) => Effect.Effect<MarkSentResult, RunnerErrors>
  /** Records a failed attempt and releases the lease (`decideAttemptFailure`); under limits a 429 pauses the account. */
  readonly recordAttemptFailure: (key: OperationKey, options: AttemptFailure) => Effect.Effect<AttemptFailureResult, RunnerErrors>
  /** Commits the operation and arms its watch in one transaction (see `FinalizeResult`). */
  readonly finalizeOperationAndArmWatch: (
    key: OperationKey,
    options: FinalizeOperationInput
  ) => Effect.Effect<FinalizeResult, RunnerErrors | WinnerReaderMissing | WinnerReadFailed>
  /**
   * Commits a delete and retires its entity's watch in one transaction (see `FinalizeDeleteResult`); a key of a create or
   * update is refused with `InvalidInput`.
   */
  readonly finalizeDeleteOperation: (
    key: OperationKey,
    options: FinalizeDeleteInput
  ) => Effect.Effect<FinalizeDeleteResult, RunnerErrors>
  /** The operation of one idempotency key, if it has one. */
  readonly getOperation: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, ReadErrors | CorruptRow>
  /** The operation of a node key, only for its caller or owner; anyone else sees none, as for an unknown key. */
  readonly getOperationByNodeKey: (
    nodeKey: string,
    viewerDID: string
  ) => Effect.Effect<Option.Option<ConnectorOperation>, ReadErrors | CorruptRow>
  /** A page of the operations a DID may see, newest first, with a stable cursor. */
  readonly listTrackedOperations: (filter: TrackedOperationFilter) => Effect.Effect<TrackedOperationsPage, ReadErrors>
  /** The write state of each document (every id given is in the map; see `DocumentWriteState`). */
  readonly getDocumentWriteStates: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, DocumentWriteState>, ReadErrors>
  /**
   * Hands an edit over to the workers without driving it (`decideEnqueue`): a new key is recorded attempted and due now, with
   * no lease and no attempt spent, and the commit wakes the fleet's `awaitWork`; a known key with the same payload changes
   * nothing and answers `known`; another payload fails with `IdempotencyConflict`, as `claimOperation` does.
   */
  readonly enqueueOperation: (input: EnqueueOperationInput) => Effect.Effect<EnqueueResult, RunnerErrors | IdempotencyConflict>
}

/** A finalize's input as stored (a snapshot already: only absence is filled in). */
const storedFinalize = (options: FinalizeOperationInput): FinalizeOperationInput =>
  options.resultEntity === undefined ? { ...options, resultEntity: asStoredJson(undefined) } : options

const KEY_NAMES = ["key", "options"]
const KEY_ONLY = [KEY_SHAPE]

/** Builds the operation methods over the ports. */
export const makeOperationMethods = Effect.gen(function*() {
  const operations = yield* OperationRepository
  const readers = yield* WinnerReader
  const policy = yield* OperationPolicy
  const entropy = yield* OperationEntropy
  const { hot, onPorts } = yield* makeRunners
  const history = Option.getOrUndefined(yield* Effect.serviceOption(ServerHistory))
  const transitions = operationTransitions(policy, entropy, history)
  const limited = (yield* ProviderLimitEnforcement).enforce ? yield* makeLimitedOperations : undefined
  // The reader is fixed for the store's life.
  const finalizeReader = yield* Effect.either(singleWinnerReader("finalizeOperationAndArmWatch", readers))

  const claim = hot(preparing("claimOperation", ["input"], [CLAIM_SHAPE], (input: ClaimOperationInput) =>
    firstProblem("claimOperation", claimChecks(input)) ?? transitions.claim(input)))

  const methods: OperationMethods = {
    // Under limits the claim runs on the ports, as an Effect of its own: no hot path (see docs/provider-limits.md).
    claimOperation: limited === undefined ? claim : taking("claimOperation", ["input"], [CLAIM_SHAPE], (input: ClaimOperationInput) =>
      validated("claimOperation", claimChecks(input), () => limited.claim(input, claim))),

    renewOperationLease: hot(preparing("renewOperationLease", KEY_NAMES, [KEY_SHAPE, RENEW.shape], (key: OperationKey, options: RenewLeaseOptions) =>
      firstProblem("renewOperationLease", RENEW.checks(options, keyChecks("key", key))) ??
        transitions.renew(key, options.leaseToken, options.leaseMs ?? policy.leaseMs))),

    markOperationSent: hot(preparing("markOperationSent", KEY_NAMES, [KEY_SHAPE, MARK_SENT.shape], (key: OperationKey, options: { readonly leaseToken: string }) =>
      firstProblem("markOperationSent", MARK_SENT.checks(options, keyChecks("key", key))) ??
        transitions.markSent(key, options.leaseToken))),

    recordAttemptFailure: taking("recordAttemptFailure", KEY_NAMES, [KEY_SHAPE, FAILURE.shape], (key: OperationKey, options: AttemptFailure) =>
      validated("recordAttemptFailure", FAILURE.checks(options, keyChecks("key", key)), () =>
        Effect.flatMap(Random.next, (random) =>
          limited !== undefined && options.kind === "retryable" && options.httpStatus === TOO_MANY_REQUESTS
            ? limited.attemptFailure(key, options, random)
            : onPorts(transitions.attemptFailure(key, options, random))))),

    finalizeOperationAndArmWatch: hot(preparing("finalizeOperationAndArmWatch", KEY_NAMES, [KEY_SHAPE, FINALIZE.shape], (key: OperationKey, options: FinalizeOperationInput) =>
      firstProblem("finalizeOperationAndArmWatch", FINALIZE.checks(options, keyChecks("key", key))) ??
        (finalizeReader._tag === "Left" ? finalizeReader.left : transitions.finalize(key, storedFinalize(options)))),
      finalizeReader._tag === "Right" ? finalizeReader.right : undefined),

    finalizeDeleteOperation: hot(preparing("finalizeDeleteOperation", KEY_NAMES, [KEY_SHAPE, FINALIZE_DELETE.shape], (key: OperationKey, options: FinalizeDeleteInput) =>
      firstProblem("finalizeDeleteOperation", FINALIZE_DELETE.checks(options, keyChecks("key", key))) ??
        transitions.finalizeDelete(key, options))),

    getOperation: taking("getOperation", KEY_NAMES, KEY_ONLY, (key: OperationKey) =>
      validated("getOperation", keyChecks("key", key), () => operations.get(key))),

    getOperationByNodeKey: (nodeKey, viewerDID) =>
      validated("getOperationByNodeKey", [["nodeKey", nodeKey, Rules.id], ["viewerDID", viewerDID, Rules.id]], () =>
        Effect.map(operations.getByNodeKey(nodeKey), Option.filter((row) => isVisibleTo(row, viewerDID)))),

    listTrackedOperations: taking("listTrackedOperations", ["filter"], [TRACKED.shape], (filter: TrackedOperationFilter) =>
      validated("listTrackedOperations", TRACKED.checks(filter), () =>
        Effect.flatMap(cursorOf("listTrackedOperations", filter.cursor, decodeCursor), (after) =>
          Effect.map(
            paged(filter.limit, (limit) =>
              operations.listTracked({
                visibleTo: filter.visibleTo,
                documentIDs: filter.documentIDs,
                states: filter.states,
                connectorName: filter.connectorName,
                limit,
                after
              }), (last) => encodeCursor(positionOf(last))),
            ({ items, nextCursor, corrupt }) => ({ operations: items, nextCursor, corrupt })
          )))),

    getDocumentWriteStates: taking("getDocumentWriteStates", ["documentIDs"], [LIST], (documentIDs: ReadonlyArray<string>) =>
      validated("getDocumentWriteStates", [["documentIDs", documentIDs, Rules.ids]], () => {
        const unique = Array.from(new Set(documentIDs))
        return Effect.map(
          Effect.forEach(chunksOf(unique, DOCUMENT_CHUNK), operations.listByDocuments),
          (chunks) => writeStatesOf(unique, chunks.flat())
        )
      })),

    enqueueOperation: taking("enqueueOperation", ["input"], [ENQUEUE_SHAPE], (input: EnqueueOperationInput) =>
      validated("enqueueOperation", enqueueChecks(input), () => onPorts(transitions.enqueue(input))))
  }
  return methods
})
