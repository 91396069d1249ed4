import {
  clockFrom,
  type ConnectorOperation,
  type PersistenceError,
  type ProjectionWatch,
  StoreSnapshot
} from "@connector-store/core"
import { decodeOperation, decodeWatch, Tables } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import type { AdapterUnderTest, StoreServices } from "../support/stores.js"
import { World } from "./world.js"
import { turnOfTheEventLoop } from "./runs.js"

/** Every row the store holds in the two tables the model covers. */
export interface StoreRows {
  readonly watches: ReadonlyArray<ProjectionWatch>
  readonly operations: ReadonlyArray<ConnectorOperation>
}

/**
 * Test-only: empties the watch and operation tables of a SQL store. `false`
 * when the store has no SQL client (memory), which is rebuilt instead.
 */
const clearSqlTables = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient)
  const tables = yield* Effect.serviceOption(Tables)
  if (Option.isNone(sql) || Option.isNone(tables)) return false
  yield* sql.value.unsafe(`DELETE FROM ${tables.value.operation}`)
  yield* sql.value.unsafe(`DELETE FROM ${tables.value.projectionWatch}`)
  return true
})

/**
 * Test-only: both tables of a SQL store read directly, in one go (the full
 * snapshot reads every table, one after another). `undefined` on memory.
 */
const readSqlTables = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient)
  const tables = yield* Effect.serviceOption(Tables)
  if (Option.isNone(sql) || Option.isNone(tables)) return undefined
  const [watches, operations] = yield* Effect.all([
    sql.value.unsafe<Record<string, unknown>>(`SELECT * FROM ${tables.value.projectionWatch}`),
    sql.value.unsafe<Record<string, unknown>>(`SELECT * FROM ${tables.value.operation}`)
  ], { concurrency: 2 })
  return { watches: watches.map(decodeWatch), operations: operations.map(decodeOperation) }
})

// The snapshot hands SQL rows over as the driver returns them and memory rows as domain rows.
const asWatch = (row: unknown): ProjectionWatch =>
  typeof row === "object" && row !== null && "owner_did" in row ? decodeWatch(row as Record<string, unknown>) : row as ProjectionWatch
const asOperation = (row: unknown): ConnectorOperation =>
  typeof row === "object" && row !== null && "caller_did" in row
    ? decodeOperation(row as Record<string, unknown>)
    : row as ConnectorOperation

/**
 * The system under test of a model run: one adapter's store, kept for a whole
 * property (a SQL store is emptied between runs, a memory store rebuilt),
 * reading its clock and winners from a `World` the commands drive.
 */
export class RealStore {
  readonly world = new World()
  private runtime: ManagedRuntime.ManagedRuntime<StoreServices, PersistenceError> | undefined
  private readonly clock = clockFrom(() => this.world.now)

  constructor(readonly adapter: AdapterUnderTest) {}

  /** Starts a run: the world reset, the store empty. */
  async fresh(): Promise<this> {
    await turnOfTheEventLoop()
    this.world.reset()
    if (this.runtime !== undefined && await this.runtime.runPromise(clearSqlTables)) return this
    await this.runtime?.dispose()
    this.runtime = ManagedRuntime.make(this.adapter.layer(this.world.single))
    return this
  }

  /** Runs `effect` on the store, at the world's time. */
  async run<A, E>(effect: Effect.Effect<A, E, StoreServices>): Promise<Exit.Exit<A, E | PersistenceError>> {
    if (this.runtime === undefined) throw new Error("RealStore.run before fresh()")
    // Memory and SQLite calls never leave the microtask queue; yielding to the
    // event loop keeps a concurrent Postgres property's sockets served.
    await new Promise((resolve) => setImmediate(resolve))
    return this.runtime.runPromiseExit(Effect.withClock(effect, this.clock))
  }

  /** Every watch and operation row the store holds. */
  async rows(): Promise<StoreRows> {
    const direct = await this.run(readSqlTables)
    if (Exit.isFailure(direct)) throw new Error(`reading the tables failed: ${Cause.pretty(direct.cause)}`)
    return direct.value ?? (await this.snapshot()).rows
  }

  /** Every table of the store, through the snapshot port: the two the model covers, decoded, and the others. */
  async snapshot(): Promise<{ readonly rows: StoreRows; readonly others: Readonly<Record<string, ReadonlyArray<unknown>>> }> {
    const exit = await this.run(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))
    if (Exit.isFailure(exit)) throw new Error(`snapshot failed: ${Cause.pretty(exit.cause)}`)
    const { projection_watch: watches = [], operation: operations = [], ...others } = exit.value
    return { rows: { watches: watches.map(asWatch), operations: operations.map(asOperation) }, others }
  }

  async dispose(): Promise<void> {
    await this.runtime?.dispose()
    this.runtime = undefined
  }
}
