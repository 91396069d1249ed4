import { ConnectorStore, type WinnerReaders } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expect } from "vitest"
import { context, expectAgreement, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { operationKeyOf, type WatchModel, watchKeyOf } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"

/** How the sweep reads winners: the store's own reader, or one handed to the call. */
type ReaderChoice = "store's" | "single" | "batch"

/**
 * The boot/periodic sweep at `now` (near the store's clock).
 *
 * The model: attempted operations with no next attempt or one at or before
 * `now`; and each watch at most once if either it is unsettled (not
 * verified) with a next attempt at or before `now`, or it is settled
 * (verified or repair_failed) and its document has a readable, non-null
 * winner that equals neither watermark. Nothing is written.
 */
export class ListDueOperations extends ModelCommand {
  constructor(readonly nowOffset: number, readonly readers: ReaderChoice) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    fc.integer({ min: -5, max: 10 }),
    fc.constantFrom<ReaderChoice>("store's", "single", "batch")
  ).map(([offset, readers]) => new ListDueOperations(offset, readers))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const now = at(m.now, this.nowOffset)
    logCommand(m, `${this} [now=${now}]`)
    const readers: WinnerReaders | undefined = this.readers === "single"
      ? r.world.single
      : this.readers === "batch" ? r.world.batch : undefined
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.listDueOperations(now, readers))))

    const dueOperations = [...m.operations.values()]
      .filter((op) => op.state === "attempted" && (op.nextAttemptAt === null || op.nextAttemptAt <= now))
      .map(operationKeyOf)
    const dueWatches = [...m.watches.values()].filter((row) => {
      const scheduled = row.verificationStatus !== "verified" && row.nextAttemptAt !== null && row.nextAttemptAt <= now
      const winner = m.winners.get(row.documentID)
      const settled = row.verificationStatus === "verified" || row.verificationStatus === "repair_failed"
      const diverged = settled && typeof winner === "string" && winner !== "unreadable" &&
        winner !== row.verifiedStateDigest && winner !== row.observedWinnerDigest
      return scheduled || diverged
    })

    if (!("ok" in actual)) throw new Error(context(m, `listDueOperations failed: ${actual.fail}`))
    const found = actual.ok
    expect(new Set(found.operations.map(operationKeyOf)), context(m, "due operations differ from the model's"))
      .toEqual(new Set(dueOperations))
    expect(found.operations.length, context(m, "an operation was listed twice")).toBe(dueOperations.length)
    expect(new Set(found.watches.map(watchKeyOf)), context(m, "due watches differ from the model's"))
      .toEqual(new Set(dueWatches.map(watchKeyOf)))
    expect(found.watches.length, context(m, "a watch was listed twice")).toBe(dueWatches.length)
    const byKey = new Map(dueWatches.map((row) => [watchKeyOf(row), row]))
    for (const row of found.watches) {
      expect(row, context(m, "a due watch's row differs from the model's")).toEqual(byKey.get(watchKeyOf(row)))
    }
    await expectAgreement(m, r)
  }

  toString(): string {
    return `listDueOperations(${rel(this.nowOffset)}, ${this.readers} reader)`
  }
}
