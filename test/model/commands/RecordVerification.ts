import { ConnectorStore, type VerificationOutcome } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, type Outcome, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { digestArb, labelOf } from "../universe.js"
import { putWatch, rewritten, type WatchModel, watchOf } from "../WatchModel.js"
import { generationFor, generationOffsetArb } from "./ClaimAttempt.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"
import { resolveTarget, type Target, targetArb, targetLabel } from "./target.js"

/** The claim a verifier reports: the row's own, another one, none, or an explicit null. */
type ClaimShown = "held" | "other" | "absent" | "null"

/**
 * A verifier reports what it fetched from the provider.
 *
 * The model, in the order the spec gives: no row or another generation →
 * stale-generation; a claim shown that is not the row's → stale-claim
 * (neither writes nor reads the winner). Then the winner must be readable.
 * Fetched = the current winner (not null) → verified, both watermarks := the
 * winner. Else one more attempt: at `maxAttempts` → repair_failed (schedule
 * cleared, watermarks untouched: observed stays the winner the generation
 * was opened against); below → pending (next := dueAt, watermarks and status
 * untouched). Every write clears claim and deferral.
 */
export class RecordVerification extends ModelCommand {
  constructor(
    readonly target: Target,
    readonly generationOffset: number,
    readonly claim: ClaimShown,
    readonly fetched: "winner" | string | null,
    readonly maxAttempts: number,
    readonly dueOffset: number
  ) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    targetArb,
    generationOffsetArb,
    fc.constantFrom<ClaimShown>("held", "held", "other", "absent", "null"),
    fc.oneof(
      { arbitrary: fc.constant("winner"), weight: 5 },
      { arbitrary: digestArb, weight: 3 },
      { arbitrary: fc.constant(null), weight: 1 }
    ),
    fc.integer({ min: 1, max: 4 }),
    fc.integer({ min: -3, max: 15 })
  ).map(([target, gen, claim, fetched, max, due]) => new RecordVerification(target, gen, claim, fetched, max, due))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const identity = resolveTarget(m, this.target)
    const row = watchOf(m, identity)
    const generation = generationFor(row?.repairGeneration, this.generationOffset)
    const winner = row === undefined ? null : m.winners.get(row.documentID) ?? null
    const claimedUntil = this.claim === "held"
      ? row?.claimedUntil ?? null
      : this.claim === "other" ? (row?.claimedUntil ?? m.now) + 5 : this.claim === "null" ? null : undefined
    const fetchedDigest = this.fetched === "winner" ? (winner === "unreadable" ? "w1" : winner) : this.fetched
    const dueAt = at(m.now, this.dueOffset)
    logCommand(m, `${this} [${labelOf(identity)}, generation=${generation}, claimedUntil=${claimedUntil}, fetched=${fetchedDigest}, dueAt=${dueAt}]`)
    const input = {
      generation,
      fetchedDigest,
      maxAttempts: this.maxAttempts,
      dueAt,
      ...(claimedUntil === undefined ? {} : { claimedUntil })
    }
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.recordVerification(identity, input))))

    const expected = ((): Outcome<VerificationOutcome> => {
      if (row === undefined || row.repairGeneration !== generation) return { ok: "stale-generation" }
      if (claimedUntil != null && row.claimedUntil !== claimedUntil) return { ok: "stale-claim" }
      if (winner === "unreadable") return { fail: "WinnerReadFailed" }
      const settled = { nextAttemptAt: null, claimedUntil: null, deferReason: null }
      if (fetchedDigest !== null && fetchedDigest === winner) {
        putWatch(m, rewritten(row, m.now, {
          ...settled,
          verificationStatus: "verified",
          verifiedStateDigest: winner,
          observedWinnerDigest: winner
        }))
        return { ok: "verified" }
      }
      const attempts = row.verificationAttempts + 1
      if (attempts >= this.maxAttempts) {
        putWatch(m, rewritten(row, m.now, {
          ...settled,
          verificationStatus: "repair_failed",
          verificationAttempts: attempts
        }))
        return { ok: "repair_failed" }
      }
      putWatch(m, rewritten(row, m.now, { verificationAttempts: attempts, nextAttemptAt: dueAt, claimedUntil: null, deferReason: null }))
      return { ok: "pending" }
    })()
    expectOutcome(m, actual, expected)
    await expectAgreement(m, r, identity)
  }

  toString(): string {
    return `recordVerification(${targetLabel(this.target)}, gen offset ${this.generationOffset}, claim=${this.claim}, ` +
      `fetched=${this.fetched}, maxAttempts=${this.maxAttempts}, dueAt=${rel(this.dueOffset)})`
  }
}
