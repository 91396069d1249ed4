import { Effect, Option, Redacted } from "effect"
import { InvalidInput } from "../errors.js"
import { allOptionNames } from "../optionNames.js"
import { PENDING_AUTH_SHAPE } from "../pendingauth/checks.js"
import type { PendingAuth, PendingAuthInput } from "../pendingauth/PendingAuth.js"
import type { SweepApplyOutcome } from "../relist/candidates.js"
import type { SweepCandidate } from "../relist/SweepCandidate.js"
import type { ConsumePendingAuthOptions } from "../service/pendingAuth.js"
import type { StaleRelistRun, SweepApply, SweepCandidateRef } from "../service/relistCandidates.js"
import type { DuePage, DueWork, DueWorkParams } from "../service/sweep.js"
import { shapeOf, takeArguments } from "../validation.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import type { PromiseCall } from "./call.js"
import { callBackFrom, fromPromiseReaders, type PromiseWinnerReaders } from "./readers.js"

/** The parameters of the Promise `listDueWork`: the Effect API's, with Promise-style readers. */
export interface PromiseDueWorkParams<H> extends Omit<DueWorkParams, "readers"> {
  /** Winner readers for this page's audit; the store's own when absent. */
  readonly readers?: PromiseWinnerReaders<H> | undefined
}

/**
 * An applier's work for one decided candidate in the store's transaction (`tx` is the adapter's handle on it); a throw or
 * rejection fails with `SweepApplyFailed`.
 */
export type PromiseSweepApply<H> = (candidate: SweepCandidate, tx: H) => Promise<void> | void

/** A pending authorization as the Promise API gives it: the original store's record, with the code verifier as a plain string. */
export interface PendingAuthRecord extends Omit<PendingAuth, "codeVerifier" | "createdAt"> {
  readonly codeVerifier: string
  readonly createdAt: Millis
}

/** What the Promise `createPendingAuth` takes: the record, its `createdAt` defaulting to the store's clock. */
export interface PendingAuthRecordInput extends Omit<PendingAuthInput, "codeVerifier"> {
  readonly codeVerifier: string
}

/**
 * The methods whose Promise form differs from their Effect form: Promise-style callbacks (handed the adapter's handle `H`) or a
 * plain-string code verifier.
 */
export interface PromiseAdaptedMethods<H> {
  /** The due sweep in one answer (the Effect API's `listDueOperations`), winners read with `readers` or the store's own. */
  listDueOperations(now: Millis, readers?: PromiseWinnerReaders<H>): Promise<DueWork>
  /** The due sweep a page at a time (see the Effect API's `listDueWork`); pass the page's `cursor` back until it is `null`. */
  listDueWork(params: PromiseDueWorkParams<H>): Promise<DuePage>
  /** Applies a decided candidate with `apply` in the store's transaction and marks it applied (the Effect API's `applySweepCandidate`). */
  applySweepCandidate(ref: SweepCandidateRef, apply: PromiseSweepApply<H>): Promise<SweepApplyOutcome | StaleRelistRun>
  /** Stores a pending OAuth authorization under its `state` until its callback consumes it or it expires. */
  createPendingAuth(record: PendingAuthRecordInput): Promise<void>
  /** The record of `state`, once: `null` when unknown, already consumed or expired. */
  consumePendingAuth(state: string, options?: ConsumePendingAuthOptions): Promise<PendingAuthRecord | null>
}

/** The readers a Promise `listDueOperations` or `listDueWork` may be given. */
const PROMISE_READERS_SHAPE = shapeOf(allOptionNames<PromiseWinnerReaders<unknown>>()(["readWinner", "readWinners"]))

const PROMISE_DUE_WORK_SHAPE = shapeOf(allOptionNames<PromiseDueWorkParams<unknown>>()(["now", "limit", "cursor", "readers"]), {
  readers: PROMISE_READERS_SHAPE
})

/** `readers` as the Effect API takes them; a non-object is handed on as it is, for the boundary to refuse. */
const readersOf = <H>(readers: PromiseWinnerReaders<H>, handle: Effect.Effect<H>) =>
  typeof readers === "object" && readers !== null ? fromPromiseReaders(readers, handle) : readers as never

/** `apply` as the Effect API runs it: handed the current transaction's handle, awaited when it returns a Promise. */
const applyOf = <H>(apply: PromiseSweepApply<H>, handle: Effect.Effect<H>): SweepApply => (candidate) =>
  Effect.flatMap(handle, (tx) =>
    Effect.withFiberRuntime((fiber) =>
      Effect.tryPromise({
        try: async () => {
          await callBackFrom(fiber, () => apply(candidate, tx))
        },
        catch: (cause) => cause
      })
    ))

const revealed = (record: PendingAuth): PendingAuthRecord => ({ ...record, codeVerifier: Redacted.value(record.codeVerifier) })

/** Wraps the verifier before it enters the store (read once, as the Effect API reads it); a non-string is left for validation to refuse. */
const redacted = (record: PendingAuthRecordInput): PendingAuthInput | InvalidInput => {
  // Read once, as the Effect API reads it: the verifier wrapped is the one checked.
  const taken = takeArguments("createPendingAuth", ["record"], [PENDING_AUTH_SHAPE], [record])
  if (taken instanceof InvalidInput) return taken
  const snapshot = taken[0] as PendingAuthRecordInput
  return typeof snapshot === "object" && snapshot !== null && typeof snapshot.codeVerifier === "string"
    ? { ...snapshot, codeVerifier: Redacted.make(snapshot.codeVerifier) }
    : snapshot as never
}

/** The adapted methods over `call`, `handle` yielding the transaction's handle; arguments taken as the Effect API takes them. */
export const promiseAdaptedMethods = <H>(call: PromiseCall, handle: Effect.Effect<H>): PromiseAdaptedMethods<H> => ({
  listDueOperations: (now, readers) =>
    call((s) => {
      const taken = takeArguments("listDueOperations", ["now", "readers"], [undefined, PROMISE_READERS_SHAPE], [now, readers])
      if (taken instanceof InvalidInput) return Effect.fail(taken)
      const given = taken[1] as PromiseWinnerReaders<H> | undefined
      return s.listDueOperations(now, given === undefined ? undefined : readersOf(given, handle))
    }),
  listDueWork: (params) =>
    call((s) => {
      const taken = takeArguments("listDueWork", ["params"], [PROMISE_DUE_WORK_SHAPE], [params])
      if (taken instanceof InvalidInput) return Effect.fail(taken)
      const given = taken[0] as PromiseDueWorkParams<H>
      // A non-object is handed on as it is, for the method's own check to refuse.
      if (typeof given !== "object" || given === null || given.readers === undefined) return s.listDueWork(given as DueWorkParams)
      return s.listDueWork({ ...given, readers: readersOf(given.readers, handle) })
    }),
  // A non-function is handed on as it is, for the boundary to refuse.
  applySweepCandidate: (ref, apply) =>
    call((s) => s.applySweepCandidate(ref, typeof apply === "function" ? applyOf(apply, handle) : apply as never)),
  createPendingAuth: (record) =>
    call((s) => {
      const input = redacted(record)
      return input instanceof InvalidInput ? Effect.fail(input) : s.createPendingAuth(input)
    }),
  consumePendingAuth: (state, options) =>
    call((s) => Effect.map(s.consumePendingAuth(state, options), Option.map(revealed)))
})
