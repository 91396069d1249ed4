import type { MetricLabel } from "effect"
import { ConcurrentUpdateExhausted, PersistenceError, WinnerReadFailed } from "../errors.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import type { MarkSentResult } from "../operation/attempt.js"
import { asStoredJson, claimChecks, finalizeChecks, keyChecks, runnerChecks } from "../operation/checks.js"
import type { ClaimOperationInput, ClaimResult } from "../operation/claim.js"
import { formatOperationKey, type OperationKey } from "../operation/ConnectorOperation.js"
import type { OperationEntropy } from "../operation/entropy.js"
import type { FinalizeOperationInput, FinalizeResult } from "../operation/finalize.js"
import type { OperationPolicySettings } from "../operation/policy.js"
import type { DirectDatabaseApi, DirectTransaction } from "../ports/DirectDatabase.js"
import { countLostRaceNow, MAX_CAS_ATTEMPTS } from "../service/cas.js"
import { done, LOST_RACE, type Step } from "../service/direct.js"
import { armDirect, operationPrograms, verificationDirect } from "../service/directPrograms.js"
import { callMetrics, nameMethod } from "../service/instrument.js"
import type { ArmWatchOptions, ClaimWatchOptions } from "../service/watches.js"
import { armWatchChecks, claimWatchChecks, deferWatchChecks, verificationChecks } from "../service/watches.js"
import { type Check, firstProblem } from "../validation.js"
import { type Digest, formatWatchIdentity, type Millis, type WatchIdentity } from "../watch/ProjectionWatch.js"
import type { ArmOutcome, ArmReason, DeferInput, VerificationInput, VerificationOutcome } from "../watch/transitions.js"
import { digestOf, isThenable, type PromiseWinnerReaders, toMap } from "./readers.js"

/**
 * What the lane answers when a call is not its to make: the facade then
 * runs it on the Effect path, which gives the same answer the slow way, or
 * the right error (bad input, no reader, a bad clock reading), or waits for
 * the open transaction.
 */
export const EFFECT_PATH: unique symbol = Symbol("connector-store/EffectPath")
/** The Effect path's answer to the same call. */
type Fallback<A> = () => Promise<A>

/**
 * The hot methods of the Promise API, answered on a `DirectDatabase`
 * without a fiber (see `makeDirectLane`); each takes last the same call on
 * the Effect path, for whatever the lane hands over.
 */
export interface DirectLane {
  readonly armWatch: (identity: WatchIdentity, reason: ArmReason, options: ArmWatchOptions, fallback: Fallback<ArmOutcome>) => Promise<ArmOutcome>
  readonly claimWatchAttempt: (identity: WatchIdentity, options: ClaimWatchOptions, fallback: Fallback<boolean>) => Promise<boolean>
  readonly deferWatch: (identity: WatchIdentity, options: DeferInput, fallback: Fallback<boolean>) => Promise<boolean>
  readonly recordVerification: (
    identity: WatchIdentity,
    input: VerificationInput,
    fallback: Fallback<VerificationOutcome>
  ) => Promise<VerificationOutcome>
  readonly claimOperation: (input: ClaimOperationInput, fallback: Fallback<ClaimResult>) => Promise<ClaimResult>
  readonly markOperationSent: (
    key: OperationKey,
    options: { readonly leaseToken: string },
    fallback: Fallback<MarkSentResult>
  ) => Promise<MarkSentResult>
  readonly finalizeOperationAndArmWatch: (
    key: OperationKey,
    options: FinalizeOperationInput,
    fallback: Fallback<FinalizeResult>
  ) => Promise<FinalizeResult>
}

/** What the lane runs with, taken from the store's runtime once it is built. */
export interface DirectLaneParts<H> {
  readonly db: DirectDatabaseApi
  readonly policy: OperationPolicySettings
  readonly entropy: OperationEntropy["Type"]
  readonly readers: PromiseWinnerReaders<H>
  /** The handle winner readers get inside `transaction`. */
  readonly handle: (transaction: DirectTransaction) => H
  /** The store's clock: a reading that is not a time sends the call to the Effect path (which refuses it). */
  readonly now: () => number
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
}

const isTime = (reading: unknown): reading is number =>
  typeof reading === "number" && Number.isSafeInteger(reading) && reading >= 0

/** The typed failures a direct transition throws; anything else is a defect, passed on as it is. */
const isTypedFailure = (error: unknown): boolean =>
  error instanceof PersistenceError || error instanceof IdempotencyConflict || error instanceof WinnerReadFailed

/**
 * The Promise API's hot methods (the watch cycle, claim, mark sent,
 * finalize) run straight on the adapter's `DirectDatabase`, with the same
 * programs (`directPrograms`) the Effect methods run, but with no fiber:
 * a call with a synchronous winner reader completes in one synchronous
 * step. Same answers, same errors (named for the method), same metrics,
 * same lost-race budget as the Effect path. Anything unusual is handed to
 * the Effect path (`EFFECT_PATH`): input that fails its checks, an
 * argument shape the Effect path refuses, a missing reader, a clock
 * reading that is not a time, and a database busy with another transaction.
 */
export const makeDirectLane = <H>(parts: DirectLaneParts<H>): DirectLane => {
  const { db, labels } = parts
  const programs = operationPrograms(parts.policy, parts.entropy)
  const metrics = new Map<string, ReturnType<typeof callMetrics>>()
  const metricsOf = (method: string) => {
    let found = metrics.get(method)
    if (found === undefined) {
      found = callMetrics(method)
      metrics.set(method, found)
    }
    return found
  }
  const readNow = (): Millis | undefined => {
    const reading: unknown = parts.now()
    return isTime(reading) ? reading : undefined
  }

  /** The winner of `documentID` as the Effect path reads it (`fromPromiseReaders`, `singleWinnerReader`): a value, or a Promise of one. */
  const readWinner = (documentID: string, transaction: DirectTransaction): Digest | null | Promise<Digest | null> => {
    const failed = (cause: unknown) => new WinnerReadFailed({ documentID, cause })
    const { readWinner: single, readWinners: batch } = parts.readers
    let answer: unknown
    try {
      answer = single !== undefined ? single(documentID, parts.handle(transaction)) : batch!([documentID], parts.handle(transaction))
      const pick = single !== undefined
        ? (value: unknown) => digestOf(value)
        : (value: unknown) => (toMap(value as never).get(documentID) ?? null) as Digest | null
      if (!isThenable(answer)) return pick(answer)
      return Promise.resolve(answer).then(pick).catch((cause) => {
        throw failed(cause)
      })
    } catch (cause) {
      throw failed(cause)
    }
  }
  const hasReader = () => parts.readers.readWinner !== undefined || parts.readers.readWinners !== undefined

  /**
   * The call's end: metrics, and the error named for the method; a try
   * that handed over (`EFFECT_PATH`, a retry that met a busy database)
   * becomes `fallback`'s answer, counted there.
   */
  const settle = <A>(
    method: string,
    started: number,
    result: A | Promise<A | typeof EFFECT_PATH>,
    fallback: () => Promise<A>
  ): Promise<A> => {
    const { succeeded, failed } = metricsOf(method)
    const rejected = (error: unknown): Promise<never> => {
      const named = isTypedFailure(error) || error instanceof ConcurrentUpdateExhausted ? nameMethod(method)(error) : error
      failed(named, started, labels)
      return Promise.reject(named)
    }
    const resolved = (value: A): A => {
      succeeded(value, started, labels)
      return value
    }
    return result instanceof Promise
      ? result.then((value) => value === EFFECT_PATH ? fallback() : resolved(value), rejected)
      : Promise.resolve(resolved(result))
  }

  /**
   * Runs `program` as a transaction, retried whole on a lost race: a
   * value, a Promise (when a winner read suspends), a throw, or
   * `EFFECT_PATH` when the database is busy or the clock unreadable.
   */
  const transaction = <A>(
    method: string,
    identity: string,
    program: (now: Millis) => Step<A>,
    tried = 0
  ): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
    const now = readNow()
    if (now === undefined) return EFFECT_PATH
    const open = db.begin()
    if (open === undefined) return EFFECT_PATH
    const recover = (thrown: unknown): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
      open.rollback()
      if (thrown !== LOST_RACE) throw thrown
      countLostRaceNow(method, labels)
      if (tried + 1 >= MAX_CAS_ATTEMPTS) throw new ConcurrentUpdateExhausted({ method, identity, attempts: tried + 1 })
      return transaction(method, identity, program, tried + 1)
    }
    const finish = (step: Step<A>): A | Promise<A> => {
      while (!step.done) {
        const waiting = step
        const winner = readWinner(waiting.documentID, open)
        if (winner instanceof Promise) return winner.then((read) => finish(waiting.resume(read)))
        step = waiting.resume(winner)
      }
      open.commit()
      return step.value
    }
    let result: A | Promise<A>
    try {
      result = finish(program(now))
    } catch (thrown) {
      return recover(thrown)
    }
    return result instanceof Promise ? result.catch(recover) : result
  }

  /**
   * One lane call: checks passed, then `run`. `EFFECT_PATH` from either, at
   * once or after a wait, hands the call to `fallback`.
   */
  const call = <A>(
    method: string,
    checks: ReadonlyArray<Check>,
    run: () => A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH,
    fallback: () => Promise<A>
  ): Promise<A> => {
    if (firstProblem(method, checks) !== undefined) return fallback()
    const started = performance.now()
    let result: A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH
    try {
      result = run()
    } catch (thrown) {
      return settle(method, started, Promise.reject(thrown), fallback)
    }
    return result === EFFECT_PATH ? fallback() : settle(method, started, result, fallback)
  }

  /** A single guarded write, outside any transaction, when none is open. */
  const statement = <A>(write: (now: Millis) => A): A | typeof EFFECT_PATH => {
    const now = readNow()
    return now === undefined || !db.free() ? EFFECT_PATH : write(now)
  }

  return {
    armWatch: (identity, reason, options, fallback) =>
      !hasReader() ? fallback() : call("armWatch", armWatchChecks(identity, reason, options), () => {
        const input = { reason, dueAt: options.dueAt, triggeringWinner: options.triggeringWinner }
        return transaction("armWatch", formatWatchIdentity(identity), (now) => armDirect(db, identity, input, now))
      }, fallback),

    claimWatchAttempt: (identity, options, fallback) =>
      call("claimWatchAttempt", claimWatchChecks(identity, options), () =>
        statement((now) => db.watches.claimAttempt(identity, options, options.now, now)), fallback),

    deferWatch: (identity, options, fallback) =>
      call("deferWatch", deferWatchChecks(identity, options), () =>
        statement((now) => db.watches.deferAttempt(identity, options, now)), fallback),

    recordVerification: (identity, input, fallback) =>
      !hasReader() ? fallback() : call("recordVerification", verificationChecks(identity, input), () =>
        transaction("recordVerification", formatWatchIdentity(identity), (now) => verificationDirect(db, identity, input, now)), fallback),

    claimOperation: (input, fallback) =>
      call("claimOperation", claimChecks(input), () => {
        const stored = { ...input, reissueIntent: asStoredJson(input.reissueIntent) as ClaimOperationInput["reissueIntent"] }
        const first = statement((now) => {
          try {
            return programs.claim(db, stored, now, "unlocked")
          } catch (thrown) {
            if (thrown === LOST_RACE) return LOST_RACE
            throw thrown
          }
        })
        if (first !== LOST_RACE) return first
        countLostRaceNow("claimOperation", labels)
        return transaction("claimOperation", formatOperationKey(input), (now) =>
          done(programs.claim(db, stored, now, "locked")), 1)
      }, fallback),

    markOperationSent: (key, options, fallback) =>
      call("markOperationSent", [...keyChecks("key", key), ...runnerChecks(options)], () => {
        const sent = statement((now) => programs.markSentGuarded(db, key, options.leaseToken, now) ?? null)
        if (sent === EFFECT_PATH) return EFFECT_PATH
        if (sent !== null) return { outcome: "sent", operation: sent } satisfies MarkSentResult
        return transaction("markOperationSent", formatOperationKey(key), (now) =>
          programs.markSentDecided(db, key, options.leaseToken, now))
      }, fallback),

    finalizeOperationAndArmWatch: (key, options, fallback) =>
      !hasReader() ? fallback() : call(
        "finalizeOperationAndArmWatch",
        [...keyChecks("key", key), ...runnerChecks(options, finalizeChecks(options))],
        () => {
          const input = { ...options, resultEntity: asStoredJson(options.resultEntity) }
          return transaction("finalizeOperationAndArmWatch", formatOperationKey(key), (now) => programs.finalize(db, key, input, now))
        },
        fallback
      )
  }
}
