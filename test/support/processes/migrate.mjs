// A separate OS process that migrates the SQLite file in argv[2], so several
// processes race for real. It waits at a barrier until argv[5] processes
// (default 1) have arrived, and not before the moment argv[3] (epoch ms).
// With argv[4] = "slow", every step first sleeps 100 ms inside the migration
// transaction; with "hold", only the first step does, for 300 ms. With argv[6]
// = "stock", it migrates over the stock @effect/sql-sqlite-node client rather
// than the project's own. Prints
// `{ applied, startedAt, endedAt }`: the ids it applied and when its
// migration began and ended, so the caller can check the racers overlapped.
import { mkdirSync, readdirSync, writeFileSync } from "node:fs"
import { layerClient, layerStockSqliteClient, migrate, migrations, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"

const [file, startAt, mode, parties = "1", client = "project"] = process.argv.slice(2)
const delayed = (ms, step) => ({ ...step, up: (sql, t) => Effect.zipRight(Effect.sleep(ms), step.up(sql, t)) })
const steps = mode === "slow"
  ? migrations.map((step) => delayed(100, step))
  : mode === "hold"
  ? migrations.map((step, i) => i === 0 ? delayed(300, step) : step)
  : migrations
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const barrier = `${file}.barrier`
mkdirSync(barrier, { recursive: true })
writeFileSync(`${barrier}/${process.pid}`, "")
while (readdirSync(barrier).length < Number(parties)) await sleep(2)
await sleep(Math.max(0, Number(startAt) - Date.now()))

const startedAt = Date.now()
const applied = await Effect.runPromise(
  Effect.scoped(
    Effect.flatMap(Layer.build(client === "stock" ? layerStockSqliteClient(file) : layerClient({ url: file })), (context) =>
      Effect.provide(Effect.flatMap(SqlClient, (sql) => migrate(sql, tableNames(), steps)), context))
  )
)
process.stdout.write(JSON.stringify({ applied, startedAt, endedAt: Date.now() }))
