import { AsyncLocalStorage } from "node:async_hooks"
import { Effect, type Fiber } from "effect"
import { WinnerReadFailed } from "../errors.js"
import type { WinnerReaders } from "../ports/WinnerReader.js"
import { pendingWaitOf, type WaitExpiry } from "../service/bound.js"
import { type InsideCallbacks, insideCallbacks } from "../service/gate.js"

/** Reads one document's current winner digest; `tx` is the adapter's handle on the call's transaction. */
export type PromiseReadWinner<H> = (documentID: string, tx: H) => Promise<string | null> | string | null

/** Reads many documents' winners; a document absent from the result has no readable winner. */
export type PromiseReadWinners<H> = (
  documentIDs: ReadonlyArray<string>,
  tx: H
) =>
  | Promise<ReadonlyMap<string, string | null> | Readonly<Record<string, string | null>>>
  | ReadonlyMap<string, string | null>
  | Readonly<Record<string, string | null>>

/** The Promise-style winner readers a user hands to a store. */
export interface PromiseWinnerReaders<H> {
  readonly readWinner?: PromiseReadWinner<H> | undefined
  readonly readWinners?: PromiseReadWinners<H> | undefined
}

/** A batch reader's answer as a map. */
export const toMap = (
  value: ReadonlyMap<string, string | null> | Readonly<Record<string, string | null>>
): ReadonlyMap<string, string | null> => value instanceof Map ? value : new Map(Object.entries(value ?? {}))

/** A single reader's answer, checked: a digest or null, else a TypeError. */
export const digestOf = (digest: unknown): string | null => {
  if (digest !== null && typeof digest !== "string") throw new TypeError("readWinner returned a non-string digest")
  return digest
}

/** True when `value` is a Promise or anything else with a `then` method. */
export const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === "object" || typeof value === "function") && value !== null &&
  typeof (value as { readonly then?: unknown }).then === "function"

/**
 * What a user's reader answered, as an Effect: a plain value is checked without leaving the fiber, a thenable awaited (no
 * longer past `expiry`); a throw, rejection or failed check fails with `failed(cause)`.
 */
const answerOf = <A>(
  read: () => unknown,
  check: (value: never) => A,
  failed: (cause: unknown) => WinnerReadFailed,
  expiry: WaitExpiry | undefined
): Effect.Effect<A, WinnerReadFailed> => {
  let answer: unknown
  try {
    answer = read()
    if (!isThenable(answer)) return Effect.succeed(check(answer as never))
  } catch (cause) {
    return Effect.fail(failed(cause))
  }
  const pending = answer
  return Effect.async<A, WinnerReadFailed>((resume) => {
      let settled = false
      const once = (outcome: Effect.Effect<A, WinnerReadFailed>) => {
        if (settled) return
        settled = true
        resume(outcome)
      }
      // At the call's deadline the read stops being waited for (its call then fails with the bound's error).
      expiry?.onExpire((error) => once(Effect.fail(error as WinnerReadFailed)))
      Promise.resolve(pending).then(
        (value) => {
          let checked: A
          try {
            checked = check(value as never)
          } catch (cause) {
            return once(Effect.fail(failed(cause)))
          }
          once(Effect.succeed(checked))
        },
        (cause: unknown) => once(Effect.fail(failed(cause)))
      )
    })
}

const promiseCallbacks = new AsyncLocalStorage<InsideCallbacks>()

/** The stores whose Promise callbacks the current async context runs inside, or `undefined`. */
export const promiseCallbacksNow = (): InsideCallbacks | undefined => promiseCallbacks.getStore()

/** Calls a user's Promise `callback` inside the stores whose callbacks `fiber` runs inside, so a store call it makes can tell. */
export const callBackFrom = <A>(fiber: Fiber.RuntimeFiber<unknown, unknown>, callback: () => A): A => {
  const inside = fiber.getFiberRef(insideCallbacks)
  return inside === undefined ? callback() : promiseCallbacks.run(inside, callback)
}

/** `readers` as callbacks of `store`, so the store refuses a read's call back to it with `ReentrantCall`. */
export const promiseReadersOf = <H>(readers: PromiseWinnerReaders<H>, store: object): PromiseWinnerReaders<H> => {
  const { readWinner, readWinners } = readers
  const inside = (): InsideCallbacks => ({ store, outer: promiseCallbacks.getStore() })
  return {
    readWinner: readWinner === undefined ? undefined : (documentID, tx) => promiseCallbacks.run(inside(), readWinner, documentID, tx),
    readWinners: readWinners === undefined ? undefined : (documentIDs, tx) => promiseCallbacks.run(inside(), readWinners, documentIDs, tx)
  }
}

/**
 * Adapts Promise-style readers to the `WinnerReader` port (`handle` yields the transaction's handle): a bad answer fails with
 * `WinnerReadFailed`, and a synchronous one is read synchronously.
 */
export const fromPromiseReaders = <H>(
  readers: PromiseWinnerReaders<H> | undefined,
  handle: Effect.Effect<H>
): WinnerReaders => {
  const readWinner = readers?.readWinner
  const readWinners = readers?.readWinners
  return {
    readWinner: readWinner === undefined ? undefined : (documentID) =>
      Effect.flatMap(handle, (tx) =>
        Effect.withFiberRuntime((fiber) =>
          answerOf(
            () => callBackFrom(fiber, () => readWinner(documentID, tx)),
            digestOf,
            (cause) => new WinnerReadFailed({ documentID, cause }),
            pendingWaitOf(fiber)
          )
        )),
    readWinners: readWinners === undefined ? undefined : (documentIDs) =>
      Effect.flatMap(handle, (tx) =>
        Effect.withFiberRuntime((fiber) => answerOf(
          () => callBackFrom(fiber, () => readWinners(documentIDs, tx)),
          toMap,
          (cause) => new WinnerReadFailed({ documentID: documentIDs.join(","), cause }),
          pendingWaitOf(fiber)
        )))
  }
}
