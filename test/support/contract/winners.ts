import { type Digest, WinnerReadFailed, type WinnerReaders } from "@connector-store/core"
import { Effect } from "effect"

/**
 * The document store a test controls: each document's current winner, the
 * documents whose winner cannot be read, and a log of what was read.
 */
export class Winners {
  private readonly digests = new Map<string, Digest | null>()
  private readonly broken = new Set<string>()
  /**
   * Every document id a single read asked for, in order, logged when the
   * reader is called (not when its effect runs): a reader called twice for
   * one read shows here twice.
   */
  readonly singleReads: Array<string> = []
  /** Every id list a batch read asked for, in order, logged when the reader is called. */
  readonly batchReads: Array<ReadonlyArray<string>> = []

  constructor(initial: Readonly<Record<string, Digest | null>> = {}) {
    for (const [id, digest] of Object.entries(initial)) this.digests.set(id, digest)
  }

  /** Sets a document's current winner. */
  set(documentID: string, digest: Digest | null): this {
    this.digests.set(documentID, digest)
    return this
  }

  /** Makes reads of `documentID` fail from now on. */
  breakRead(documentID: string): this {
    this.broken.add(documentID)
    return this
  }

  /** The current winner of a document, as the reader reports it. */
  get(documentID: string): Digest | null {
    return this.digests.get(documentID) ?? null
  }

  private readOne(documentID: string): Effect.Effect<Digest | null, WinnerReadFailed> {
    this.singleReads.push(documentID)
    return Effect.suspend(() =>
      this.broken.has(documentID)
        ? Effect.fail(new WinnerReadFailed({ documentID, cause: new Error("document store unavailable") }))
        : Effect.succeed(this.get(documentID))
    )
  }

  /** Readers with only the one-document form. */
  single(): WinnerReaders {
    return { readWinner: (documentID) => this.readOne(documentID) }
  }

  /**
   * Readers with only the batch form. A broken document is left out of the
   * answer; with `failWhole`, a batch holding one fails entirely.
   */
  batch(options: { readonly failWhole?: boolean } = {}): WinnerReaders {
    return {
      readWinners: (documentIDs) => {
        this.batchReads.push(documentIDs)
        return Effect.suspend(() => {
          const broken = documentIDs.find((id) => this.broken.has(id))
          if (options.failWhole === true && broken !== undefined) {
            return Effect.fail(new WinnerReadFailed({ documentID: broken, cause: new Error("batch read failed") }))
          }
          const found = new Map<string, Digest | null>()
          for (const id of documentIDs) if (!this.broken.has(id) && this.digests.has(id)) found.set(id, this.get(id))
          return Effect.succeed(found)
        })
      }
    }
  }
}
