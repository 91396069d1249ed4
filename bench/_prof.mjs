import { ConnectorStore } from "@connector-store/core"
import { layer } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { insertFleet, watchFleet, effectCycleOver } from "./support/watch-fleet.mjs"
const fleet = watchFleet({ workers: 1, rowsPerWorker: 4 })
const file = `/tmp/prof/e-${process.pid}.sqlite`
const runtime = ManagedRuntime.make(layer({ url: file }, { readWinner: (d) => Effect.succeed(fleet.winners.get(d) ?? null) }))
await runtime.runPromise(insertFleet(fleet))
const cycle = effectCycleOver(runtime, ConnectorStore, fleet)
for (let i = 0; i < 5000; i++) await cycle(0)
const t = performance.now()
const N = 30000
for (let i = 0; i < N; i++) await cycle(0)
console.log("µs/cycle", ((performance.now() - t) * 1000 / N).toFixed(1))
await runtime.dispose()
