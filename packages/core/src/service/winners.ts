import { Effect, Exit } from "effect"
import { type WinnerReadFailed, WinnerReaderMissing } from "../errors.js"
import { WinnerReader, type WinnerReaders } from "../ports/WinnerReader.js"
import type { SweepApply } from "./relistCandidates.js"
import { asCallbackOf, type CallGate } from "./gate.js"
import type { Digest } from "../watch/ProjectionWatch.js"

/** How many document ids go into one batched winner read or one `IN` list. */
export const DOCUMENT_CHUNK = 500

/** Splits `items` into chunks of at most `size`. */
export const chunksOf = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  const chunks: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size))
  return chunks
}

/** A one-document winner read from whichever reader is configured, or `WinnerReaderMissing`. */
export const singleWinnerReader = (
  method: string,
  readers: WinnerReaders
): Effect.Effect<(documentID: string) => Effect.Effect<Digest | null, WinnerReadFailed>, WinnerReaderMissing> => {
  const { readWinner, readWinners } = readers
  if (readWinner !== undefined) return Effect.succeed(readWinner)
  if (readWinners !== undefined) {
    return Effect.succeed((documentID: string) =>
      Effect.map(readWinners([documentID]), (winners) => winners.get(documentID) ?? null)
    )
  }
  return Effect.fail(new WinnerReaderMissing({ method }))
}

/** The readable winners of `documentIDs` for a sweep (batched when it can); an unreadable one is just absent. */
export const readableWinners = (
  readers: WinnerReaders,
  documentIDs: ReadonlyArray<string>
): Effect.Effect<ReadonlyMap<string, Digest>> =>
  Effect.gen(function*() {
    const winners = new Map<string, Digest>()
    const unique = Array.from(new Set(documentIDs))
    const { readWinner, readWinners } = readers
    if (readWinners !== undefined) {
      for (const chunk of chunksOf(unique, DOCUMENT_CHUNK)) {
        const read = yield* Effect.option(readWinners(chunk))
        if (read._tag === "None") continue
        for (const id of chunk) {
          const digest = read.value.get(id)
          if (typeof digest === "string") winners.set(id, digest)
        }
      }
    } else if (readWinner !== undefined) {
      for (const id of unique) {
        const digest = yield* Effect.option(readWinner(id))
        if (digest._tag === "Some" && typeof digest.value === "string") winners.set(id, digest.value)
      }
    }
    return winners
  })

/** `readers` whose reads run as callbacks of the store behind `gate`, so a read that calls it back fails at once with `ReentrantCall`. */
export const guardedReaders = (readers: WinnerReaders, gate: CallGate): WinnerReaders => {
  const inside = asCallbackOf(gate)
  const { readWinner, readWinners } = readers
  return {
    readWinner: readWinner === undefined ? undefined : (documentID) => {
      const reading = readWinner(documentID)
      return Exit.isExit(reading) ? reading : inside(reading)
    },
    readWinners: readWinners === undefined ? undefined : (documentIDs) => {
      const reading = readWinners(documentIDs)
      return Exit.isExit(reading) ? reading : inside(reading)
    }
  }
}

/** `build` (a store's methods being made) with the store's winner readers guarded as `guardedReaders` does. */
export const withReadersOf = <A, E, R>(gate: CallGate, build: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | WinnerReader> =>
  Effect.flatMap(WinnerReader, (readers) => Effect.provideService(build, WinnerReader, guardedReaders(readers, gate)))

/** `api` whose `applySweepCandidate` runs its `apply` as a callback of the store behind `gate` (see `guardedReaders`). */
export const withApplyOf = <Api extends { readonly applySweepCandidate: (ref: never, apply: SweepApply) => unknown }>(
  api: Api,
  gate: CallGate
): Api => {
  const inside = asCallbackOf(gate)
  const applySweepCandidate = api.applySweepCandidate
  return {
    ...api,
    // A non-function is handed on as it is, for the method's own check to refuse.
    applySweepCandidate: (ref: never, apply: SweepApply) =>
      applySweepCandidate(ref, typeof apply === "function" ? (candidate) => inside(Effect.suspend(() => apply(candidate))) : apply)
  }
}
