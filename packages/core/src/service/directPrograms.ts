import { type MarkSentResult, decideMarkSent } from "../operation/attempt.js"
import { type ClaimOperationInput, type ClaimResult, decideOperationClaim, type FreshClaimValues } from "../operation/claim.js"
import type { ConnectorOperation, OperationKey } from "../operation/ConnectorOperation.js"
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
import type { DirectDatabaseApi } from "../ports/DirectDatabase.js"
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
import { done, LOST_RACE, type Step, withWinner, wonDirect } from "./direct.js"

/**
 * The hot transitions on a `DirectDatabase`: the same reads, pure
 * decisions and writes, in the same order, as the Effect methods make on
 * the ports, written once for both drivers (`runDirectTransaction` for the
 * Effect API, the Promise facade's own for the Promise API).
 */

/** Writes a watch decision on the direct rows (a lost write abandons the try) and finishes with its outcome. */
const applyWatch = <O extends string>(db: DirectDatabaseApi, row: ProjectionWatch | undefined, decision: Decision<O>): Step<O> => {
  if (decision.next !== undefined && row !== undefined) wonDirect(db.watches.update(row, decision.next))
  return done(decision.outcome)
}

/** `armWatch`: the row locked, its document's winner read, `decideArm`. */
export const armDirect = (db: DirectDatabaseApi, identity: WatchIdentity, input: ArmInput, now: Millis): Step<ArmOutcome> => {
  const row = db.watches.lockRead(identity)
  return row === undefined
    ? applyWatch(db, row, decideArm(row, input, null, now))
    : withWinner(row.documentID, (winner) => applyWatch(db, row, decideArm(row, input, winner, now)))
}

/** `recordVerification`: the row locked, a stale result refused before any winner is read, `decideVerification`. */
export const verificationDirect = (
  db: DirectDatabaseApi,
  identity: WatchIdentity,
  input: VerificationInput,
  now: Millis
): Step<VerificationOutcome> => {
  const row = db.watches.lockRead(identity)
  return staleVerification(row, input) !== undefined || row === undefined
    ? applyWatch(db, row, decideVerification(row, input, null, now))
    : withWinner(row.documentID, (winner) => applyWatch(db, row, decideVerification(row, input, winner, now)))
}

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
    claim: (db: DirectDatabaseApi, input: ClaimOperationInput, now: Millis, read: "unlocked" | "locked"): ClaimResult => {
      const fresh = freshValues()
      const created = decideOperationClaim(undefined, input, fresh, policy, now)
      if (!created.conflict && created.next !== undefined && db.operations.insert(created.next)) return created.result
      const row = read === "unlocked" ? db.operations.get(input) : db.operations.lockRead(input)
      if (row === undefined) throw LOST_RACE
      const decision = decideOperationClaim(row, input, fresh, policy, now)
      if (decision.conflict) throw new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
      if (decision.next !== undefined) wonDirect(db.operations.update(row, decision.next))
      return decision.result
    },

    /** The common mark: the holder's first with attempts left, one guarded write; undefined when it matched nothing. */
    markSentGuarded: (db: DirectDatabaseApi, key: OperationKey, leaseToken: string, now: Millis): ConnectorOperation | undefined =>
      db.operations.markSent(key, leaseToken, policy.maxAttempts, now),

    /** Any other mark, decided from the locked row (`decideMarkSent`). */
    markSentDecided: (db: DirectDatabaseApi, key: OperationKey, leaseToken: string, now: Millis): Step<MarkSentResult> => {
      const row = db.operations.lockRead(key)
      const decision = decideMarkSent(row, leaseToken, policy, now)
      if (decision.next !== undefined && row !== undefined) wonDirect(db.operations.update(row, decision.next))
      return done(decision.result)
    },

    /** Finalize: the operation locked, its arm targets locked, the document's winner read, the commit and the watch written. */
    finalize: (db: DirectDatabaseApi, key: OperationKey, input: FinalizeOperationInput, now: Millis): Step<FinalizeResult> => {
      const row = db.operations.lockRead(key)
      const commit = decideCommit(row, input, policy, now)
      if (commit.result.outcome !== "committed") return done(commit.result)
      if (commit.next === undefined || row === undefined) throw new Error("a commit decided without a row")
      const next = commit.next
      const operation = commit.result.operation
      const identity = watchIdentityOfCommit(row, input.sourceID)
      const targets = db.watches.lockArmTargets({ ownerDID: row.ownerDID, model: row.model, documentID: input.documentID }, identity)
      return withWinner(input.documentID, (winner) => {
        wonDirect(db.operations.update(row, next))
        const superseded = supersededBy(targets, identity, input.documentID)
        for (const other of superseded) wonDirect(db.watches.delete(watchIdentityOf(other), other.version))
        const existing = targets.find((target) => watchKey(target) === watchKey(identity))
        const watch = armedByFinalize(existing, identity, input.documentID, winner, input.watchDueAt, now)
        wonDirect(existing === undefined ? db.watches.insert(watch) : db.watches.update(existing, watch))
        return done({ outcome: "committed", operation, watch, superseded: superseded.map(watchIdentityOf) } satisfies FinalizeResult)
      })
    }
  }
}
