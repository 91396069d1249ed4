import { Effect, type Either, type Option } from "effect"
import {
  type ConcurrentUpdateExhausted,
  type CorruptRow,
  type InvalidInput,
  type PersistenceError,
  ReservedArmReason,
  type WinnerReaderMissing,
  type WinnerReadFailed
} from "../errors.js"
import { resumeDeferredOperation } from "../operation/resume.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { WatchRepository } from "../ports/WatchRepository.js"
import { type ReadWinner, WinnerReader } from "../ports/WinnerReader.js"
import { allOptionNames } from "../optionNames.js"
import { firstProblem, identityChecks, type InputShape, LIST, preparing, Rules, shapeOf, taking, validate, validated } from "../validation.js"
import {
  armWatchChecks,
  claimWatchChecks,
  DEFER_SHAPE,
  deferWatchChecks,
  IDENTITY_SHAPE,
  resumeAuthChecks,
  VERIFICATION_SHAPE,
  verificationChecks
} from "../watch/checks.js"
import type { Millis, ProjectionWatch, WatchIdentity } from "../watch/ProjectionWatch.js"
import {
  type ArmInput,
  type ArmOutcome,
  type ArmReason,
  type ClaimInput,
  type DeferInput,
  resumeDeferredWatch,
  type ResumeScope,
  type VerificationInput,
  type VerificationOutcome
} from "../watch/transitions.js"
import { makeRunners } from "./hot.js"
import { armTransition, claimWatchTransition, deferTransition, verificationTransition } from "./programs.js"
import { requireWon, retryOnLostRace } from "./run.js"
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
  /** The watch of one entity, if it has one. */
  readonly getWatch: (identity: WatchIdentity) => Effect.Effect<Option.Option<ProjectionWatch>, InvalidInput | PersistenceError | CorruptRow>
  /** The watch of one document, if it has one. */
  readonly getWatchByDocument: (documentID: string) => Effect.Effect<Option.Option<ProjectionWatch>, InvalidInput | PersistenceError | CorruptRow>
  /** The watches of the given documents (any number; read in chunks). */
  readonly listWatchesByDocuments: (
    documentIDs: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ProjectionWatch>, InvalidInput | PersistenceError>
  /** Arms an entity's watch for `ingress` or `manual` verification at `options.dueAt` (see `decideArm`). */
  readonly armWatch: (
    identity: WatchIdentity,
    reason: ArmReason,
    options: ArmWatchOptions
  ) => Effect.Effect<
    ArmOutcome,
    InvalidInput | ReservedArmReason | WinnerReaderMissing | WinnerReadFailed | PersistenceError | CorruptRow | ConcurrentUpdateExhausted
  >
  /** Takes the current attempt of a due pending watch; `true` when this caller holds it now. */
  readonly claimWatchAttempt: (
    identity: WatchIdentity,
    options: ClaimWatchOptions
  ) => Effect.Effect<boolean, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted>
  /** Pushes out the attempt the caller holds; `true` when it did. */
  readonly deferWatch: (
    identity: WatchIdentity,
    options: DeferInput
  ) => Effect.Effect<boolean, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted>
  /** Records what a verifier found against the document's winner (see `decideVerification`). */
  readonly recordVerification: (
    identity: WatchIdentity,
    input: VerificationInput
  ) => Effect.Effect<
    VerificationOutcome,
    InvalidInput | WinnerReaderMissing | WinnerReadFailed | PersistenceError | CorruptRow | ConcurrentUpdateExhausted
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

/** The options of `armWatch`. */
const ARM_SHAPE: InputShape = shapeOf(allOptionNames<ArmWatchOptions>()(["dueAt", "triggeringWinner"]))

/** The options of `claimWatchAttempt`. */
const CLAIM_WATCH_SHAPE: InputShape = shapeOf(allOptionNames<ClaimWatchOptions>()(["until", "generation", "now"]))


/** The parameters of `resumeAuthDeferred`. */
const RESUME_AUTH_SHAPE: InputShape = shapeOf(
  allOptionNames<ResumeAuthParams>()(["ownerDID", "connectorNames", "now"]),
  { connectorNames: LIST }
)

const IDENTITY_NAMES = ["identity", "options"]
const ARM_NAMES = ["identity", "reason", "options"]
const ARM_TAKINGS = [IDENTITY_SHAPE, undefined, ARM_SHAPE]

/** Builds the watch methods over the ports. */
export const makeWatchMethods = Effect.gen(function*() {
  const watches = yield* WatchRepository
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor
  const readers = yield* WinnerReader
  const { hot } = yield* makeRunners
  // The readers are fixed for the store's life: which one a method reads with is decided once.
  const armReader = yield* Effect.either(singleWinnerReader("armWatch", readers))
  const verificationReader = yield* Effect.either(singleWinnerReader("recordVerification", readers))
  const reader = <L>(either: Either.Either<ReadWinner, L>) => either._tag === "Right" ? either.right : undefined

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
    getWatch: taking("getWatch", ["identity"], [IDENTITY_SHAPE], (identity: WatchIdentity) =>
      validated("getWatch", identityChecks("identity", identity), () => watches.get(identity))),

    getWatchByDocument: (documentID) =>
      validated("getWatchByDocument", [["documentID", documentID, Rules.id]], () => watches.getByDocument(documentID)),

    listWatchesByDocuments: taking("listWatchesByDocuments", ["documentIDs"], [LIST], (documentIDs: ReadonlyArray<string>) =>
      validated("listWatchesByDocuments", [["documentIDs", documentIDs, Rules.ids]], () =>
        Effect.map(
          Effect.forEach(chunksOf(Array.from(new Set(documentIDs)), DOCUMENT_CHUNK), watches.listByDocuments),
          (chunks) => chunks.flat()
        ))),

    armWatch: hot(preparing("armWatch", ARM_NAMES, ARM_TAKINGS, (identity: WatchIdentity, reason: ArmReason, options: ArmWatchOptions) => {
      // Not in the type, but a JavaScript caller can still pass it.
      if ((reason as string) === "finalize") return new ReservedArmReason({ reason: "finalize" })
      return firstProblem("armWatch", armWatchChecks(identity, reason, options)) ??
        (armReader._tag === "Left" ? armReader.left : armTransition(identity, armInputOf(reason, options)))
    }), reader(armReader)),

    claimWatchAttempt: hot(preparing("claimWatchAttempt", IDENTITY_NAMES, [IDENTITY_SHAPE, CLAIM_WATCH_SHAPE], (identity: WatchIdentity, options: ClaimWatchOptions) =>
      firstProblem("claimWatchAttempt", claimWatchChecks(identity, options)) ?? claimWatchTransition(identity, options))),

    deferWatch: hot(preparing("deferWatch", IDENTITY_NAMES, [IDENTITY_SHAPE, DEFER_SHAPE], (identity: WatchIdentity, options: DeferInput) =>
      firstProblem("deferWatch", deferWatchChecks(identity, options)) ?? deferTransition(identity, options))),

    recordVerification: hot(preparing("recordVerification", ["identity", "input"], [IDENTITY_SHAPE, VERIFICATION_SHAPE], (identity: WatchIdentity, input: VerificationInput) =>
      firstProblem("recordVerification", verificationChecks(identity, input)) ??
        (verificationReader._tag === "Left" ? verificationReader.left : verificationTransition(identity, input))), reader(verificationReader)),

    resumeOfflineDeferred: (now) =>
      validated("resumeOfflineDeferred", [["now", now, Rules.millis]], () =>
        resume("resumeOfflineDeferred", { reason: "offline" }, now)),

    resumeAuthDeferred: taking("resumeAuthDeferred", ["params"], [RESUME_AUTH_SHAPE], (params: ResumeAuthParams) =>
      Effect.gen(function*() {
        yield* validate("resumeAuthDeferred", resumeAuthChecks(params))
        if (params.connectorNames.length === 0) return
        yield* resume("resumeAuthDeferred", {
          reason: "auth",
          ownerDID: params.ownerDID,
          connectorNames: params.connectorNames
        }, params.now)
      }))
  }
  return methods
})
