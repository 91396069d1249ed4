import { ConnectorStore } from "@connector-store/core"
import { layer, openConnectorStore, tableNames } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime, Scheduler } from "effect"
export let OPS = 0
const counting = { scheduleTask: (t, p) => Scheduler.defaultScheduler.scheduleTask(t, p), shouldYield: (f) => { OPS++; return Scheduler.defaultScheduler.shouldYield(f) } }
globalThis.__counting = counting
import { scratchPostgres } from "./support/databases.mjs"
import { rawPgSteps } from "./support/raw-watch-steps.mjs"
import { cycleOver, effectCycleOver, insertFleet, watchFleet } from "./support/watch-fleet.mjs"
const mode = process.argv[2] ?? "promise"
const N = Number(process.argv[3] ?? 2000)
const pgdb = await scratchPostgres()
const conn = { url: pgdb.url, tablePrefix: "p_", maxConnections: 10 }
const fleet = watchFleet({ workers: 1, rowsPerWorker: 4 })
const winnerOf = (d) => fleet.winners.get(d) ?? null
let cycle, close
if (mode === "promise") {
  const store = await openConnectorStore({ ...conn, readWinner: winnerOf })
  await store.runEffect(insertFleet(fleet)); cycle = cycleOver(store, fleet); close = () => store.close()
} else if (mode === "effect") {
  const rt = ManagedRuntime.make(layer(conn, { readWinner: (d) => Effect.succeed(winnerOf(d)) }))
  await rt.runPromise(insertFleet(fleet)); const rt0 = rt; const wrapped = { runPromise: (e) => rt0.runPromise(process.env.COUNT ? Effect.withScheduler(e, counting) : e) }; cycle = effectCycleOver(wrapped, ConnectorStore, fleet); close = () => rt.dispose()
} else {
  const store = await openConnectorStore({ ...conn, readWinner: () => null })
  await store.runEffect(insertFleet(fleet)); await store.close()
  const raw = (mode === "effmin" ? (await import("./zz-effmin.mjs")).effMinSteps : rawPgSteps)(conn.url, tableNames("p_").projectionWatch, fleet.winners, 10)
  cycle = cycleOver(raw, fleet); close = raw.close
}
for (let i = 0; i < 300; i++) await cycle(0)
const c0 = process.cpuUsage(); const t0 = performance.now()
for (let i = 0; i < N; i++) await cycle(0)
const t = performance.now() - t0; const c = process.cpuUsage(c0)
console.log("ops/cycle", OPS / (N + 300)); console.log(mode, "cycles/s", Math.round(N / t * 1000), "cpu µs/cycle", Math.round((c.user + c.system) / N), "user", Math.round(c.user / N), "sys", Math.round(c.system / N))
await close(); await pgdb.drop()
