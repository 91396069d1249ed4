import { ConnectorStore, type DeferReason } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { putWatch, rewritten, type WatchModel } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"

/** Which deferred rows a resume reaches, by their reason, owner and connector. */
export type Reach = (row: { readonly deferReason: DeferReason | null; readonly ownerDID: string; readonly connectorName: string }) => boolean

/**
 * The model of both resumes: every attempted operation and every pending
 * watch that `reaches` becomes due at `now`, its reason cleared, written at
 * `now` (the caller's time, as the seed does). Nothing else changes.
 */
export const resumeInModel = (m: WatchModel, reaches: Reach, now: number): void => {
  for (const [key, op] of m.operations) {
    if (op.state === "attempted" && reaches(op)) {
      m.operations.set(key, { ...op, nextAttemptAt: now, deferReason: null, version: op.version + 1, updatedAt: now })
    }
  }
  for (const row of m.watches.values()) {
    if (row.verificationStatus === "pending_verification" && reaches(row)) {
      putWatch(m, rewritten(row, now, { nextAttemptAt: now, deferReason: null }))
    }
  }
}

/** The device is back online: everything deferred as `offline` is due at `now`. */
export class ResumeOfflineDeferred extends ModelCommand {
  constructor(readonly nowOffset: number) {
    super()
  }

  static readonly arbitrary = fc.integer({ min: -3, max: 5 }).map((offset) => new ResumeOfflineDeferred(offset))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const now = at(m.now, this.nowOffset)
    logCommand(m, `${this} [now=${now}]`)
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.resumeOfflineDeferred(now))))
    resumeInModel(m, (row) => row.deferReason === "offline", now)
    expectOutcome(m, actual, { ok: undefined })
    await expectAgreement(m, r)
  }

  toString(): string {
    return `resumeOfflineDeferred(${rel(this.nowOffset)})`
  }
}
