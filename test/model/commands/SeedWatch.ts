import { type DeferReason, type ProjectionWatch, type VerificationStatus, type WatchIdentity, WatchRepository } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { documentArb, digestOrNullArb, identityArb, labelOf } from "../universe.js"
import { putWatch, type WatchModel, watchKeyOf } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"

interface WatchSeed {
  readonly identity: WatchIdentity
  readonly documentID: string
  readonly status: VerificationStatus
  readonly verified: string | null
  readonly observed: string | null
  readonly attempts: number
  readonly generation: number
  readonly nextOffset: number | null
  readonly claimOffset: number | null
  readonly deferReason: DeferReason | null
  readonly version: number
  readonly age: number
}

/**
 * Puts a watch row in place through `WatchRepository.insert` (finalize, which
 * creates rows, is not built yet). Any combination of fields may be seeded, so
 * the rules are exercised on states the transitions alone reach rarely. The
 * insert is refused when the identity, or the owner's (model, document), is
 * taken.
 */
export class SeedWatch extends ModelCommand {
  constructor(readonly seed: WatchSeed) {
    super()
  }

  static readonly arbitrary = fc.record({
    identity: identityArb,
    documentID: documentArb,
    status: fc.constantFrom<VerificationStatus>("pending_verification", "pending_verification", "verified", "repair_failed"),
    verified: digestOrNullArb,
    observed: digestOrNullArb,
    attempts: fc.integer({ min: 0, max: 2 }),
    generation: fc.integer({ min: 0, max: 3 }),
    nextOffset: fc.option(fc.integer({ min: -8, max: 10 }), { nil: null, freq: 4 }),
    claimOffset: fc.option(fc.integer({ min: -5, max: 10 }), { nil: null, freq: 2 }),
    deferReason: fc.constantFrom<DeferReason | null>(null, null, "offline", "auth"),
    version: fc.integer({ min: 0, max: 3 }),
    age: fc.integer({ min: 0, max: 20 })
  }).map((seed) => new SeedWatch(seed))

  private rowAt(now: number): ProjectionWatch {
    const s = this.seed
    return {
      ...s.identity,
      documentID: s.documentID,
      verifiedStateDigest: s.verified,
      observedWinnerDigest: s.observed,
      verificationStatus: s.status,
      verificationAttempts: s.attempts,
      repairGeneration: s.generation,
      nextAttemptAt: s.nextOffset === null ? null : at(now, s.nextOffset),
      claimedUntil: s.claimOffset === null ? null : at(now, s.claimOffset),
      deferReason: s.deferReason,
      version: s.version,
      createdAt: at(now, -s.age),
      updatedAt: now
    }
  }

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const row = this.rowAt(m.now)
    logCommand(m, String(this))
    const actual = outcomeOf(await r.run(Effect.flatMap(WatchRepository, (w) => w.insert(row))))
    const taken = [...m.watches.values()].some((other) =>
      watchKeyOf(other) === watchKeyOf(row) ||
      (other.ownerDID === row.ownerDID && other.model === row.model && other.documentID === row.documentID)
    )
    if (!taken) putWatch(m, row)
    expectOutcome(m, actual, { ok: !taken })
    await expectAgreement(m, r, row)
  }

  toString(): string {
    const s = this.seed
    return `seedWatch(${labelOf(s.identity)}, ${s.documentID}, ${s.status}, verified=${s.verified}, observed=${s.observed}, ` +
      `attempts=${s.attempts}, gen=${s.generation}, next=${s.nextOffset === null ? null : rel(s.nextOffset)}, ` +
      `claim=${s.claimOffset === null ? null : rel(s.claimOffset)}, defer=${s.deferReason}, v=${s.version})`
  }
}
