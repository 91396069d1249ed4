import fc from "fast-check"
import { describe, it } from "vitest"
import { commandsConstraints, modelParameters } from "./runs.js"
import { RunConcurrently } from "./transactions/RunConcurrently.js"
import { RunTransaction } from "./transactions/RunTransaction.js"
import { emptyTables, type TxModel } from "./transactions/TxModel.js"
import { TxReal } from "./transactions/TxReal.js"

describe("memory adapter transactions agree with a plain serial model", () => {
  it("a failed, dead or interrupted transaction leaves no trace; concurrent ones never interleave", async () => {
    const real = new TxReal()
    await fc.assert(
      fc.asyncProperty(
        fc.commands<TxModel, TxReal, false>([RunTransaction.arbitrary, RunConcurrently.arbitrary], commandsConstraints(12)),
        async (commands) => {
          const model: TxModel = { tables: emptyTables(), history: [] }
          await fc.asyncModelRun(() => ({ model, real: real.fresh() }), commands)
        }
      ),
      modelParameters()
    )
  }, 600_000)
})
