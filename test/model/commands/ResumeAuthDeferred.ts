import { ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { CONNECTORS, OWNERS } from "../universe.js"
import type { WatchModel } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"
import { resumeInModel } from "./ResumeOfflineDeferred.js"

/**
 * An owner re-authorised some connectors: what that owner deferred as `auth`
 * under those connectors is due at `now`. An empty list resumes nothing; a
 * connector no row has is harmless.
 */
export class ResumeAuthDeferred extends ModelCommand {
  constructor(readonly ownerDID: string, readonly connectorNames: ReadonlyArray<string>, readonly nowOffset: number) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    fc.constantFrom(...OWNERS),
    fc.subarray([...CONNECTORS, "outlook"]),
    fc.integer({ min: -3, max: 5 })
  ).map(([owner, names, offset]) => new ResumeAuthDeferred(owner, names, offset))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const now = at(m.now, this.nowOffset)
    logCommand(m, `${this} [now=${now}]`)
    const params = { ownerDID: this.ownerDID, connectorNames: this.connectorNames, now }
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.resumeAuthDeferred(params))))
    resumeInModel(
      m,
      (row) => row.deferReason === "auth" && row.ownerDID === this.ownerDID && this.connectorNames.includes(row.connectorName),
      now
    )
    expectOutcome(m, actual, { ok: undefined })
    await expectAgreement(m, r)
  }

  toString(): string {
    return `resumeAuthDeferred(${this.ownerDID}, [${this.connectorNames.join(", ")}], ${rel(this.nowOffset)})`
  }
}
