import { Effect } from "effect"
import { WinnerReadFailed } from "../errors.js"
import type { WinnerReaders } from "../ports/WinnerReader.js"

/**
 * Reads one document's current winner digest. `tx` is the adapter's handle
 * on the transaction the call runs in (see the adapter), so a document store
 * in the same database reads under the same lock.
 */
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

const toMap = (
  value: ReadonlyMap<string, string | null> | Readonly<Record<string, string | null>>
): ReadonlyMap<string, string | null> => value instanceof Map ? value : new Map(Object.entries(value ?? {}))

/**
 * Adapts Promise-style readers to the `WinnerReader` port. `handle` yields
 * the adapter's handle on the transaction the read runs in. A reader that
 * throws, rejects or returns something other than a digest or null fails
 * with `WinnerReadFailed`.
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
        Effect.tryPromise({
          try: async () => {
            const digest = await readWinner(documentID, tx)
            if (digest !== null && typeof digest !== "string") throw new TypeError("readWinner returned a non-string digest")
            return digest
          },
          catch: (cause) => new WinnerReadFailed({ documentID, cause })
        })),
    readWinners: readWinners === undefined ? undefined : (documentIDs) =>
      Effect.flatMap(handle, (tx) =>
        Effect.tryPromise({
          try: async () => toMap(await readWinners(documentIDs, tx)),
          catch: (cause) => new WinnerReadFailed({ documentID: documentIDs.join(","), cause })
        }))
  }
}
