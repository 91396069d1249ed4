import { Context, type Effect } from "effect"
import type { WinnerReadFailed } from "../errors.js"
import type { Digest } from "../watch/ProjectionWatch.js"

/** Reads one document's current winner digest (`null`: the document has none). */
export type ReadWinner = (documentID: string) => Effect.Effect<Digest | null, WinnerReadFailed>

/**
 * Reads many documents' winners at once. A document missing from the map,
 * or mapped to `null`, has no readable winner.
 */
export type ReadWinners = (
  documentIDs: ReadonlyArray<string>
) => Effect.Effect<ReadonlyMap<string, Digest | null>, WinnerReadFailed>

/** The ways a store can read winners: one at a time, in batches, or both. */
export interface WinnerReaders {
  readonly readWinner?: ReadWinner | undefined
  readonly readWinners?: ReadWinners | undefined
}

/**
 * The document store's converged state, which lives outside this store. A
 * transition reads the winner of its row's document inside its own
 * transaction, after locking the row, so an adapter whose documents share the
 * database sees them consistently. A reader is called once for each read a
 * try makes (a try lost to a concurrent write reads again on the next), and
 * the effect it returns is run once.
 */
export class WinnerReader extends Context.Tag("@connector-store/core/WinnerReader")<WinnerReader, WinnerReaders>() {}
