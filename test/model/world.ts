import { type Digest, WinnerReadFailed, type WinnerReaders } from "@connector-store/core"
import { Effect } from "effect"
import { DOCUMENTS, START_TIME } from "./universe.js"

/** What the document store says about one document's winner. */
export type WinnerState = Digest | null | "unreadable"

/**
 * The world outside the store that a model run controls: the wall clock the
 * store reads, and the document store's converged winners. The store under
 * test reads both through its ports; the model keeps its own copy.
 */
export class World {
  now = START_TIME
  readonly winners = new Map<string, WinnerState>()

  constructor() {
    this.reset()
  }

  /** Back to the start of a run: clock at `START_TIME`, every document's winner `w1`. */
  reset(): void {
    this.now = START_TIME
    this.winners.clear()
    for (const doc of DOCUMENTS) this.winners.set(doc, "w1")
  }

  winnerOf(documentID: string): WinnerState {
    return this.winners.get(documentID) ?? null
  }

  /** One-at-a-time reads: an unreadable document fails its read. */
  readonly single: WinnerReaders = {
    readWinner: (documentID) =>
      Effect.suspend(() => {
        const winner = this.winnerOf(documentID)
        return winner === "unreadable"
          ? Effect.fail(new WinnerReadFailed({ documentID, cause: new Error("document store unavailable") }))
          : Effect.succeed(winner)
      })
  }

  /** Batched reads: an unreadable document is left out of the answer. */
  readonly batch: WinnerReaders = {
    readWinners: (documentIDs) =>
      Effect.sync(() => {
        const found = new Map<string, Digest | null>()
        for (const id of documentIDs) {
          const winner = this.winnerOf(id)
          if (winner !== "unreadable") found.set(id, winner)
        }
        return found
      })
  }
}
