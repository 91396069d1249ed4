import { type ArmOutcome, type ArmReason, ConnectorStore, type ProjectionWatch } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, type Outcome, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { digestArb, labelOf } from "../universe.js"
import { putWatch, rewritten, type WatchModel, watchOf } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"
import { resolveTarget, type Target, targetArb, targetLabel } from "./target.js"

/** Which winner an ingress event claims to have produced. */
type Trigger = "current" | "absent" | null | string

/** A new generation, per the spec: attempts reset, pending, observed := the winner, claim and deferral gone. */
const opened = (row: ProjectionWatch, winner: string | null, dueAt: number, now: number) =>
  rewritten(row, now, {
    repairGeneration: row.repairGeneration + 1,
    verificationAttempts: 0,
    verificationStatus: "pending_verification",
    observedWinnerDigest: winner,
    nextAttemptAt: dueAt,
    claimedUntil: null,
    deferReason: null
  })

/**
 * `armWatch` for `ingress` (the triggering winner is often the current one)
 * or `manual`, now and then for the reserved `finalize`.
 *
 * The model's table: no row → noop; the document's winner unreadable →
 * WinnerReadFailed; manual → opened. Ingress passes only with a triggering
 * winner that is the current one and news to both watermarks (else noop);
 * then a settled row is opened and a pending one coalesced (next := the
 * earlier of next and dueAt).
 */
export class ArmWatch extends ModelCommand {
  constructor(
    readonly target: Target,
    /** `finalize` is outside the type: what an untyped (JavaScript) caller may still pass. */
    readonly reason: ArmReason | "finalize",
    readonly trigger: Trigger,
    readonly dueOffset: number
  ) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    targetArb,
    fc.oneof(
      { arbitrary: fc.constant<ArmReason>("ingress"), weight: 12 },
      { arbitrary: fc.constant<ArmReason>("manual"), weight: 6 },
      { arbitrary: fc.constant<ArmReason | "finalize">("finalize"), weight: 1 }
    ),
    fc.oneof(
      { arbitrary: fc.constant<Trigger>("current"), weight: 6 },
      { arbitrary: digestArb, weight: 3 },
      { arbitrary: fc.constant<Trigger>(null), weight: 1 },
      { arbitrary: fc.constant<Trigger>("absent"), weight: 1 }
    ),
    fc.integer({ min: -5, max: 20 })
  ).map(([target, reason, trigger, due]) => new ArmWatch(target, reason, trigger, due))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const identity = resolveTarget(m, this.target)
    const row = watchOf(m, identity)
    const winner = row === undefined ? "w1" : m.winners.get(row.documentID) ?? null
    const triggeringWinner = this.trigger === "current"
      ? (winner === "unreadable" ? "w1" : winner)
      : this.trigger === "absent" ? undefined : this.trigger
    const dueAt = at(m.now, this.dueOffset)
    logCommand(m, `${this} [${labelOf(identity)}, triggering=${triggeringWinner}, dueAt=${dueAt}]`)
    const options = triggeringWinner === undefined ? { dueAt } : { dueAt, triggeringWinner }
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.armWatch(identity, this.reason as ArmReason, options))))

    const expected = ((): Outcome<ArmOutcome> => {
      if (this.reason === "finalize") return { fail: "ReservedArmReason" }
      if (row === undefined) return { ok: "noop" }
      if (winner === "unreadable") return { fail: "WinnerReadFailed" }
      if (this.reason === "manual") {
        putWatch(m, opened(row, winner, dueAt, m.now))
        return { ok: "opened" }
      }
      const gate = triggeringWinner != null && triggeringWinner === winner &&
        triggeringWinner !== row.verifiedStateDigest && triggeringWinner !== row.observedWinnerDigest
      if (!gate) return { ok: "noop" }
      if (row.verificationStatus !== "pending_verification") {
        putWatch(m, opened(row, winner, dueAt, m.now))
        return { ok: "opened" }
      }
      const next = row.nextAttemptAt === null || dueAt < row.nextAttemptAt ? dueAt : row.nextAttemptAt
      putWatch(m, rewritten(row, m.now, { nextAttemptAt: next }))
      return { ok: "coalesced" }
    })()
    expectOutcome(m, actual, expected)
    await expectAgreement(m, r, identity)
  }

  toString(): string {
    return `armWatch(${targetLabel(this.target)}, ${this.reason}, trigger=${this.trigger}, dueAt=${rel(this.dueOffset)})`
  }
}
