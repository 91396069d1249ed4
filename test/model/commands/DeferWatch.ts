import { ConnectorStore, type DeferReason } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { labelOf } from "../universe.js"
import { putWatch, rewritten, type WatchModel, watchOf } from "../WatchModel.js"
import { generationFor, generationOffsetArb } from "./ClaimAttempt.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"
import { resolveTarget, type Target, targetArb, targetLabel } from "./target.js"

/**
 * A verifier pushes its attempt out, as the claim's holder (naming the
 * row's current claim) or not (naming another).
 *
 * The model: deferred only when the row is pending, of that generation, and
 * its claim is exactly the one named; next and the reason are set and the
 * claim released, written at the store's clock.
 */
export class DeferWatch extends ModelCommand {
  constructor(
    readonly target: Target,
    readonly asHolder: boolean,
    readonly generationOffset: number,
    readonly nextOffset: number,
    readonly reason: DeferReason | null | undefined
  ) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    targetArb,
    fc.boolean(),
    generationOffsetArb,
    fc.integer({ min: -3, max: 15 }),
    fc.constantFrom<DeferReason | null | undefined>("offline", "auth", null, undefined)
  ).map(([target, holder, gen, next, reason]) => new DeferWatch(target, holder, gen, next, reason))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const identity = resolveTarget(m, this.target)
    const row = watchOf(m, identity)
    const generation = generationFor(row?.repairGeneration, this.generationOffset)
    const held = row?.claimedUntil ?? null
    const claimedUntil = this.asHolder ? held ?? m.now + 3 : (held ?? m.now) + 7
    const nextAttemptAt = at(m.now, this.nextOffset)
    logCommand(m, `${this} [${labelOf(identity)}, generation=${generation}, claimedUntil=${claimedUntil}, next=${nextAttemptAt}]`)
    const options = { generation, claimedUntil, nextAttemptAt, ...(this.reason === undefined ? {} : { reason: this.reason }) }
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.deferWatch(identity, options))))

    const holds = row !== undefined &&
      row.verificationStatus === "pending_verification" &&
      row.repairGeneration === generation &&
      row.claimedUntil !== null && row.claimedUntil === claimedUntil
    if (holds) putWatch(m, rewritten(row, m.now, { nextAttemptAt, deferReason: this.reason ?? null, claimedUntil: null }))
    expectOutcome(m, actual, { ok: holds })
    await expectAgreement(m, r, identity)
  }

  toString(): string {
    return `deferWatch(${targetLabel(this.target)}, ${this.asHolder ? "holder" : "not holder"}, gen offset ${this.generationOffset}, ` +
      `next=${rel(this.nextOffset)}, reason=${this.reason})`
  }
}
