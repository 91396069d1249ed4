import { type AttemptFailure, type AttemptFailureResult, decideAttemptFailure, decideMarkSent, type MarkSentResult } from "../operation/attempt.js"
import { type ClaimOperationInput, type ClaimResult, decideOperationClaim, type FreshClaimValues } from "../operation/claim.js"
import { type ConnectorOperation, formatOperationKey, type OperationKey } from "../operation/ConnectorOperation.js"
import { decideEnqueue, type EnqueueOperationInput, type EnqueueResult } from "../operation/enqueue.js"
import type { OperationDecision } from "../operation/decision.js"
import type { OperationEntropy } from "../operation/entropy.js"
import { doubtedByFailover } from "../operation/failover.js"
import type { ServerHistory } from "../ports/ServerHistory.js"
import { countDoubtfulClaim } from "./serverHistory.js"
import { InvalidInput } from "../errors.js"
import {
  armedByFinalize,
  decideCommit,
  type FinalizeDeleteInput,
  type FinalizeDeleteResult,
  type FinalizeOperationInput,
  type FinalizeResult,
  supersededBy,
  watchIdentityOfCommit
} from "../operation/finalize.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import { decideRenew, type RenewResult } from "../operation/lease.js"
import type { OperationPolicySettings } from "../operation/policy.js"
import { decideSettle, type SettleOperationInput, type SettleResult } from "../operation/settle.js"
import { OperatorActionRefused, OperatorTargetNotFound } from "../operator/errors.js"
import {
  type Digest,
  formatWatchIdentity,
  type Millis,
  type ProjectionWatch,
  type WatchIdentity,
  watchIdentityOf,
  watchKey
} from "../watch/ProjectionWatch.js"
import {
  type ArmInput,
  type ArmOutcome,
  type ClaimInput,
  decideArm,
  decideVerification,
  type Decision,
  type DeferInput,
  staleVerification,
  type VerificationInput,
  type VerificationOutcome
} from "../watch/transitions.js"
import type { WatchWrite } from "../ports/OperationRepository.js"
import {
  after,
  afterBothWon,
  afterWon,
  andThen,
  done,
  LOCKED,
  LOST_RACE,
  type ProgramRows,
  type Step,
  type Transition,
  withWinner
} from "./program.js"

/** Every read-decide-write of a watch or an operation, as one program each, which every runner (see `run.ts`) interprets. */

/** Writes a watch decision on the rows (a lost write abandons the try) and finishes with its outcome. */
const applyWatch = <O extends string>(rows: ProgramRows, row: ProjectionWatch | undefined, decision: Decision<O>): Step<O> =>
  decision.next !== undefined && row !== undefined
    ? afterWon(rows.watches.update(row, decision.next), () => done(decision.outcome))
    : done(decision.outcome)

/** Writes an operation decision on the rows and finishes with its result. */
const applyOperation = <R>(rows: ProgramRows, row: ConnectorOperation | undefined, decision: OperationDecision<R>): Step<R> =>
  decision.next !== undefined && row !== undefined
    ? afterWon(rows.operations.update(row, decision.next), () => done(decision.result))
    : done(decision.result)

/** `armWatch`: the row locked, its document's winner read, `decideArm`. */
export const armTransition = (identity: WatchIdentity, input: ArmInput): Transition<ArmOutcome> => ({
  method: "armWatch",
  identity: formatWatchIdentity(identity),
  locked: (rows, now) =>
    after(rows.watches.lockRead(identity), (row) =>
      row === undefined
        ? applyWatch(rows, row, decideArm(row, input, null, now))
        : withWinner(row.documentID, (winner) => applyWatch(rows, row, decideArm(row, input, winner, now))))
})

/** `recordVerification`: the row locked, a stale result refused before any winner is read, `decideVerification`. */
export const verificationTransition = (identity: WatchIdentity, input: VerificationInput): Transition<VerificationOutcome> => ({
  method: "recordVerification",
  identity: formatWatchIdentity(identity),
  locked: (rows, now) =>
    after(rows.watches.lockRead(identity), (row) =>
      staleVerification(row, input) !== undefined || row === undefined
        ? applyWatch(rows, row, decideVerification(row, input, null, now))
        : withWinner(row.documentID, (winner) => applyWatch(rows, row, decideVerification(row, input, winner, now))))
})

/** `claimWatchAttempt`: one guarded write; a claim that finds the attempt taken answers false, with no race to lose. */
export const claimWatchTransition = (identity: WatchIdentity, input: ClaimInput & { readonly now: Millis }): Transition<boolean> => ({
  method: "claimWatchAttempt",
  identity: formatWatchIdentity(identity),
  unlocked: (rows, now) => after(rows.watches.claimAttempt(identity, input, input.now, now), done)
})

/** `deferWatch`: one guarded write, as a claim is. */
export const deferTransition = (identity: WatchIdentity, input: DeferInput): Transition<boolean> => ({
  method: "deferWatch",
  identity: formatWatchIdentity(identity),
  unlocked: (rows, now) => after(rows.watches.deferAttempt(identity, input, now), done)
})

/** Deletes each of `watches` at the version it was read at, in order; a lost delete abandons the try. */
const deleteEach = <A>(rows: ProgramRows, watches: ReadonlyArray<ProjectionWatch>, index: number, next: () => Step<A>): Step<A> =>
  index >= watches.length
    ? next()
    : afterWon(rows.watches.delete(watchIdentityOf(watches[index]!), watches[index]!.version), () =>
      deleteEach(rows, watches, index + 1, next))

/** What arming a commit's watch wrote. */
interface Armed {
  readonly watch: ProjectionWatch
  readonly superseded: ReadonlyArray<WatchIdentity>
}

/**
 * The commit `next` of the locked `row`, with its watch armed on `documentID` as a finalize does (row and slot locked already):
 * the arm targets locked, the winner read (or `unread`), the superseded watches deleted, then one paired write.
 */
const commitAndArm = (
  rows: ProgramRows,
  row: ConnectorOperation,
  next: ConnectorOperation,
  commit: { readonly sourceID: string; readonly documentID: string; readonly watchDueAt: Millis },
  now: Millis,
  unread?: (existing: ProjectionWatch | undefined) => Digest | null
): Step<Armed> => {
  const identity = watchIdentityOfCommit(row, commit.sourceID)
  const slot = { ownerDID: row.ownerDID, model: row.model, documentID: commit.documentID }
  return after(rows.watches.lockArmTargets(slot, identity), (targets) => {
    const existing = targets.find((target) => watchKey(target) === watchKey(identity))
    return withWinner(commit.documentID, (winner) => {
      const superseded = supersededBy(targets, identity, commit.documentID)
      return deleteEach(rows, superseded, 0, () => {
        const watch = armedByFinalize(existing, identity, commit.documentID, winner, commit.watchDueAt, now)
        const write: WatchWrite = existing === undefined
          ? { kind: "insert", row: watch }
          : { kind: "update", previous: existing, next: watch }
        return afterBothWon(rows.operations.updateWithWatch(row, next, write), () =>
          done({ watch, superseded: superseded.map(watchIdentityOf) }))
      })
    }, unread === undefined ? undefined : { winner: unread(existing) })
  })
}

/**
 * The commit `next` of the locked delete `row`, its entity's watch deleted at the version read in one paired write (row and
 * slot locked already); answers the watches retired.
 */
const commitAndRetire = (
  rows: ProgramRows,
  row: ConnectorOperation,
  next: ConnectorOperation,
  commit: { readonly sourceID: string; readonly documentID: string }
): Step<ReadonlyArray<WatchIdentity>> => {
  const identity = watchIdentityOfCommit(row, commit.sourceID)
  const slot = { ownerDID: row.ownerDID, model: row.model, documentID: commit.documentID }
  return after(rows.watches.lockArmTargets(slot, identity), (targets) => {
    const watch = targets.find((target) => watchKey(target) === watchKey(identity))
    return watch === undefined
      ? afterWon(rows.operations.update(row, next), () => done([]))
      : afterBothWon(rows.operations.updateWithWatch(row, next, { kind: "delete", identity, version: watch.version }), () =>
        done([identity]))
  })
}

/** An operation's read-decide-write on its row alone: unlocked on the first try, locked on the others. */
const operationWrite = <R>(
  method: string,
  key: OperationKey,
  decide: (row: ConnectorOperation | undefined, now: Millis) => OperationDecision<R>
): Transition<R> => ({
  method,
  identity: formatOperationKey(key),
  unlocked: (rows, now) => after(rows.operations.get(key), (row) => applyOperation(rows, row, decide(row, now))),
  locked: (rows, now) => after(rows.operations.lockRead(key), (row) => applyOperation(rows, row, decide(row, now)))
})

/** The refusal of a finalize of the wrong kind: the key names an operation another finalize ends. */
const wrongFinalize = (method: string, op: string, instead: string) =>
  new InvalidInput({ method, field: "key", reason: `names a ${op} write-back: finalize it with ${instead}` })

/**
 * The operation transitions under `policy`, drawing tokens from `entropy`; claims are decided under the failover doubt
 * `history` reports (none without one).
 */
export const operationTransitions = (
  policy: OperationPolicySettings,
  entropy: OperationEntropy["Type"],
  history?: ServerHistory["Type"] | undefined
) => {
  /** Fresh tokens for one try of a claim: a lost try may have lost on a node key clash. */
  const freshValues = (): FreshClaimValues => ({ nodeKey: entropy.token(), incarnation: entropy.token(), leaseToken: entropy.token() })

  /** One try of a claim: the insert first (exactly one of concurrent claims of a key inserts), then the stored row decided. */
  const claimTry = (rows: ProgramRows, input: ClaimOperationInput, now: Millis, locked: boolean): Step<ClaimResult> => {
    const fresh = freshValues()
    const doubt = history?.doubtAt(now)
    /** The claim's result, counted when the failover's doubt alone put it in doubt. */
    const counted = (row: ConnectorOperation | undefined, result: ClaimResult): ClaimResult => {
      if (history !== undefined && doubtedByFailover(row, result.outcome, doubt, now)) countDoubtfulClaim(history)
      return result
    }
    const created = decideOperationClaim(undefined, input, fresh, policy, now, doubt)
    const decideStored = (): Step<ClaimResult> =>
      after(locked ? rows.operations.lockRead(input) : rows.operations.get(input), (row) => {
        if (row === undefined) throw LOST_RACE
        const decision = decideOperationClaim(row, input, fresh, policy, now, doubt)
        if (decision.conflict) throw new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
        return decision.next === undefined
          ? done(decision.result)
          : afterWon(rows.operations.update(row, decision.next), () => done(counted(row, decision.result)))
      })
    return !created.conflict && created.next !== undefined
      ? after(rows.operations.insert(created.next), (inserted) => inserted ? done(counted(undefined, created.result)) : decideStored())
      : decideStored()
  }

  /** One try of an enqueue: the insert first, as a claim's, then the stored row decided (nothing written for a known key). */
  const enqueueTry = (rows: ProgramRows, input: EnqueueOperationInput, now: Millis, locked: boolean): Step<EnqueueResult> => {
    const fresh = { nodeKey: entropy.token(), incarnation: entropy.token() }
    const doubt = history?.doubtAt(now)
    const created = decideEnqueue(undefined, input, fresh, now, doubt)
    const decideStored = (): Step<EnqueueResult> =>
      after(locked ? rows.operations.lockRead(input) : rows.operations.get(input), (row) => {
        if (row === undefined) throw LOST_RACE
        const decision = decideEnqueue(row, input, fresh, now, doubt)
        if (decision.conflict) throw new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
        return applyOperation(rows, row, decision)
      })
    return !created.conflict && created.next !== undefined
      ? after(rows.operations.insert(created.next), (inserted) => {
        if (!inserted) return decideStored()
        if (history !== undefined && created.next?.inDoubtSince !== null) countDoubtfulClaim(history)
        return done(created.result)
      })
      : decideStored()
  }

  return {
    /** `claimOperation` (its input as stored). */
    claim: (input: ClaimOperationInput): Transition<ClaimResult, IdempotencyConflict> => ({
      method: "claimOperation",
      identity: formatOperationKey(input),
      unlocked: (rows, now) => claimTry(rows, input, now, false),
      locked: (rows, now) => claimTry(rows, input, now, true)
    }),

    /** `enqueueOperation` (its input as stored): the key recorded due now with no lease, or the known key left as it is. */
    enqueue: (input: EnqueueOperationInput): Transition<EnqueueResult, IdempotencyConflict> => ({
      method: "enqueueOperation",
      identity: formatOperationKey(input),
      unlocked: (rows, now) => enqueueTry(rows, input, now, false),
      locked: (rows, now) => enqueueTry(rows, input, now, true)
    }),

    /** `markOperationSent`: the common mark is one guarded write; anything else is decided from the locked row. */
    markSent: (key: OperationKey, leaseToken: string): Transition<MarkSentResult> => ({
      method: "markOperationSent",
      identity: formatOperationKey(key),
      unlocked: (rows, now) =>
        after(rows.operations.markSent(key, leaseToken, policy.maxAttempts, now), (operation) =>
          done(operation === undefined ? LOCKED : { outcome: "sent", operation } satisfies MarkSentResult)),
      locked: (rows, now) =>
        after(rows.operations.lockRead(key), (row) => applyOperation(rows, row, decideMarkSent(row, leaseToken, policy, now)))
    }),

    /** `renewOperationLease` for `durationMs`. */
    renew: (key: OperationKey, leaseToken: string, durationMs: number): Transition<RenewResult> =>
      operationWrite("renewOperationLease", key, (row, now) => decideRenew(row, leaseToken, durationMs, now)),

    /** `recordAttemptFailure`, with `random` for the backoff's jitter. */
    attemptFailure: (key: OperationKey, failure: AttemptFailure, random: number): Transition<AttemptFailureResult> =>
      operationWrite("recordAttemptFailure", key, (row, now) => decideAttemptFailure(row, failure, policy, random, now)),

    /** `finalizeDeleteOperation`: the commit and its watch's retirement in one transaction, under the slot lock. */
    finalizeDelete: (key: OperationKey, input: FinalizeDeleteInput): Transition<FinalizeDeleteResult, InvalidInput> => ({
      method: "finalizeDeleteOperation",
      identity: formatOperationKey(key),
      locked: (rows, now) =>
        after(rows.operations.lockReadWithSlot(key, input.documentID), (row): Step<FinalizeDeleteResult> => {
          if (row !== undefined && row.op !== "delete") {
            throw wrongFinalize("finalizeDeleteOperation", row.op, "finalizeOperationAndArmWatch")
          }
          const commit = decideCommit(row, input, policy, now)
          if (commit.result.outcome !== "committed") return done(commit.result)
          if (commit.next === undefined || row === undefined) throw new Error("a commit decided without a row")
          const operation = commit.result.operation
          return andThen(commitAndRetire(rows, row, commit.next, input), (retired) =>
            done({ outcome: "committed", operation, retired }))
        })
    }),

    /** `finalizeOperationAndArmWatch` (its input as stored): the commit and its watch in one transaction. */
    finalize: (key: OperationKey, input: FinalizeOperationInput): Transition<FinalizeResult> => ({
      method: "finalizeOperationAndArmWatch",
      identity: formatOperationKey(key),
      locked: (rows, now) =>
        after(rows.operations.lockReadWithSlot(key, input.documentID), (row): Step<FinalizeResult> => {
          if (row?.op === "delete") throw wrongFinalize("finalizeOperationAndArmWatch", "delete", "finalizeDeleteOperation")
          const commit = decideCommit(row, input, policy, now)
          if (commit.result.outcome !== "committed") return done(commit.result)
          if (commit.next === undefined || row === undefined) throw new Error("a commit decided without a row")
          const operation = commit.result.operation
          return andThen(commitAndArm(rows, row, commit.next, input, now), (armed) =>
            done({ outcome: "committed", operation, ...armed } satisfies FinalizeResult))
        })
    })
  }
}

/**
 * The operator's `settleOperation`: `dead` writes the operation alone; `committed` arms its watch as a finalize does (a delete
 * retires it, listed in `superseded`).
 */
export const settleTransition = (
  key: OperationKey,
  input: SettleOperationInput
): Transition<SettleResult, OperatorTargetNotFound | OperatorActionRefused> => {
  const identity = formatOperationKey(key)
  const locking = (rows: ProgramRows) =>
    input.outcome === "committed" ? rows.operations.lockReadWithSlot(key, input.documentID) : rows.operations.lockRead(key)
  return {
    method: "settleOperation",
    identity,
    // A committed outcome arms or retires a watch: the row and then the document slot, as a finalize takes them.
    locked: (rows, now) =>
      after(locking(rows), (row): Step<SettleResult> => {
        if (row === undefined) throw new OperatorTargetNotFound({ method: "settleOperation", what: "operation", identity })
        const decision = decideSettle(row, input, now)
        if (!decision.settled) throw new OperatorActionRefused({ method: "settleOperation", identity, reason: decision.reason })
        const next = decision.next
        if (input.outcome === "dead") {
          return afterWon(rows.operations.update(row, next), () => done({ operation: next, watch: null, superseded: [] }))
        }
        // A settled delete retires its entity's watch, as its finalize would have.
        if (row.op === "delete") {
          return andThen(commitAndRetire(rows, row, next, input), (retired) => done({ operation: next, watch: null, superseded: retired }))
        }
        return andThen(
          commitAndArm(rows, row, next, input, now, (existing) => existing?.observedWinnerDigest ?? null),
          (armed) => done({ operation: next, ...armed })
        )
      })
  }
}
