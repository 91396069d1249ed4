import { ConnectorStore } from "@connector-store/core"
import { layer } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime } from "effect"
import { scratchSqliteFolder } from "./support/databases.mjs"
import { insertFleet, watchFleet, FETCHED, MAX_ATTEMPTS } from "./support/watch-fleet.mjs"
const proto = Object.getPrototypeOf(Effect.runFork(Effect.void))
const hist = new Map(); let on = false
for (const op of ["Sync", "Success", "Failure", "OnSuccess", "OnFailure", "OnSuccessAndFailure", "Async", "WithRuntime", "UpdateRuntimeFlags", "Yield", "Commit", "Iterator", "While", "Tag", "Left", "Right", "Some", "None"]) {
  const f = proto[op]; if (typeof f !== "function") continue
  proto[op] = function (cur) { if (on) { const k = op + (op === "Commit" ? ":" + (cur.constructor?.name ?? "?") + " " + String(cur.commit).slice(0, 80).replace(/\s+/g, " ") : op === "Sync" || op === "WithRuntime" || op === "OnSuccess" || op === "OnFailure" || op === "OnSuccessAndFailure" || op === "UpdateRuntimeFlags" ? ":" + String(cur.effect_instruction_i0 ?? cur.effect_instruction_i1).slice(0, 60).replace(/\s+/g, " ") : ""); hist.set(k, (hist.get(k) ?? 0) + 1) } return f.call(this, cur) }
}
const dir = scratchSqliteFolder(); const pgdb = { drop: async () => dir.remove() }
const conn = { url: dir.path("o.sqlite") }
const fleet = watchFleet({ workers: 1, rowsPerWorker: 4 })
const rt = ManagedRuntime.make(layer(conn, { readWinner: process.env.ASYNC ? (d) => Effect.promise(async () => fleet.winners.get(d) ?? null) : (d) => Effect.succeed(fleet.winners.get(d) ?? null) }))
await rt.runPromise(insertFleet(fleet))
const which = process.argv[2]
const N = 50
for (let i = 0; i < N + 5; i++) {
  const slot = fleet.next(0); const now = Date.now(); const until = now + 30000
  on = i >= 5 && which === "claim"; await rt.runPromise(Effect.flatMap(ConnectorStore, (s) => s.claimWatchAttempt(slot.identity, { until, generation: slot.generation, now })))
  on = i >= 5 && which === "verify"; await rt.runPromise(Effect.flatMap(ConnectorStore, (s) => s.recordVerification(slot.identity, { generation: slot.generation, claimedUntil: until, fetchedDigest: FETCHED, maxAttempts: MAX_ATTEMPTS, dueAt: now + 60000 })))
  on = i >= 5 && which === "arm"; await rt.runPromise(Effect.flatMap(ConnectorStore, (s) => s.armWatch(slot.identity, "manual", { dueAt: now })))
  on = i >= 5 && which === "select"; await rt.runPromise(Effect.flatMap(SqlClient, (s) => s`SELECT 1`))
  on = i >= 5 && which === "tx"; await rt.runPromise(Effect.flatMap(SqlClient, (s) => s.withTransaction(Effect.void)))
  on = false
  slot.generation++
}
let tot = 0; for (const v of hist.values()) tot += v
console.log(which, "ops/call", tot / N)
for (const [k, v] of [...hist].sort((a, b) => b[1] - a[1])) console.log((v / N).toFixed(1).padStart(6), k)
await rt.dispose(); await pgdb.drop()
