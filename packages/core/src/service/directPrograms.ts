import { type MarkSentResult, decideMarkSent } from "../operation/attempt.js"
import { type ClaimOperationInput, type ClaimResult, decideOperationClaim, type FreshClaimValues } from "../operation/claim.js"
import type { OperationKey } from "../operation/ConnectorOperation.js"
import type { OperationEntropy } from "../operation/entropy.js"
import {
  armedByFinalize,
  decideCommit,
  type FinalizeOperationInput,
  type FinalizeResult,
  supersededBy,
  watchIdentityOfCommit
} from "../operation/finalize.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import type { OperationPolicySettings } from "../operation/policy.js"
import type { DirectRowsOf } from "../ports/DirectDatabase.js"
import { type Millis, type ProjectionWatch, type WatchIdentity, watchIdentityOf, watchKey } from "../watch/ProjectionWatch.js"
import {
  type ArmInput,
  type ArmOutcome,
  decideArm,
  decideVerification,
  type Decision,
  staleVerification,
  type VerificationInput,
  type VerificationOutcome
} from "../watch/transitions.js"
import { after, done, LOST_RACE, type Step, withWinner, wonDirect } from "./direct.js"

/**
 * The hot transitions on a direct database's rows: the same reads, pure
 * decisions and writes, in the same order, as the Effect methods make on
 * the ports, written once for every driver (`runDirectTransaction` for the
 * Effect API, the Promise facade's lane for the Promise API) and for rows
 * that answer at once or later (`after` goes on at once when they answer at once).
 */

type Rows = DirectRowsOf<boolean>

/** Goes on when a versioned write landed; otherwise abandons the try (see `LOST_RACE`). */
const afterWon = <A>(won: boolean | Promise<boolean>, next: () => Step<A>): Step<A> =>
  after(won, (landed) => {
    wonDirect(landed)
    return next()
  })

/** Writes a watch decision on the rows (a lost write abandons the try) and finishes with its outcome. */
const applyWatch = <O extends string>(rows: Rows, row: ProjectionWatch | undefined, decision: Decision<O>): Step<O> =>
  decision.next !== undefined && row !== undefined
    ? afterWon(rows.watches.update(row, decision.next), () => done(decision.outcome))
    : done(decision.outcome)

/** `armWatch`: the row locked, its document's winner read, `decideArm`. */
export const armDirect = (rows: Rows, identity: WatchIdentity, input: ArmInput, now: Millis): Step<ArmOutcome> =>
  after(rows.watches.lockRead(identity), (row) =>
    row === undefined
      ? applyWatch(rows, row, decideArm(row, input, null, now))
      : withWinner(row.documentID, (winner) => applyWatch(rows, row, decideArm(row, input, winner, now))))

/** `recordVerification`: the row locked, a stale result refused before any winner is read, `decideVerification`. */
export const verificationDirect = (
  rows: Rows,
  identity: WatchIdentity,
  input: VerificationInput,
  now: Millis
): Step<VerificationOutcome> =>
  after(rows.watches.lockRead(identity), (row) =>
    staleVerification(row, input) !== undefined || row === undefined
      ? applyWatch(rows, row, decideVerification(row, input, null, now))
      : withWinner(row.documentID, (winner) => applyWatch(rows, row, decideVerification(row, input, winner, now))))

/** Deletes each of `watches` at the version it was read at, in order; a lost delete abandons the try. */
const deleteEach = <A>(rows: Rows, watches: ReadonlyArray<ProjectionWatch>, index: number, next: () => Step<A>): Step<A> =>
  index >= watches.length
    ? next()
    : afterWon(rows.watches.delete(watchIdentityOf(watches[index]!), watches[index]!.version), () =>
      deleteEach(rows, watches, index + 1, next))

/** The operation transitions under `policy`, drawing tokens from `entropy`. */
export const operationPrograms = (policy: OperationPolicySettings, entropy: OperationEntropy["Type"]) => {
  /** Fresh tokens for one try of a claim: a lost try may have lost on a node key clash. */
  const freshValues = (): FreshClaimValues => ({ nodeKey: entropy.token(), incarnation: entropy.token(), leaseToken: entropy.token() })
  return {
    /**
     * One try of a claim: the insert first (a new key needs no more), then
     * the stored row, read unlocked on the first try (no transaction) and
     * locked on the others.
     */
    claim: (rows: Rows, input: ClaimOperationInput, now: Millis, read: "unlocked" | "locked"): Step<ClaimResult> => {
      const fresh = freshValues()
      const created = decideOperationClaim(undefined, input, fresh, policy, now)
      const decideStored = (): Step<ClaimResult> =>
        after(read === "unlocked" ? rows.operations.get(input) : rows.operations.lockRead(input), (row) => {
          if (row === undefined) throw LOST_RACE
          const decision = decideOperationClaim(row, input, fresh, policy, now)
          if (decision.conflict) throw new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
          return decision.next !== undefined
            ? afterWon(rows.operations.update(row, decision.next), () => done(decision.result))
            : done(decision.result)
        })
      return !created.conflict && created.next !== undefined
        ? after(rows.operations.insert(created.next), (inserted) => inserted ? done(created.result) : decideStored())
        : decideStored()
    },

    /** The common mark: the holder's first with attempts left, one guarded write; undefined when it matched nothing. */
    markSentGuarded: <Later extends boolean>(rows: DirectRowsOf<Later>, key: OperationKey, leaseToken: string, now: Millis) =>
      rows.operations.markSent(key, leaseToken, policy.maxAttempts, now),

    /** Any other mark, decided from the locked row (`decideMarkSent`). */
    markSentDecided: (rows: Rows, key: OperationKey, leaseToken: string, now: Millis): Step<MarkSentResult> =>
      after(rows.operations.lockRead(key), (row) => {
        const decision = decideMarkSent(row, leaseToken, policy, now)
        return decision.next !== undefined && row !== undefined
          ? afterWon(rows.operations.update(row, decision.next), () => done(decision.result))
          : done(decision.result)
      }),

    /** Finalize: the operation locked, its arm targets locked, the document's winner read, the commit and the watch written. */
    finalize: (rows: Rows, key: OperationKey, input: FinalizeOperationInput, now: Millis): Step<FinalizeResult> =>
      after(rows.operations.lockRead(key), (row): Step<FinalizeResult> => {
        const commit = decideCommit(row, input, policy, now)
        if (commit.result.outcome !== "committed") return done(commit.result)
        if (commit.next === undefined || row === undefined) throw new Error("a commit decided without a row")
        const next = commit.next
        const operation = commit.result.operation
        const identity = watchIdentityOfCommit(row, input.sourceID)
        const slot = { ownerDID: row.ownerDID, model: row.model, documentID: input.documentID }
        return after(rows.watches.lockArmTargets(slot, identity), (targets) =>
          withWinner(input.documentID, (winner) =>
            afterWon(rows.operations.update(row, next), () => {
              const superseded = supersededBy(targets, identity, input.documentID)
              return deleteEach(rows, superseded, 0, () => {
                const existing = targets.find((target) => watchKey(target) === watchKey(identity))
                const watch = armedByFinalize(existing, identity, input.documentID, winner, input.watchDueAt, now)
                return afterWon(existing === undefined ? rows.watches.insert(watch) : rows.watches.update(existing, watch), () =>
                  done({ outcome: "committed", operation, watch, superseded: superseded.map(watchIdentityOf) } satisfies FinalizeResult))
              })
            })))
      })
  }
}
