import { Clock, Effect, Option } from "effect"
import {
  type ConcurrentUpdateExhausted,
  type InvalidInput,
  type PersistenceError,
  ReservedArmReason,
  type WinnerReaderMissing,
  type WinnerReadFailed
} from "../errors.js"
import { resumeDeferredOperation } from "../operation/resume.js"
import { DirectDatabase, directFor } from "../ports/DirectDatabase.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { type ReadWinner, WinnerReader } from "../ports/WinnerReader.js"
import { firstProblem, identityChecks, Rules, validate } from "../validation.js"
import { armWatchChecks, claimWatchChecks, deferWatchChecks, resumeAuthChecks, verificationChecks } from "../watch/checks.js"
import {
  formatWatchIdentity,
  type Millis,
  type ProjectionWatch,
  type WatchIdentity
} from "../watch/ProjectionWatch.js"
import {
  type ArmOutcome,
  type ArmReason,
  type ClaimInput,
  decideArm,
  decideVerification,
  type Decision,
  type ArmInput,
  type DeferInput,
  resumeDeferredWatch,
  type ResumeScope,
  staleVerification,
  type VerificationInput,
  type VerificationOutcome
} from "../watch/transitions.js"
import { requireWon, retryOnLostRace } from "./cas.js"
import type { DirectContext } from "./directContext.js"
import { directStatementNow, directTransactionNow, runAttempt } from "./direct.js"
import { withAttemptNow } from "./instrument.js"
import { armDirect, verificationDirect } from "./directPrograms.js"
import { chunksOf, DOCUMENT_CHUNK, singleWinnerReader } from "./winners.js"

/** The options of `armWatch`. */
export interface ArmWatchOptions {
  readonly dueAt: Millis
  readonly triggeringWinner?: string | null | undefined
}

/** The options of `claimWatchAttempt`. */
export interface ClaimWatchOptions extends ClaimInput {
  readonly now: Millis
}

/** The options of `resumeAuthDeferred`. */
export interface ResumeAuthParams {
  readonly ownerDID: string
  readonly connectorNames: ReadonlyArray<string>
  readonly now: Millis
}

/** The projection-watch half of the store's Effect API. */
export interface WatchMethods {
  readonly getWatch: (identity: WatchIdentity) => Effect.Effect<Option.Option<ProjectionWatch>, InvalidInput | PersistenceError>
  readonly getWatchByDocument: (documentID: string) => Effect.Effect<Option.Option<ProjectionWatch>, InvalidInput | PersistenceError>
  readonly listWatchesByDocuments: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, InvalidInput | PersistenceError>
  /** Re-arms a watch for `ingress` or `manual` (see `decideArm`). */
  readonly armWatch: (
    identity: WatchIdentity,
    reason: ArmReason,
    options: ArmWatchOptions
  ) => Effect.Effect<
    ArmOutcome,
    InvalidInput | ReservedArmReason | WinnerReaderMissing | WinnerReadFailed | PersistenceError | ConcurrentUpdateExhausted
  >
  /** Takes the current attempt of a due pending watch; `true` when this caller holds it now. */
  readonly claimWatchAttempt: (
    identity: WatchIdentity,
    options: ClaimWatchOptions
  ) => Effect.Effect<boolean, InvalidInput | PersistenceError | ConcurrentUpdateExhausted>
  /** Pushes out the attempt the caller holds; `true` when it did. */
  readonly deferWatch: (
    identity: WatchIdentity,
    options: DeferInput
  ) => Effect.Effect<boolean, InvalidInput | PersistenceError | ConcurrentUpdateExhausted>
  /** Records what a verifier found (see `decideVerification`). */
  readonly recordVerification: (
    identity: WatchIdentity,
    input: VerificationInput
  ) => Effect.Effect<
    VerificationOutcome,
    InvalidInput | WinnerReaderMissing | WinnerReadFailed | PersistenceError | ConcurrentUpdateExhausted
  >
  /** Makes everything deferred for being offline due at `now`. */
  readonly resumeOfflineDeferred: (now: Millis) => Effect.Effect<void, InvalidInput | PersistenceError | ConcurrentUpdateExhausted>
  /** Makes everything of the owner's listed connectors deferred for auth due at `now`. */
  readonly resumeAuthDeferred: (
    params: ResumeAuthParams
  ) => Effect.Effect<void, InvalidInput | PersistenceError | ConcurrentUpdateExhausted>
}

/** `armWatch`'s input from its arguments (checked already). */
const armInputOf = (reason: ArmReason, options: ArmWatchOptions): ArmInput => ({
  reason: reason as "ingress" | "manual",
  dueAt: options.dueAt,
  triggeringWinner: options.triggeringWinner
})

type TransitionErrors = InvalidInput | WinnerReaderMissing | WinnerReadFailed | PersistenceError | ConcurrentUpdateExhausted
type ArmErrors = TransitionErrors | ReservedArmReason
type VerificationErrors = TransitionErrors

/** Builds the watch methods over the ports. */
export const makeWatchMethods = Effect.gen(function*() {
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor
  const readers = yield* WinnerReader
  const direct = directFor(yield* Effect.serviceOption(DirectDatabase), watches, operations)
  // The readers are fixed for the store's life: which one a method reads with is decided once.
  const armReader = yield* Effect.either(singleWinnerReader("armWatch", readers))
  const verificationReader = yield* Effect.either(singleWinnerReader("recordVerification", readers))

  /**
   * One read-decide-write on a watch, retried on a lost race. `decide` runs
   * after the row is locked and may read more (the winner) inside the same
   * transaction.
   */
  const transition = <O extends string, E>(
    method: string,
    identity: WatchIdentity,
    decide: (row: ProjectionWatch | undefined, now: Millis) => Effect.Effect<Decision<O>, E>
  ) =>
    retryOnLostRace(
      method,
      formatWatchIdentity(identity),
      withTransaction(Effect.gen(function*() {
        const row = Option.getOrUndefined(yield* watches.lockRead(identity))
        const now = yield* Clock.currentTimeMillis
        const decision = yield* decide(row, now)
        if (decision.next !== undefined && row !== undefined) {
          yield* requireWon(yield* watches.update(row, decision.next))
        }
        return decision.outcome
      }))
    )

  const armViaPorts = (identity: WatchIdentity, input: ArmInput, readWinner: ReadWinner) =>
    transition("armWatch", identity, (row, now) =>
      row === undefined
        ? Effect.succeed(decideArm(row, input, null, now))
        : Effect.map(readWinner(row.documentID), (winner) => decideArm(row, input, winner, now)))

  const verificationViaPorts = (identity: WatchIdentity, input: VerificationInput, readWinner: ReadWinner) =>
    transition("recordVerification", identity, (row, now) =>
      // A stale result is refused before the winner is read at all.
      staleVerification(row, input) !== undefined || row === undefined
        ? Effect.succeed(decideVerification(row, input, null, now))
        : Effect.map(readWinner(row.documentID), (winner) => decideVerification(row, input, winner, now)))

  // The hot methods on the direct rows, in the caller's fiber step (see
  // withAttemptNow): undefined, for the method's effect to run, when there
  // are none or the call is anything but a plain one.

  const armNow = (context: DirectContext, identity: WatchIdentity, reason: ArmReason, options: ArmWatchOptions) => {
    if (direct === undefined || armReader._tag === "Left") return undefined
    if (firstProblem("armWatch", armWatchChecks(identity, reason, options)) !== undefined) return undefined
    const input = armInputOf(reason, options)
    return directTransactionNow(
      direct,
      "armWatch",
      formatWatchIdentity(identity),
      (now) => armDirect(direct, identity, input, now),
      armReader.right,
      context,
      () => armViaPorts(identity, input, armReader.right)
    )
  }

  const claimNow = (context: DirectContext, identity: WatchIdentity, options: ClaimWatchOptions) =>
    direct === undefined || firstProblem("claimWatchAttempt", claimWatchChecks(identity, options)) !== undefined
      ? undefined
      : directStatementNow(direct, (now) => direct.watches.claimAttempt(identity, options, options.now, now), context)

  const deferNow = (context: DirectContext, identity: WatchIdentity, options: DeferInput) =>
    direct === undefined || firstProblem("deferWatch", deferWatchChecks(identity, options)) !== undefined
      ? undefined
      : directStatementNow(direct, (now) => direct.watches.deferAttempt(identity, options, now), context)

  const verificationNow = (context: DirectContext, identity: WatchIdentity, input: VerificationInput) => {
    if (direct === undefined || verificationReader._tag === "Left") return undefined
    if (firstProblem("recordVerification", verificationChecks(identity, input)) !== undefined) return undefined
    const readWinner = verificationReader.right
    return directTransactionNow(
      direct,
      "recordVerification",
      formatWatchIdentity(identity),
      (now) => verificationDirect(direct, identity, input, now),
      readWinner,
      context,
      () => verificationViaPorts(identity, input, readWinner)
    )
  }

  const resume = (method: string, scope: ResumeScope, now: Millis) =>
    retryOnLostRace(
      method,
      scope.reason === "offline" ? "offline-deferred" : `auth-deferred ${scope.ownerDID}`,
      withTransaction(Effect.gen(function*() {
        for (const row of yield* operations.lockDeferred(scope)) {
          const next = resumeDeferredOperation(row, scope, now)
          if (next !== undefined) yield* requireWon(yield* operations.update(row, next))
        }
        for (const row of yield* watches.lockDeferred(scope)) {
          const next = resumeDeferredWatch(row, scope, now)
          if (next !== undefined) yield* requireWon(yield* watches.update(row, next))
        }
      }))
    )

  const methods: WatchMethods = {
    getWatch: (identity) =>
      Effect.zipRight(validate("getWatch", identityChecks("identity", identity)), Effect.suspend(() => watches.get(identity))),

    getWatchByDocument: (documentID) =>
      Effect.zipRight(
        validate("getWatchByDocument", [["documentID", documentID, Rules.id]]),
        Effect.suspend(() => watches.getByDocument(documentID))
      ),

    listWatchesByDocuments: (documentIDs) =>
      Effect.zipRight(
        validate("listWatchesByDocuments", [["documentIDs", documentIDs, Rules.ids]]),
        Effect.suspend(() => Effect.map(
          Effect.forEach(chunksOf(Array.from(new Set(documentIDs)), DOCUMENT_CHUNK), watches.listByDocuments),
          (chunks) => chunks.flat()
        ))
      ),

    armWatch: withAttemptNow(
      (identity, reason, options) =>
        Effect.suspend((): Effect.Effect<ArmOutcome, ArmErrors> => {
          // Not in the type, but a JavaScript caller can still pass it.
          if ((reason as string) === "finalize") return Effect.fail(new ReservedArmReason({ reason: "finalize" }))
          const problem = firstProblem("armWatch", armWatchChecks(identity, reason, options))
          if (problem !== undefined) return Effect.fail(problem)
          if (armReader._tag === "Left") return Effect.fail(armReader.left)
          const viaPorts = () => armViaPorts(identity, armInputOf(reason, options), armReader.right)
          return direct === undefined ? viaPorts() : runAttempt((context) => armNow(context, identity, reason, options), viaPorts)
        }),
      direct === undefined ? undefined : armNow
    ),

    claimWatchAttempt: withAttemptNow(
      (identity, options) =>
        Effect.zipRight(
          validate("claimWatchAttempt", claimWatchChecks(identity, options)),
          Effect.suspend(() => {
            // One guarded write (decideClaim's preconditions as its guard; see
            // WatchRepository.claimAttempt): a claim that finds the attempt
            // taken writes nothing and answers false, with no race to lose.
            const viaPorts = () => Effect.flatMap(Clock.currentTimeMillis, (now) => watches.claimAttempt(identity, options, options.now, now))
            return direct === undefined ? viaPorts() : runAttempt((context) => claimNow(context, identity, options), viaPorts)
          })
        ),
      direct === undefined ? undefined : claimNow
    ),

    deferWatch: withAttemptNow(
      (identity, options) =>
        Effect.zipRight(
          validate("deferWatch", deferWatchChecks(identity, options)),
          Effect.suspend(() => {
            const viaPorts = () => Effect.flatMap(Clock.currentTimeMillis, (now) => watches.deferAttempt(identity, options, now))
            return direct === undefined ? viaPorts() : runAttempt((context) => deferNow(context, identity, options), viaPorts)
          })
        ),
      direct === undefined ? undefined : deferNow
    ),

    recordVerification: withAttemptNow(
      (identity, input) =>
        Effect.suspend((): Effect.Effect<VerificationOutcome, VerificationErrors> => {
          const problem = firstProblem("recordVerification", verificationChecks(identity, input))
          if (problem !== undefined) return Effect.fail(problem)
          if (verificationReader._tag === "Left") return Effect.fail(verificationReader.left)
          const viaPorts = () => verificationViaPorts(identity, input, verificationReader.right)
          return direct === undefined ? viaPorts() : runAttempt((context) => verificationNow(context, identity, input), viaPorts)
        }),
      direct === undefined ? undefined : verificationNow
    ),

    resumeOfflineDeferred: (now) =>
      Effect.zipRight(
        validate("resumeOfflineDeferred", [["now", now, Rules.millis]]),
        resume("resumeOfflineDeferred", { reason: "offline" }, now)
      ),

    resumeAuthDeferred: (params) =>
      Effect.gen(function*() {
        yield* validate("resumeAuthDeferred", resumeAuthChecks(params))
        if (params.connectorNames.length === 0) return
        yield* resume("resumeAuthDeferred", {
          reason: "auth",
          ownerDID: params.ownerDID,
          connectorNames: params.connectorNames
        }, params.now)
      })
  }
  return methods
})
