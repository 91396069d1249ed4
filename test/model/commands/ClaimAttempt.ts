import { ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { labelOf } from "../universe.js"
import { putWatch, rewritten, type WatchModel, watchOf } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"
import { resolveTarget, type Target, targetArb, targetLabel } from "./target.js"

/** Generation offsets from the row's current one: mostly right, sometimes one off. */
export const generationOffsetArb = fc.constantFrom(0, 0, 0, 0, 0, 0, -1, 1)

/** The generation a command names: the row's current one plus `offset` (never below zero). */
export const generationFor = (current: number | undefined, offset: number): number => Math.max(0, (current ?? 0) + offset)

/**
 * A verifier claims the current attempt, at its own `now` (near the store's
 * clock), until `now + span`.
 *
 * The model: claimed only when a pending row of that generation has a next
 * attempt at or before `now` and no claim that outlives `now`; the claim is
 * then `until`, written at the store's clock.
 */
export class ClaimAttempt extends ModelCommand {
  constructor(
    readonly target: Target,
    readonly generationOffset: number,
    readonly nowOffset: number,
    readonly span: number
  ) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    targetArb,
    generationOffsetArb,
    fc.integer({ min: -2, max: 8 }),
    fc.integer({ min: 0, max: 10 })
  ).map(([target, gen, now, span]) => new ClaimAttempt(target, gen, now, span))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const identity = resolveTarget(m, this.target)
    const row = watchOf(m, identity)
    const generation = generationFor(row?.repairGeneration, this.generationOffset)
    const now = at(m.now, this.nowOffset)
    const until = now + this.span
    logCommand(m, `${this} [${labelOf(identity)}, generation=${generation}, now=${now}, until=${until}]`)
    const actual = outcomeOf(
      await r.run(Effect.flatMap(ConnectorStore, (s) => s.claimWatchAttempt(identity, { generation, now, until })))
    )

    const claimable = row !== undefined &&
      row.verificationStatus === "pending_verification" &&
      row.repairGeneration === generation &&
      row.nextAttemptAt !== null && row.nextAttemptAt <= now &&
      (row.claimedUntil === null || row.claimedUntil <= now)
    if (claimable) putWatch(m, rewritten(row, m.now, { claimedUntil: until }))
    expectOutcome(m, actual, { ok: claimable })
    await expectAgreement(m, r, identity)
  }

  toString(): string {
    return `claimWatchAttempt(${targetLabel(this.target)}, gen offset ${this.generationOffset}, now=${rel(this.nowOffset)}, span=${this.span})`
  }
}
