// A separate OS process that migrates the SQLite file in argv[2] at the
// moment argv[3] (epoch ms), so several processes race for real; prints the
// ids it applied as JSON. With argv[4] = "slow", every step first sleeps
// 100 ms inside the migration transaction, so the racers surely overlap.
import { layerClient, migrate, migrations, tableNames } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"

const [file, startAt, mode] = process.argv.slice(2)
const steps = mode === "slow"
  ? migrations.map((step) => ({ ...step, up: (sql, t) => Effect.zipRight(Effect.sleep(100), step.up(sql, t)) }))
  : migrations
await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())))
const applied = await Effect.runPromise(
  Effect.scoped(
    Effect.flatMap(Layer.build(layerClient({ url: file })), (context) =>
      Effect.provide(Effect.flatMap(SqlClient, (sql) => migrate(sql, tableNames(), steps)), context))
  )
)
process.stdout.write(JSON.stringify(applied))
