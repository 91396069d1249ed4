/**
 * The memory adapter's ports carry the hot methods too. The default memory
 * adapter offers its direct rows, so in the contract suites the Effect API
 * runs every hot method there (the ports only when the database is busy);
 * here the suites that drive the hot methods run again on the memory
 * adapter with its `DirectDatabase` left out, so its repositories'
 * transactions, locked reads, versioned writes and guarded statements are
 * what answers.
 */
import { DirectDatabase } from "@connector-store/core/adapter"
import { Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { rerunSuites } from "./support/rerun.js"
import { adaptersUnderTest, memoryPortsAdapter, useMemoryPortsOnly } from "./support/stores.js"

const offersDirectRows = <P, E>(layer: Layer.Layer<P, E>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), (context) =>
    Effect.provide(Effect.map(Effect.serviceOption(DirectDatabase), Option.isSome), context))))

const defaultMemory = (await adaptersUnderTest()).find((adapter) => adapter.name === "memory")!

describe("the memory adapter on its ports alone", () => {
  it("offers no direct rows, where the default memory adapter of the contract suites does", async () => {
    expect(await offersDirectRows(memoryPortsAdapter.layer({}))).toBe(false)
    expect(await offersDirectRows(defaultMemory.layer({}))).toBe(true)
  })
})

// The contract suites of the hot methods, re-run here on the memory ports alone.
useMemoryPortsOnly()
await rerunSuites("./watch.contract.test.js", "memory-ports")
await rerunSuites("./watch.giveup.test.js", "memory-ports")
await rerunSuites("./operations.claim.test.js", "memory-ports")
await rerunSuites("./operations.finalize.test.js", "memory-ports")
await rerunSuites("./operations.indoubt.test.js", "memory-ports")
await rerunSuites("./operations.input.test.js", "memory-ports")
await rerunSuites("./guards.stale-writes.test.js", "memory-ports")
await rerunSuites("./guarded-writes.property.test.js", "memory-ports")
await rerunSuites("./cas.test.js", "memory-ports")
