import { Context, Exit, type MetricLabel, Option, type Tracer } from "effect"
import { ConcurrentUpdateExhausted, WinnerReadFailed } from "../errors.js"
import type { DirectDatabaseOf, DirectTransactionOf } from "../ports/DirectDatabase.js"
import { boundedPromise, type CallBoundary, type LaneCall, makeCallBoundary } from "../service/bound.js"
import { isPrepareFailure, type HotSpec } from "../service/hot.js"
import { callMetrics, identityAttributes, nameMethod, SPAN_PREFIX } from "../service/instrument.js"
import { isTypedFailure, type Transition } from "../service/program.js"
import { HandOver, type LaneRunner, type Position, runOnLane } from "../service/run.js"
import { isTime } from "../validation.js"
import type { Digest, Millis } from "../watch/ProjectionWatch.js"
import { digestOf, isThenable, type PromiseWinnerReaders, toMap } from "./readers.js"

/** What the lane runs with, taken from the store's runtime once it is built. */
export interface DirectLaneParts<H> {
  /** Rows that answer at once (SQLite, memory) or later (Postgres). */
  readonly db: DirectDatabaseOf<boolean>
  /** The user's winner readers, when the store was opened with them. */
  readonly readers: PromiseWinnerReaders<H> | undefined
  /** The handle winner readers get inside `transaction`. */
  readonly handle: (transaction: DirectTransactionOf<boolean>) => H
  /** The store's clock: a reading that is not a time hands the call to the ports (which refuse it). */
  readonly now: () => number
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  /** The runtime's tracer when one is installed: each call then gets its span. */
  readonly tracer: Tracer.Tracer | undefined
  /** The store's call bound, shared with its Effect API (the defaults when absent). */
  readonly boundary?: CallBoundary | undefined
}

/** The Promise API's runner of hot methods (see `makeDirectLane`). */
export interface DirectLane {
  /** The hot method `method` as the lane runs it, built once; `handOver` runs its transition on the ports from where the lane stopped. */
  readonly method: (
    method: string,
    hot: HotSpec<ReadonlyArray<never>, unknown, unknown>,
    handOver: (transition: Transition<unknown, unknown>, at: Position, call: LaneCall) => Promise<unknown>
  ) => (args: ReadonlyArray<never>) => Promise<unknown>
}

/**
 * The Promise API's hot methods run straight on the adapter's direct or lane database with no fiber (`runOnLane`), with the
 * Effect API's answers, errors, metrics and budget; a call the lane cannot go on with is handed to the ports, and a call that
 * does not answer at once is bounded by `callTimeoutMs`.
 */
export const makeDirectLane = <H>(parts: DirectLaneParts<H>): DirectLane => {
  /** The winner of `documentID` as the Effect path reads it (`fromPromiseReaders`, `singleWinnerReader`): a value, or a Promise of one. */
  const readWinner = (documentID: string, transaction: DirectTransactionOf<boolean>): Digest | null | Promise<Digest | null> => {
    const failed = (cause: unknown) => new WinnerReadFailed({ documentID, cause })
    const { readWinner: single, readWinners: batch } = parts.readers!
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
  const boundary = parts.boundary ?? makeCallBoundary()
  const hasReader = parts.readers !== undefined &&
    (parts.readers.readWinner !== undefined || parts.readers.readWinners !== undefined)
  const runner: LaneRunner = {
    db: parts.db,
    readWinner: hasReader ? readWinner : undefined,
    now: (): Millis | undefined => {
      const reading: unknown = parts.now()
      return isTime(reading) ? reading : undefined
    },
    labels: parts.labels
  }

  /** The call's span, when a tracer is installed: its identity now, its outcome when it ends. */
  const spanOf = (method: string, args: ReadonlyArray<unknown>): Tracer.Span | undefined => {
    if (parts.tracer === undefined) return undefined
    const span = parts.tracer.span(`${SPAN_PREFIX}${method}`, Option.none(), Context.empty(), [], process.hrtime.bigint(), "internal")
    const attributes = identityAttributes(args)
    for (const key in attributes) span.attribute(key, attributes[key])
    return span
  }

  return {
    method: (method, hot, handOver) => {
      const { succeeded, failed } = callMetrics(method)
      const withMethod = nameMethod(method)
      return (args) => {
        const started = performance.now()
        const span = spanOf(method, args)
        const rejected = (error: unknown): Promise<never> => {
          const named = isTypedFailure(error) || error instanceof ConcurrentUpdateExhausted ? withMethod(error) : error
          const outcome = failed(named, started, parts.labels)
          span?.attribute(`${SPAN_PREFIX}outcome`, outcome)
          span?.end(process.hrtime.bigint(), Exit.fail(named))
          return Promise.reject(named)
        }
        const resolved = (value: unknown): unknown => {
          const outcome = succeeded(value, started, parts.labels)
          span?.attribute(`${SPAN_PREFIX}outcome`, outcome)
          span?.end(process.hrtime.bigint(), Exit.succeed(value))
          return value
        }
        let answer: unknown
        let transition: Transition<unknown, unknown>
        const call: LaneCall = { expired: false, onEnd: undefined }
        try {
          const prepared = hot.prepare(...args)
          if (isPrepareFailure(prepared)) return rejected(prepared)
          transition = prepared
          answer = runOnLane(runner, transition, undefined, span === undefined ? undefined : (attempts) => {
            span.attribute(`${SPAN_PREFIX}attempts`, attempts)
            span.attribute(`${SPAN_PREFIX}retries`, attempts - 1)
          }, call)
        } catch (thrown) {
          return rejected(thrown)
        }
        if (!(answer instanceof Promise) && !(answer instanceof HandOver)) return Promise.resolve(resolved(answer))
        const handedOver = (value: unknown): unknown => value instanceof HandOver ? handOver(transition, value.at, call) : value
        const later = answer instanceof Promise ? answer.then(handedOver) : handedOver(answer) as Promise<unknown>
        return boundedPromise(boundary, method, call, later).then(resolved, rejected)
      }
    }
  }
}
