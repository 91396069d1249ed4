import { ConnectorStore } from "@connector-store/core"
import { layer, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { scratchSqliteFolder } from "./support/databases.mjs"
import { rawSqliteSteps } from "./support/raw-watch-steps.mjs"
import { cycleOver, effectCycleOver, insertFleet, watchFleet } from "./support/watch-fleet.mjs"
const mode = process.argv[2] ?? "effect"
const reader = process.argv[3] ?? "sync"
const N = Number(process.argv[4] ?? 5000)
const dir = scratchSqliteFolder()
const conn = { url: dir.path("x.sqlite") }
const fleet = watchFleet({ workers: 1, rowsPerWorker: 4 })
const winnerOf = (d) => fleet.winners.get(d) ?? null
let cycle, close
if (mode === "promise") {
  const store = await openConnectorStore({ ...conn, readWinner: reader === "async" ? async (d) => winnerOf(d) : winnerOf })
  await store.runEffect(insertFleet(fleet)); cycle = cycleOver(store, fleet); close = () => store.close()
} else if (mode === "effect") {
  const rt = ManagedRuntime.make(layer(conn, { readWinner: reader === "async" ? (d) => Effect.promise(async () => winnerOf(d)) : (d) => Effect.succeed(winnerOf(d)) }))
  await rt.runPromise(insertFleet(fleet)); cycle = effectCycleOver(rt, ConnectorStore, fleet); close = () => rt.dispose()
} else {
  const store = await openConnectorStore({ ...conn, readWinner: () => null })
  await store.runEffect(insertFleet(fleet)); await store.close()
  const raw = rawSqliteSteps(conn.url, tableNames(undefined).projectionWatch, fleet.winners, reader)
  cycle = cycleOver(raw, fleet); close = raw.close
}
for (let i = 0; i < 500; i++) await cycle(0)
const c0 = process.cpuUsage(); const t0 = performance.now()
for (let i = 0; i < N; i++) await cycle(0)
const t = performance.now() - t0; const c = process.cpuUsage(c0)
console.log(mode, reader, "cycles/s", Math.round(N / t * 1000), "µs/cycle", Math.round(t / N * 1000), "cpu user", Math.round(c.user / N), "sys", Math.round(c.system / N))
await close(); dir.remove()
