import { Context, type Effect } from "effect"
import type { WinnerReadFailed } from "../errors.js"
import type { Digest } from "../watch/ProjectionWatch.js"

/** Reads one document's current winner digest (`null`: the document has none). */
export type ReadWinner = (documentID: string) => Effect.Effect<Digest | null, WinnerReadFailed>

/** Reads many documents' winners at once; a document missing or `null` has no readable winner. */
export type ReadWinners = (
  documentIDs: ReadonlyArray<string>
) => Effect.Effect<ReadonlyMap<string, Digest | null>, WinnerReadFailed>

/** The ways a store can read winners: one at a time, in batches, or both. */
export interface WinnerReaders {
  readonly readWinner?: ReadWinner | undefined
  readonly readWinners?: ReadWinners | undefined
}

/** The document store's converged state, read inside a transition's transaction after its row is locked. */
export class WinnerReader extends Context.Tag("@connector-store/core/WinnerReader")<WinnerReader, WinnerReaders>() {}
