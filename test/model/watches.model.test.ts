import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { adaptersUnderTest } from "../support/stores.js"
import { expectAgreement, expectSnapshotAgreement } from "./agreement.js"
import { watchCommands } from "./commands/index.js"
import { RealStore } from "./RealStore.js"
import { MODEL_RUNS, modelParameters } from "./runs.js"
import { DOCUMENTS } from "./universe.js"
import { emptyModel } from "./WatchModel.js"

const adapters = await adaptersUnderTest()

describe("watches, the due sweep and retention agree with a plain model after every command", () => {
  it("CONNECTOR_STORE_MODEL_RUNS is a positive whole number of runs per adapter", () => {
    expect(Number.isSafeInteger(MODEL_RUNS) && MODEL_RUNS > 0, `runs: ${MODEL_RUNS}`).toBe(true)
  })

  for (const adapter of adapters) {
    // Concurrent with the other adapters: Postgres mostly waits on its server.
    it.concurrent(`${adapter.name}: random arm/claim/defer/verify/resume/sweep/retention sequences`, async () => {
      const store = new RealStore(adapter)
      try {
        await fc.assert(
          fc.asyncProperty(watchCommands(50), async (commands) => {
            await store.fresh()
            const model = emptyModel(adapter.name, DOCUMENTS)
            await expectAgreement(model, store)
            await fc.asyncModelRun(() => ({ model, real: store }), commands)
            await expectSnapshotAgreement(model, store)
          }),
          modelParameters()
        )
      } finally {
        await store.dispose()
      }
    }, 600_000)
  }
})
