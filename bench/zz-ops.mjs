import { ConnectorStore, WatchRepository } from "@connector-store/core"
import { layer } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime, Scheduler } from "effect"
import { scratchPostgres } from "./support/databases.mjs"
import { insertFleet, watchFleet, FETCHED, MAX_ATTEMPTS } from "./support/watch-fleet.mjs"
let OPS = 0
const counting = { scheduleTask: (t, p) => Scheduler.defaultScheduler.scheduleTask(t, p), shouldYield: (f) => { OPS++; return Scheduler.defaultScheduler.shouldYield(f) } }
const pgdb = await scratchPostgres()
const conn = { url: pgdb.url, tablePrefix: "p_", maxConnections: 10 }
const fleet = watchFleet({ workers: 1, rowsPerWorker: 4 })
const rt = ManagedRuntime.make(layer(conn, { readWinner: (d) => Effect.succeed(fleet.winners.get(d) ?? null) }))
await rt.runPromise(insertFleet(fleet))
const count = {}
const run = async (name, eff) => { const o = OPS; const r = await rt.runPromise(Effect.withScheduler(eff, counting)); count[name] = (count[name] ?? 0) + OPS - o; return r }
const N = 200
const sql = (await import("@effect/sql/SqlClient")).SqlClient
for (let i = 0; i < N; i++) {
  const slot = fleet.next(0); const now = Date.now(); const until = now + 30000
  await run("claim", Effect.flatMap(ConnectorStore, (s) => s.claimWatchAttempt(slot.identity, { until, generation: slot.generation, now })))
  await run("verify", Effect.flatMap(ConnectorStore, (s) => s.recordVerification(slot.identity, { generation: slot.generation, claimedUntil: until, fetchedDigest: FETCHED, maxAttempts: MAX_ATTEMPTS, dueAt: now + 60000 })))
  await run("arm", Effect.flatMap(ConnectorStore, (s) => s.armWatch(slot.identity, "manual", { dueAt: now })))
  await run("emptyTx", Effect.flatMap(sql, (s) => s.withTransaction(Effect.void)))
  await run("txSelect", Effect.flatMap(sql, (s) => s.withTransaction(s`SELECT 1`)))
  await run("select", Effect.flatMap(sql, (s) => s`SELECT 1`))
  await run("lockRead", Effect.flatMap(WatchRepository, (w) => w.lockRead(slot.identity)))
  await run("getWatch", Effect.flatMap(ConnectorStore, (s) => s.getWatch(slot.identity)))
  await run("scopedReserve", Effect.flatMap(sql, (s) => Effect.scoped(s.reserve)))
  await run("reserveBegin", Effect.flatMap(sql, (s) => Effect.scoped(Effect.flatMap(s.reserve, (c) => c.executeUnprepared("SELECT 1", [], undefined)))))
  await run("reserve2", Effect.flatMap(sql, (s) => Effect.scoped(Effect.flatMap(s.reserve, (c) => Effect.zipRight(c.executeUnprepared("SELECT 1", [], undefined), c.executeUnprepared("SELECT 1", [], undefined))))))
  await run("nothing", Effect.flatMap(sql, (s) => Effect.void))
  slot.generation++
}
for (const [k, v] of Object.entries(count)) console.log(k.padEnd(10), (v / N).toFixed(1))
await rt.dispose(); await pgdb.drop()
