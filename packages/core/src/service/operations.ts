import { Clock, Effect, Exit, Option, Random } from "effect"
import {
  type ConcurrentUpdateExhausted,
  InvalidInput,
  type PersistenceError,
  type WinnerReaderMissing,
  type WinnerReadFailed
} from "../errors.js"
import { type AttemptFailure, type AttemptFailureResult, decideAttemptFailure, decideMarkSent, type MarkSentResult } from "../operation/attempt.js"
import {
  asStoredJson,
  claimChecks,
  DEFAULT_TRACKED_PAGE,
  failureChecks,
  finalizeChecks,
  keyChecks,
  runnerChecks,
  renewChecks,
  trackedChecks
} from "../operation/checks.js"
import { type ClaimOperationInput, type ClaimResult, decideOperationClaim } from "../operation/claim.js"
import { type ConnectorOperation, formatOperationKey, type OperationKey, type OperationState } from "../operation/ConnectorOperation.js"
import type { OperationDecision } from "../operation/decision.js"
import { OperationEntropy } from "../operation/entropy.js"
import {
  armedByFinalize,
  decideCommit,
  type FinalizeOperationInput,
  type FinalizeResult,
  supersededBy,
  watchIdentityOfCommit
} from "../operation/finalize.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import { decideRenew, type RenewResult } from "../operation/lease.js"
import { OperationPolicy } from "../operation/policy.js"
import {
  decodeCursor,
  type DocumentWriteState,
  encodeCursor,
  isVisibleTo,
  positionOf,
  writeStatesOf
} from "../operation/reads.js"
import { DirectDatabase, directFor } from "../ports/DirectDatabase.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { WinnerReader } from "../ports/WinnerReader.js"
import { type Check, firstProblem, Rules, validate } from "../validation.js"
import { type Digest, type Millis, watchIdentityOf, watchKey } from "../watch/ProjectionWatch.js"
import { LostRace, requireWon, retryOnLostRace } from "./cas.js"
import type { DirectContext } from "./directContext.js"
import { directOptimisticNow, directStatementNow, directTransactionNow, runAttempt, settledNow } from "./direct.js"
import { withAttemptNow } from "./instrument.js"
import { operationPrograms } from "./directPrograms.js"
import { chunksOf, DOCUMENT_CHUNK, singleWinnerReader } from "./winners.js"

/** The options of `renewOperationLease`. */
export interface RenewLeaseOptions {
  readonly leaseToken: string
  /** The new lease's length from now; the policy's `leaseMs` when absent. */
  readonly leaseMs?: number | undefined
}

/** The filter of `listTrackedOperations`. Empty `documentIDs` or `states` lists match nothing. */
export interface TrackedOperationFilter {
  /** Only operations this DID called or owns. */
  readonly visibleTo: string
  readonly documentIDs?: ReadonlyArray<string> | undefined
  readonly states?: ReadonlyArray<OperationState> | undefined
  readonly connectorName?: string | undefined
  /** Page size (default 50, at most 500). */
  readonly limit?: number | undefined
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string | undefined
}

/** One page of tracked operations; `nextCursor` is null on the last page. */
export interface TrackedOperationsPage {
  readonly operations: ReadonlyArray<ConnectorOperation>
  readonly nextCursor: string | null
}

type RunnerErrors = InvalidInput | PersistenceError | ConcurrentUpdateExhausted
type ReadErrors = InvalidInput | PersistenceError

/** The write-back operation half of the store's Effect API. */
export interface OperationMethods {
  /** Creates or converges on the operation of an idempotency key (see `decideOperationClaim`). */
  readonly claimOperation: (input: ClaimOperationInput) => Effect.Effect<ClaimResult, RunnerErrors | IdempotencyConflict>
  /** Extends the caller's lease (a heartbeat during a long provider call). */
  readonly renewOperationLease: (key: OperationKey, options: RenewLeaseOptions) => Effect.Effect<RenewResult, RunnerErrors>
  /** Counts the attempt and records the run's send marker before the request leaves. */
  readonly markOperationSent: (
    key: OperationKey,
    options: { readonly leaseToken: string }
  ) => Effect.Effect<MarkSentResult, RunnerErrors>
  /** Records a failed attempt and releases the lease (see `decideAttemptFailure`). */
  readonly recordAttemptFailure: (key: OperationKey, options: AttemptFailure) => Effect.Effect<AttemptFailureResult, RunnerErrors>
  /**
   * Commits the operation and arms its projection watch in one transaction
   * (see `FinalizeResult`); a stale lease holder changes nothing.
   */
  readonly finalizeOperationAndArmWatch: (
    key: OperationKey,
    options: FinalizeOperationInput
  ) => Effect.Effect<FinalizeResult, RunnerErrors | WinnerReaderMissing | WinnerReadFailed>
  readonly getOperation: (key: OperationKey) => Effect.Effect<Option.Option<ConnectorOperation>, ReadErrors>
  /** The operation of a node key, only for its caller or owner; anyone else sees none, as for an unknown key. */
  readonly getOperationByNodeKey: (
    nodeKey: string,
    viewerDID: string
  ) => Effect.Effect<Option.Option<ConnectorOperation>, ReadErrors>
  /** A page of the operations a DID may see, newest first, with a stable cursor. */
  readonly listTrackedOperations: (filter: TrackedOperationFilter) => Effect.Effect<TrackedOperationsPage, ReadErrors>
  /** The write state of each document (every id given is in the map; see `DocumentWriteState`). */
  readonly getDocumentWriteStates: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, DocumentWriteState>, ReadErrors>
}

/** The checks of `markOperationSent`'s arguments. */
const markSentChecks = (key: OperationKey, options: unknown): ReadonlyArray<Check> => [...keyChecks("key", key), ...runnerChecks(options)]

/** The checks of `finalizeOperationAndArmWatch`'s arguments. */
const finalizeOperationChecks = (key: OperationKey, options: FinalizeOperationInput): ReadonlyArray<Check> => [
  ...keyChecks("key", key),
  ...runnerChecks(options, finalizeChecks(options))
]

/** Runs `effect` only once every check passed: nothing about the input is touched before. */
const validated = <A, E, R>(method: string, checks: ReadonlyArray<Check>, effect: () => Effect.Effect<A, E, R>) =>
  Effect.zipRight(validate(method, checks), Effect.suspend(effect))

/** Builds the operation methods over the ports. */
export const makeOperationMethods = Effect.gen(function*() {
  const operations = yield* OperationRepository
  const watches = yield* WatchRepository
  const { withTransaction } = yield* Transactor
  const readers = yield* WinnerReader
  const policy = yield* OperationPolicy
  const entropy = yield* OperationEntropy
  const direct = directFor(yield* Effect.serviceOption(DirectDatabase), watches, operations)

  const lockOperation = (key: OperationKey) => Effect.map(operations.lockRead(key), Option.getOrUndefined)

  /**
   * Runs a read-decide-write of one operation row until it wins. The first
   * try reads the row with no lock and no transaction and writes with one
   * versioned statement, a compare-and-set of its own: two round trips on a
   * SQL server instead of four. A lost write means another writer got there
   * first, so every try after it runs the same steps in a transaction on the
   * row locked (FOR UPDATE; SQLite's write lock), where the write cannot
   * lose again. The uncontended case is cheap, and a hot row (runners
   * cycling one key) never spends the retry budget. Every try decides
   * afresh from the row it read, so no decision made on a stale row is
   * ever applied.
   */
  const optimisticThenLocked = <A, E>(
    method: string,
    key: OperationKey,
    attempt: (read: Effect.Effect<ConnectorOperation | undefined, PersistenceError>) => Effect.Effect<A, E | LostRace>
  ) =>
    Effect.suspend(() => {
      let tried = 0
      return retryOnLostRace(method, formatOperationKey(key), Effect.suspend(() =>
        tried++ === 0
          ? attempt(Effect.map(operations.get(key), Option.getOrUndefined))
          : withTransaction(attempt(lockOperation(key)))))
    })

  /** One runner write (renew, mark sent, attempt failure): it reads nothing but the operation's row. */
  const runnerWrite = <R>(
    method: string,
    key: OperationKey,
    decide: (row: ConnectorOperation | undefined, now: Millis) => Effect.Effect<OperationDecision<R>>
  ) =>
    optimisticThenLocked(method, key, (read) =>
      Effect.gen(function*() {
        const row = yield* read
        const decision = yield* decide(row, yield* Clock.currentTimeMillis)
        if (decision.next !== undefined && row !== undefined) {
          yield* requireWon(yield* operations.update(row, decision.next))
        }
        return decision.result
      }))

  const claimViaPorts = (input: ClaimOperationInput) =>
    optimisticThenLocked("claimOperation", input, (read) =>
      Effect.gen(function*() {
        // Fresh values per try: a lost try may have lost on a node key clash.
        const fresh = { nodeKey: entropy.token(), incarnation: entropy.token(), leaseToken: entropy.token() }
        const created = decideOperationClaim(undefined, input, fresh, policy, yield* Clock.currentTimeMillis)
        // Insert first, as one statement of its own on the first try (no
        // transaction): a new key needs no more, and concurrent claims of
        // one key all meet its unique index (a racing insert waits for the
        // other to commit), so exactly one of them inserts. Every other
        // claim converges on the stored row, read and written as a runner
        // write is: a claim reads nothing but that row.
        if (!created.conflict && created.next !== undefined && (yield* operations.insert(created.next))) {
          return created.result
        }
        const row = yield* read
        if (row === undefined) return yield* new LostRace()
        const decision = decideOperationClaim(row, input, fresh, policy, yield* Clock.currentTimeMillis)
        if (decision.conflict) {
          return yield* new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
        }
        if (decision.next !== undefined) yield* requireWon(yield* operations.update(row, decision.next))
        return decision.result
      }))

  const programs = operationPrograms(policy, entropy)
  // The readers are fixed for the store's life.
  const finalizeReader = yield* Effect.either(singleWinnerReader("finalizeOperationAndArmWatch", readers))
  /** A finalize's input as stored: its result entity as JSON holds it. */
  const storedFinalize = (options: FinalizeOperationInput): FinalizeOperationInput => ({
    ...options,
    resultEntity: asStoredJson(options.resultEntity)
  })
  /** A claim's input as stored: its reissue intent as JSON holds it. */
  const storedClaim = (input: ClaimOperationInput): ClaimOperationInput => ({
    ...input,
    reissueIntent: asStoredJson(input.reissueIntent) as ClaimOperationInput["reissueIntent"]
  })

  /** A claim on the direct rows: the same steps as on the ports (`claimViaPorts`), in the same order. */
  // The hot methods on the direct rows, in the caller's fiber step (see
  // withAttemptNow): undefined, for the method's effect to run, when there
  // are none or the call is anything but a plain one.

  const claimNow = (context: DirectContext, input: ClaimOperationInput) => {
    if (direct === undefined || firstProblem("claimOperation", claimChecks(input)) !== undefined) return undefined
    const stored = storedClaim(input)
    return directOptimisticNow<ClaimResult, RunnerErrors | IdempotencyConflict, never, IdempotencyConflict>(
      direct,
      "claimOperation",
      formatOperationKey(stored),
      (now) => settledNow(programs.claim(direct, stored, now, "unlocked")),
      (now) => programs.claim(direct, stored, now, "locked"),
      context,
      () => claimViaPorts(stored)
    )
  }

  // The common mark, the holder's first with attempts left, is one guarded
  // write; anything else is decided from the locked row.
  const markSentNow = (context: DirectContext, key: OperationKey, options: { readonly leaseToken: string }) => {
    if (direct === undefined || firstProblem("markOperationSent", markSentChecks(key, options)) !== undefined) return undefined
    const sent = directStatementNow(direct, (now) => programs.markSentGuarded(direct, key, options.leaseToken, now), context)
    if (sent === undefined) return undefined
    if (Exit.isFailure(sent)) return Exit.failCause(sent.cause)
    if (sent.value !== undefined) return Exit.succeed({ outcome: "sent", operation: sent.value } satisfies MarkSentResult)
    return directTransactionNow(
      direct,
      "markOperationSent",
      formatOperationKey(key),
      (now) => programs.markSentDecided(direct, key, options.leaseToken, now),
      undefined,
      context,
      () => runnerWrite("markOperationSent", key, (row, now) => Effect.succeed(decideMarkSent(row, options.leaseToken, policy, now)))
    )
  }

  const finalizeNow = (context: DirectContext, key: OperationKey, options: FinalizeOperationInput) => {
    if (direct === undefined || finalizeReader._tag === "Left") return undefined
    if (firstProblem("finalizeOperationAndArmWatch", finalizeOperationChecks(key, options)) !== undefined) return undefined
    const input = storedFinalize(options)
    const readWinner = finalizeReader.right
    return directTransactionNow(
      direct,
      "finalizeOperationAndArmWatch",
      formatOperationKey(key),
      (now) => programs.finalize(direct, key, input, now),
      readWinner,
      context,
      () => finalizeViaPorts(key, input, readWinner)
    )
  }

  const finalizeViaPorts = (key: OperationKey, input: FinalizeOperationInput, readWinner: (documentID: string) => Effect.Effect<Digest | null, WinnerReadFailed>) =>
    retryOnLostRace("finalizeOperationAndArmWatch", formatOperationKey(key), withTransaction(Effect.gen(function*() {
      const row = yield* lockOperation(key)
      const now = yield* Clock.currentTimeMillis
      const commit = decideCommit(row, input, policy, now)
      if (commit.result.outcome !== "committed") return commit.result
      if (commit.next === undefined || row === undefined) return yield* Effect.dieMessage("a commit decided without a row")
      const identity = watchIdentityOfCommit(row, input.sourceID)
      // Finalizes arming watches on one document take turns (the slot's
      // lock), so none of them loses the unique ingress index to another and
      // has to start over; the watches come back locked in one global order,
      // so two finalizes that touch the same watches cannot deadlock.
      const targets = yield* watches.lockArmTargets({ ownerDID: row.ownerDID, model: row.model, documentID: input.documentID }, identity)
      const winner = yield* readWinner(input.documentID)
      yield* requireWon(yield* operations.update(row, commit.next))
      const superseded = supersededBy(targets, identity, input.documentID)
      for (const other of superseded) yield* requireWon(yield* watches.delete(watchIdentityOf(other), other.version))
      const existing = targets.find((target) => watchKey(target) === watchKey(identity))
      const watch = armedByFinalize(existing, identity, input.documentID, winner, input.watchDueAt, now)
      yield* requireWon(yield* (existing === undefined ? watches.insert(watch) : watches.update(existing, watch)))
      return {
        outcome: "committed",
        operation: commit.result.operation,
        watch,
        superseded: superseded.map(watchIdentityOf)
      } satisfies FinalizeResult
    })))

  const markSentViaPorts = (key: OperationKey, leaseToken: string): Effect.Effect<MarkSentResult, RunnerErrors> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.flatMap(operations.markSent(key, leaseToken, policy.maxAttempts, now), Option.match({
        onSome: (operation): Effect.Effect<MarkSentResult, RunnerErrors> => Effect.succeed({ outcome: "sent", operation }),
        onNone: () => runnerWrite("markOperationSent", key, (row, now) => Effect.succeed(decideMarkSent(row, leaseToken, policy, now)))
      })))

  const methods: OperationMethods = {
    claimOperation: withAttemptNow(
      (input) =>
        validated("claimOperation", claimChecks(input), () =>
          direct === undefined
            ? claimViaPorts(storedClaim(input))
            : runAttempt((context) => claimNow(context, input), () => claimViaPorts(storedClaim(input)))),
      direct === undefined ? undefined : claimNow
    ),

    renewOperationLease: (key, options) =>
      validated("renewOperationLease", [...keyChecks("key", key), ...runnerChecks(options, renewChecks(options))], () =>
        runnerWrite("renewOperationLease", key, (row, now) =>
          Effect.succeed(decideRenew(row, options.leaseToken, options.leaseMs ?? policy.leaseMs, now)))),

    markOperationSent: withAttemptNow(
      (key, options) =>
        validated("markOperationSent", markSentChecks(key, options), () =>
          direct === undefined
            ? markSentViaPorts(key, options.leaseToken)
            : runAttempt((context) => markSentNow(context, key, options), () => markSentViaPorts(key, options.leaseToken))),
      direct === undefined ? undefined : markSentNow
    ),

    recordAttemptFailure: (key, options) =>
      validated("recordAttemptFailure", [...keyChecks("key", key), ...runnerChecks(options, failureChecks(options))], () =>
        runnerWrite("recordAttemptFailure", key, (row, now) =>
          Effect.map(Random.next, (random) => decideAttemptFailure(row, options, policy, random, now)))),

    finalizeOperationAndArmWatch: withAttemptNow(
      (key, options) =>
        Effect.gen(function*() {
          yield* validate("finalizeOperationAndArmWatch", finalizeOperationChecks(key, options))
          const readWinner = yield* singleWinnerReader("finalizeOperationAndArmWatch", readers)
          const viaPorts = () => finalizeViaPorts(key, storedFinalize(options), readWinner)
          return yield* direct === undefined ? viaPorts() : runAttempt((context) => finalizeNow(context, key, options), viaPorts)
        }),
      direct === undefined ? undefined : finalizeNow
    ),

    getOperation: (key) => validated("getOperation", keyChecks("key", key), () => operations.get(key)),

    getOperationByNodeKey: (nodeKey, viewerDID) =>
      validated("getOperationByNodeKey", [["nodeKey", nodeKey, Rules.id], ["viewerDID", viewerDID, Rules.id]], () =>
        Effect.map(operations.getByNodeKey(nodeKey), Option.filter((row) => isVisibleTo(row, viewerDID)))),

    listTrackedOperations: (filter) =>
      Effect.gen(function*() {
        yield* validate("listTrackedOperations", trackedChecks(filter))
        const after = filter.cursor === undefined ? undefined : decodeCursor(filter.cursor)
        if (filter.cursor !== undefined && after === undefined) {
          return yield* new InvalidInput({
            method: "listTrackedOperations",
            field: "filter.cursor",
            reason: "is not a cursor this store returned"
          })
        }
        const limit = filter.limit ?? DEFAULT_TRACKED_PAGE
        const rows = yield* operations.listTracked({
          visibleTo: filter.visibleTo,
          documentIDs: filter.documentIDs,
          states: filter.states,
          connectorName: filter.connectorName,
          limit: limit + 1,
          after
        })
        const page = rows.slice(0, limit)
        const last = page[page.length - 1]
        return {
          operations: page,
          nextCursor: rows.length > limit && last !== undefined ? encodeCursor(positionOf(last)) : null
        }
      }),

    getDocumentWriteStates: (documentIDs) =>
      validated("getDocumentWriteStates", [["documentIDs", documentIDs, Rules.ids]], () => {
        const unique = Array.from(new Set(documentIDs))
        return Effect.map(
          Effect.forEach(chunksOf(unique, DOCUMENT_CHUNK), operations.listByDocuments),
          (chunks) => writeStatesOf(unique, chunks.flat())
        )
      })
  }
  return methods
})
