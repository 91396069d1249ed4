import fc from "fast-check"
import { expectAgreement, logCommand } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import type { WatchModel } from "../WatchModel.js"
import { ModelCommand } from "./ModelCommand.js"

/** Time passes on the store's clock (sometimes not at all, so equal times are common). */
export class AdvanceClock extends ModelCommand {
  constructor(readonly by: number) {
    super()
  }

  static readonly arbitrary = fc.integer({ min: 0, max: 12 }).map((by) => new AdvanceClock(by))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    logCommand(m, String(this))
    m.now += this.by
    r.world.now += this.by
    await expectAgreement(m, r)
  }

  toString(): string {
    return `advanceClock(+${this.by})`
  }
}
