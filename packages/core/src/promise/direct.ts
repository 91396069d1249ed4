import type { MetricLabel } from "effect"
import { ConcurrentUpdateExhausted, WinnerReadFailed } from "../errors.js"
import type { MarkSentResult } from "../operation/attempt.js"
import { asStoredJson, claimChecks, finalizeChecks, keyChecks, runnerChecks } from "../operation/checks.js"
import type { ClaimOperationInput, ClaimResult } from "../operation/claim.js"
import { type ConnectorOperation, formatOperationKey, type OperationKey } from "../operation/ConnectorOperation.js"
import type { OperationEntropy } from "../operation/entropy.js"
import type { FinalizeOperationInput, FinalizeResult } from "../operation/finalize.js"
import type { OperationPolicySettings } from "../operation/policy.js"
import type { DirectDatabaseOf, DirectRowsOf, DirectTransactionOf } from "../ports/DirectDatabase.js"
import { countLostRaceNow, MAX_CAS_ATTEMPTS } from "../service/cas.js"
import { isTypedFailure, LOST_RACE, type Step } from "../service/direct.js"
import { armDirect, operationPrograms, verificationDirect } from "../service/directPrograms.js"
import { callMetrics, nameMethod } from "../service/instrument.js"
import type { ArmWatchOptions, ClaimWatchOptions } from "../service/watches.js"
import { armWatchChecks, claimWatchChecks, deferWatchChecks, verificationChecks } from "../watch/checks.js"
import { type Check, firstProblem, isTime } from "../validation.js"
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
  /** Rows that answer at once (SQLite, memory) or later (Postgres). */
  readonly db: DirectDatabaseOf<boolean>
  readonly policy: OperationPolicySettings
  readonly entropy: OperationEntropy["Type"]
  readonly readers: PromiseWinnerReaders<H>
  /** The handle winner readers get inside `transaction`. */
  readonly handle: (transaction: DirectTransactionOf<boolean>) => H
  /** The store's clock: a reading that is not a time sends the call to the Effect path (which refuses it). */
  readonly now: () => number
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
}

/**
 * The Promise API's hot methods (the watch cycle, claim, mark sent,
 * finalize) run straight on the adapter's `DirectDatabase` or
 * `LaneDatabase`, with the same programs (`directPrograms`) the Effect
 * methods run, but with no fiber: on a database that answers at once, a
 * call with a synchronous winner reader completes in one synchronous step;
 * on one that answers later, each statement is one Promise. Same answers,
 * same errors (named for the method), same metrics, same lost-race budget
 * as the Effect path. Anything unusual is handed to the Effect path
 * (`EFFECT_PATH`): input that fails its checks, an argument shape the
 * Effect path refuses, a missing reader, a clock reading that is not a
 * time, and a database busy with another transaction.
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
  const readWinner = (documentID: string, transaction: DirectTransactionOf<boolean>): Digest | null | Promise<Digest | null> => {
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
   * value, a Promise (when a winner read or a statement answers later), a
   * throw, or `EFFECT_PATH` when the database is busy or the clock
   * unreadable. On a database that answers later, the time is read again
   * once the transaction has begun, after the wait for a connection.
   */
  const transaction = <A>(
    method: string,
    identity: string,
    program: (rows: DirectRowsOf<boolean>, now: Millis) => Step<A>,
    tried = 0
  ): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
    const now = readNow()
    if (now === undefined) return EFFECT_PATH
    const begun = db.begin()
    if (!(begun instanceof Promise)) return begun === undefined ? EFFECT_PATH : inTransaction(begun, now, method, identity, program, tried)
    // Read again once the wait for a connection is over.
    return begun.then((open) => open === undefined ? EFFECT_PATH : inTransaction(open, readNow(), method, identity, program, tried))
  }

  /** `program`'s try at `now` in the transaction `open`, which it ends (see `transaction`); undefined `now` hands over. */
  const inTransaction = <A>(
    open: DirectTransactionOf<boolean>,
    now: Millis | undefined,
    method: string,
    identity: string,
    program: (rows: DirectRowsOf<boolean>, now: Millis) => Step<A>,
    tried: number
  ): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
    const recover = (thrown: unknown): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
      const rolledBack = open.rollback()
      return rolledBack instanceof Promise ? rolledBack.then(() => retry(thrown)) : retry(thrown)
    }
    const retry = (thrown: unknown): A | Promise<A | typeof EFFECT_PATH> | typeof EFFECT_PATH => {
      if (thrown !== LOST_RACE) throw thrown
      countLostRaceNow(method, labels)
      if (tried + 1 >= MAX_CAS_ATTEMPTS) throw new ConcurrentUpdateExhausted({ method, identity, attempts: tried + 1 })
      return transaction(method, identity, program, tried + 1)
    }
    const finish = (step: Step<A>): A | Promise<A> => {
      while (!step.done) {
        const waiting = step
        if (waiting.documentID === undefined) return waiting.answer.then((answered) => finish(waiting.resume(answered as never)))
        const winner = readWinner(waiting.documentID, open)
        if (winner instanceof Promise) return winner.then((read) => finish(waiting.resume(read)))
        step = waiting.resume(winner)
      }
      const value = step.value
      const committed = open.commit()
      return committed instanceof Promise ? committed.then(() => value) : value
    }
    if (now === undefined) {
      const rolledBack = open.rollback()
      return rolledBack instanceof Promise ? rolledBack.then(() => EFFECT_PATH) : EFFECT_PATH
    }
    let result: A | Promise<A>
    try {
      result = finish(program(open.rows ?? db, now))
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

  /** A step run outside any transaction (a claim's unlocked try): it may wait on statements, never on a winner. */
  const untransacted = <A>(step: Step<A>): A | Promise<A> => {
    if (step.done) return step.value
    const waiting = step
    if (waiting.documentID !== undefined) throw new Error("a direct transition read a winner outside a transaction")
    return waiting.answer.then((answered) => untransacted(waiting.resume(answered as never)))
  }

  return {
    armWatch: (identity, reason, options, fallback) =>
      !hasReader() ? fallback() : call("armWatch", armWatchChecks(identity, reason, options), () => {
        const input = { reason, dueAt: options.dueAt, triggeringWinner: options.triggeringWinner }
        return transaction("armWatch", formatWatchIdentity(identity), (rows, now) => armDirect(rows, identity, input, now))
      }, fallback),

    claimWatchAttempt: (identity, options, fallback) =>
      call("claimWatchAttempt", claimWatchChecks(identity, options), () =>
        statement((now) => db.watches.claimAttempt(identity, options, options.now, now)), fallback),

    deferWatch: (identity, options, fallback) =>
      call("deferWatch", deferWatchChecks(identity, options), () =>
        statement((now) => db.watches.deferAttempt(identity, options, now)), fallback),

    recordVerification: (identity, input, fallback) =>
      !hasReader() ? fallback() : call("recordVerification", verificationChecks(identity, input), () =>
        transaction("recordVerification", formatWatchIdentity(identity), (rows, now) => verificationDirect(rows, identity, input, now)), fallback),

    claimOperation: (input, fallback) =>
      call("claimOperation", claimChecks(input), () => {
        const stored = { ...input, reissueIntent: asStoredJson(input.reissueIntent) as ClaimOperationInput["reissueIntent"] }
        // A lost first try goes on locked, in a transaction.
        const lost = (thrown: unknown) => {
          if (thrown !== LOST_RACE) throw thrown
          countLostRaceNow("claimOperation", labels)
          return transaction("claimOperation", formatOperationKey(input), (rows, now) => programs.claim(rows, stored, now, "locked"), 1)
        }
        let first: ClaimResult | Promise<ClaimResult> | typeof EFFECT_PATH
        try {
          first = statement((now) => untransacted(programs.claim(db, stored, now, "unlocked")))
        } catch (thrown) {
          return lost(thrown)
        }
        return first instanceof Promise ? first.catch(lost) : first
      }, fallback),

    markOperationSent: (key, options, fallback) =>
      call("markOperationSent", [...keyChecks("key", key), ...runnerChecks(options)], () => {
        const sent = statement((now) => programs.markSentGuarded(db, key, options.leaseToken, now))
        if (sent === EFFECT_PATH) return EFFECT_PATH
        const decided = (operation: ConnectorOperation | undefined) =>
          operation !== undefined
            ? { outcome: "sent", operation } satisfies MarkSentResult
            : transaction("markOperationSent", formatOperationKey(key), (rows, now) =>
              programs.markSentDecided(rows, key, options.leaseToken, now))
        return sent instanceof Promise ? sent.then(decided) : decided(sent)
      }, fallback),

    finalizeOperationAndArmWatch: (key, options, fallback) =>
      !hasReader() ? fallback() : call(
        "finalizeOperationAndArmWatch",
        [...keyChecks("key", key), ...runnerChecks(options, finalizeChecks(options))],
        () => {
          const input = { ...options, resultEntity: asStoredJson(options.resultEntity) }
          return transaction("finalizeOperationAndArmWatch", formatOperationKey(key), (rows, now) =>
            programs.finalize(rows, key, input, now))
        },
        fallback
      )
  }
}
