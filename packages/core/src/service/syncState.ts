import { Effect, Option } from "effect"
import { type ConcurrentUpdateExhausted, type CorruptRow, InvalidInput, type PersistenceError } from "../errors.js"
import { OperationEntropy } from "../operation/entropy.js"
import { SyncStateRepository } from "../ports/SyncStateRepository.js"
import { Transactor } from "../ports/Transactor.js"
import {
  fenceChecks,
  LEASE_HOLDER_SHAPE,
  LEASE_TERMS_SHAPE,
  leaseChecks,
  leaseTermsChecks,
  PROGRESS_RESULT_SHAPE,
  progressResultChecks,
  recomputeResultRule,
  SYNC_STATE_SHAPE,
  syncStateInputChecks,
  syncStateKeyChecks
} from "../syncstate/checks.js"
import { SyncLeaseLost, SyncProgressExhausted, SyncProgressRecomputeFailed } from "../syncstate/errors.js"
import {
  decideClaimSyncLease,
  decideReleaseSyncLease,
  decideRenewSyncLease,
  type SyncLeaseClaim,
  type SyncLeaseDecision,
  type SyncLeaseHolder,
  type SyncLeaseRenewal,
  type SyncLeaseTerms
} from "../syncstate/lease.js"
import {
  decideSyncProgress,
  progressCurrent,
  type SyncProgressCASResult,
  type SyncProgressRecompute,
  validProgress
} from "../syncstate/progress.js"
import { decideSetSyncState, type SyncStateInput } from "../syncstate/setState.js"
import {
  formatSyncStateKey,
  type SyncState,
  type SyncStateEntry,
  type SyncStateKey,
  type SyncStateRow,
  type SyncStateWrite,
  toSyncState,
  toSyncStateEntry
} from "../syncstate/SyncState.js"
import { allOptionNames } from "../optionNames.js"
import { fieldOf, type InputShape, Rules, shapeOf, takeArguments, taking, validate, validated } from "../validation.js"
import { requireWon, retryOnLostRace } from "./run.js"

/** The fence of a sync-state write: with `leaseToken` it lands only while the row carries that lease, else fails with `SyncLeaseLost`. */
export interface SyncWriteFence {
  readonly leaseToken?: string | undefined
}

/** The options of `setSyncState`. */
export interface SetSyncStateOptions extends SyncWriteFence {}

/** The options of `updateSyncProgress`. */
export interface UpdateSyncProgressOptions extends SyncWriteFence {
  /** Lost compare-and-sets retried before giving up (default 5, so 6 attempts). */
  readonly maxRetries?: number | undefined
}

/** The default `maxRetries` of `updateSyncProgress`. */
export const DEFAULT_SYNC_PROGRESS_RETRIES = 5

/** The sync-state half of the store's Effect API. */
export interface SyncStateMethods {
  /** The sync state of one connector and owner, if it has one. */
  readonly getSyncState: (
    connectorName: string,
    ownerDID: string
  ) => Effect.Effect<Option.Option<SyncState>, InvalidInput | PersistenceError | CorruptRow>
  /** Writes the runner's report (`SyncStateInput`); an existing row keeps its version, incarnation and lease. */
  readonly setSyncState: (
    connectorName: string,
    ownerDID: string,
    state: SyncStateInput,
    options?: SetSyncStateOptions
  ) => Effect.Effect<SyncState, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted | SyncLeaseLost>
  /**
   * Writes what `recompute` derives from the stored checkpoint and recovery, by compare-and-set on version and incarnation (a
   * lost race recomputes); never touches status or lease.
   */
  readonly updateSyncProgress: (
    connectorName: string,
    ownerDID: string,
    recompute: SyncProgressRecompute,
    options?: UpdateSyncProgressOptions
  ) => Effect.Effect<
    SyncState,
    InvalidInput | PersistenceError | CorruptRow | SyncProgressExhausted | SyncProgressRecomputeFailed | SyncLeaseLost
  >
  /** Deletes the row (and any lease on it); `true` when there was one. */
  readonly deleteSyncState: (connectorName: string, ownerDID: string) => Effect.Effect<boolean, InvalidInput | PersistenceError>
  /** Every owner's state for one connector, by owner DID, each flat beside its key. */
  readonly listSyncStatesForConnector: (
    connectorName: string
  ) => Effect.Effect<ReadonlyArray<SyncStateEntry>, InvalidInput | PersistenceError>
  /** Takes the sync lease unless another runner's is live (see `decideClaimSyncLease`). */
  readonly claimSyncLease: (
    connectorName: string,
    ownerDID: string,
    terms: SyncLeaseTerms
  ) => Effect.Effect<SyncLeaseClaim, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted>
  /** Extends the caller's lease to `now + leaseMs`, if it is still the caller's. */
  readonly renewSyncLease: (
    lease: SyncLeaseHolder,
    terms: SyncLeaseTerms
  ) => Effect.Effect<SyncLeaseRenewal, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted>
  /** Gives the caller's lease up; `false` when it was no longer the caller's. */
  readonly releaseSyncLease: (
    lease: SyncLeaseHolder
  ) => Effect.Effect<boolean, InvalidInput | PersistenceError | CorruptRow | ConcurrentUpdateExhausted>
}

const holderKey = (lease: SyncLeaseHolder): SyncStateKey => ({ connectorName: lease.connectorName, ownerDID: lease.ownerDID })

/** A random id for an incarnation or a lease token (from the store's `OperationEntropy`). */
const randomId = Effect.map(OperationEntropy, (entropy) => entropy.token())

/** The options of `setSyncState`. */
const SET_SYNC_OPTIONS_SHAPE: InputShape = shapeOf(allOptionNames<SetSyncStateOptions>()(["leaseToken"]))

/** The options of `updateSyncProgress`. */
const PROGRESS_OPTIONS_SHAPE: InputShape = shapeOf(
  allOptionNames<UpdateSyncProgressOptions>()(["leaseToken", "maxRetries"])
)

const SET_NAMES = ["connectorName", "ownerDID", "state", "options"]
const SET_TAKINGS = [undefined, undefined, SYNC_STATE_SHAPE, SET_SYNC_OPTIONS_SHAPE]
const PROGRESS_NAMES = ["connectorName", "ownerDID", "recompute", "options"]
const PROGRESS_TAKINGS = [undefined, undefined, undefined, PROGRESS_OPTIONS_SHAPE]
const RESULT_NAMES = ["recompute()"]
const RESULT_TAKINGS = [PROGRESS_RESULT_SHAPE]
const CLAIM_NAMES = ["connectorName", "ownerDID", "options"]
const CLAIM_TAKINGS = [undefined, undefined, LEASE_TERMS_SHAPE]

/** Builds the sync-state methods over the ports. */
export const makeSyncStateMethods = Effect.gen(function*() {
  const repo = yield* SyncStateRepository
  const { withTransaction } = yield* Transactor

  /** Applies a write: the row as written, `None` when its guard no longer held. */
  const apply = (write: SyncStateWrite): Effect.Effect<Option.Option<SyncStateRow>, PersistenceError> => {
    const won = (done: boolean) => done ? Option.some(write.row) : Option.none()
    switch (write.kind) {
      case "insert":
        return Effect.map(repo.insert(write.row), won)
      case "progress":
        return repo.updateProgress(write.row, write.expected, write.reported)
      case "status":
        return Effect.map(repo.updateStatus(write.row, write.expected), won)
      case "lease":
        return Effect.map(repo.updateLease(write.row, write.expected), won)
    }
  }

  /** One locked read-decide-write, retried whole on a lost race; `decide` gets a fresh random id. */
  const transition = <O>(
    method: string,
    key: SyncStateKey,
    decide: (row: SyncStateRow | undefined, freshId: string) => SyncLeaseDecision<O>
  ) =>
    // Built lazily: the label reads the key, which is validated only when the effect runs.
    Effect.suspend(() =>
      retryOnLostRace(
        method,
        formatSyncStateKey(key),
        withTransaction(Effect.gen(function*() {
          const row = Option.getOrUndefined(yield* repo.lockRead(key))
          const decision = decide(row, yield* randomId)
          if (decision.write !== undefined) yield* requireWon(Option.isSome(yield* apply(decision.write)))
          return decision.outcome
        }))
      )
    )

  /** True when a write fenced by `fence` may land on `row`: it still carries the caller's lease. */
  const fenceHolds = (row: SyncStateRow | undefined, fence: string | undefined): boolean =>
    fence === undefined || (row !== undefined && row.leaseToken === fence)

  /** One optimistic progress attempt: an unlocked read, the recompute, one guarded write (`None` when it lost). */
  const progressAttempt = (key: SyncStateKey, recompute: SyncProgressRecompute, fence: string | undefined) =>
    Effect.gen(function*() {
      const row = Option.getOrUndefined(yield* repo.get(key))
      if (!fenceHolds(row, fence)) return yield* new SyncLeaseLost({ method: "updateSyncProgress", ...key })
      const returned = yield* Effect.try({
        try: () => recompute(progressCurrent(row)),
        catch: (cause) => new SyncProgressRecomputeFailed({ ...key, cause })
      })
      yield* validate("updateSyncProgress", [["recompute()", returned, recomputeResultRule]])
      const taken = takeArguments("updateSyncProgress", RESULT_NAMES, RESULT_TAKINGS, [returned])
      if (taken instanceof InvalidInput) return yield* taken
      const result = taken[0]
      yield* validate("updateSyncProgress", progressResultChecks(result, row, key))
      return yield* apply(decideSyncProgress(key, row, validProgress(result as SyncProgressCASResult), yield* randomId, fence))
    })

  const methods: SyncStateMethods = {
    getSyncState: (connectorName, ownerDID) =>
      validated("getSyncState", syncStateKeyChecks(connectorName, ownerDID), () =>
        Effect.map(repo.get({ connectorName, ownerDID }), Option.map(toSyncState))),

    setSyncState: taking("setSyncState", SET_NAMES, SET_TAKINGS, (
      connectorName: string,
      ownerDID: string,
      state: SyncStateInput,
      options?: SetSyncStateOptions
    ) =>
      Effect.gen(function*() {
        yield* validate("setSyncState", [
          ...syncStateKeyChecks(connectorName, ownerDID),
          ...syncStateInputChecks(state),
          ...fenceChecks(options)
        ])
        const key = { connectorName, ownerDID }
        const fence = options?.leaseToken
        const outcome = yield* transition("setSyncState", key, (row, incarnation) => {
          if (!fenceHolds(row, fence)) return { outcome: Option.none<SyncState>(), write: undefined }
          const write = decideSetSyncState(key, row, state, incarnation, fence)
          return { outcome: Option.some(toSyncState(write.row)), write }
        })
        return Option.isSome(outcome) ? outcome.value : yield* new SyncLeaseLost({ method: "setSyncState", ...key })
      })),

    updateSyncProgress: taking("updateSyncProgress", PROGRESS_NAMES, PROGRESS_TAKINGS, (
      connectorName: string,
      ownerDID: string,
      recompute: SyncProgressRecompute,
      options?: UpdateSyncProgressOptions
    ) =>
      Effect.gen(function*() {
        yield* validate("updateSyncProgress", [
          ...syncStateKeyChecks(connectorName, ownerDID),
          ["recompute", recompute, Rules.callback],
          ...fenceChecks(options),
          ["options.maxRetries", fieldOf(options, "maxRetries"), (v) => v === undefined ? undefined : Rules.nonNegativeInt(v)]
        ])
        const key = { connectorName, ownerDID }
        const maxRetries = options?.maxRetries ?? DEFAULT_SYNC_PROGRESS_RETRIES
        for (let attempt = 1; attempt <= maxRetries + 1; attempt++) {
          const written = yield* progressAttempt(key, recompute, options?.leaseToken)
          if (Option.isSome(written)) return toSyncState(written.value)
        }
        return yield* new SyncProgressExhausted({ connectorName, ownerDID, attempts: maxRetries + 1 })
      })),

    deleteSyncState: (connectorName, ownerDID) =>
      validated("deleteSyncState", syncStateKeyChecks(connectorName, ownerDID), () =>
        repo.delete({ connectorName, ownerDID })),

    listSyncStatesForConnector: (connectorName) =>
      validated("listSyncStatesForConnector", [["connectorName", connectorName, Rules.id]], () =>
        Effect.map(repo.listByConnector(connectorName), (rows) => rows.map(toSyncStateEntry))),

    claimSyncLease: taking("claimSyncLease", CLAIM_NAMES, CLAIM_TAKINGS, (connectorName: string, ownerDID: string, terms: SyncLeaseTerms) =>
      validated("claimSyncLease", [...syncStateKeyChecks(connectorName, ownerDID), ...leaseTermsChecks(terms)], () =>
        Effect.flatMap(randomId, (token) =>
          transition("claimSyncLease", { connectorName, ownerDID }, (row, incarnation) =>
            decideClaimSyncLease({ connectorName, ownerDID }, row, terms, token, incarnation))))),

    renewSyncLease: taking("renewSyncLease", ["lease", "options"], [LEASE_HOLDER_SHAPE, LEASE_TERMS_SHAPE], (lease: SyncLeaseHolder, terms: SyncLeaseTerms) =>
      validated("renewSyncLease", [...leaseChecks(lease), ...leaseTermsChecks(terms)], () =>
        transition("renewSyncLease", holderKey(lease), (row) => decideRenewSyncLease(row, lease, terms)))),

    releaseSyncLease: taking("releaseSyncLease", ["lease"], [LEASE_HOLDER_SHAPE], (lease: SyncLeaseHolder) =>
      validated("releaseSyncLease", leaseChecks(lease), () =>
        transition("releaseSyncLease", holderKey(lease), (row) => decideReleaseSyncLease(row, lease))))
  }
  return methods
})
