import fc from "fast-check"
import { expectAgreement, logCommand } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { digestArb, documentArb } from "../universe.js"
import type { WatchModel } from "../WatchModel.js"
import type { WinnerState } from "../world.js"
import { ModelCommand } from "./ModelCommand.js"

/**
 * The document store converges a document on a new winner (a digest, no
 * winner at all, or becomes unreadable for a while). The store's rows do not
 * change; what later transitions and sweeps read does.
 */
export class MoveWinner extends ModelCommand {
  constructor(readonly documentID: string, readonly winner: WinnerState) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    documentArb,
    fc.oneof(
      { arbitrary: digestArb, weight: 8 },
      { arbitrary: fc.constant(null), weight: 1 },
      { arbitrary: fc.constant<WinnerState>("unreadable"), weight: 1 }
    )
  ).map(([doc, winner]) => new MoveWinner(doc, winner))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    logCommand(m, String(this))
    m.winners.set(this.documentID, this.winner)
    r.world.winners.set(this.documentID, this.winner)
    await expectAgreement(m, r)
  }

  toString(): string {
    return `moveWinner(${this.documentID} -> ${this.winner})`
  }
}
