import { clockFrom, OperationPolicy, type PersistenceError, type WinnerReaders } from "@connector-store/core"
import { Tables } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Option } from "effect"
import type { AdapterUnderTest, StoreServices } from "../../support/stores.js"
import { MODEL_POLICY, START } from "./OperationModel.js"
import { turnOfTheEventLoop } from "../runs.js"

/** Test-only: empties every table a model run writes; `false` on memory (rebuilt instead). */
const clearSqlTables = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient)
  const tables = yield* Effect.serviceOption(Tables)
  if (Option.isNone(sql) || Option.isNone(tables)) return false
  yield* sql.value.unsafe(`DELETE FROM ${tables.value.operation}`)
  yield* sql.value.unsafe(`DELETE FROM ${tables.value.projectionWatch}`)
  return true
})

/**
 * The system under test of an operation model run: one adapter's store with
 * the model policy, kept for a whole property (emptied between runs), whose
 * clock the commands move. Every document's winner is `w`.
 */
export class ModelStore {
  now = START
  private runtime: ManagedRuntime.ManagedRuntime<StoreServices, unknown> | undefined
  private readonly clock = clockFrom(() => this.now)
  readonly readers: WinnerReaders = { readWinner: () => Effect.succeed("w") }

  constructor(readonly adapter: AdapterUnderTest) {}

  /** Starts a run: clock at `START`, the store empty. */
  async fresh(): Promise<this> {
    await turnOfTheEventLoop()
    this.now = START
    if (this.runtime !== undefined && await this.value(clearSqlTables)) return this
    await this.runtime?.dispose()
    this.runtime = ManagedRuntime.make(
      Layer.provide(this.adapter.layer(this.readers), Layer.succeed(OperationPolicy, MODEL_POLICY))
    )
    return this
  }

  /** Runs `effect` on the store at its clock and returns its exit. */
  run<A, E>(effect: Effect.Effect<A, E, StoreServices>): Promise<Exit.Exit<A, E | PersistenceError | unknown>> {
    if (this.runtime === undefined) throw new Error("ModelStore.run before fresh()")
    return this.runtime.runPromiseExit(Effect.withClock(effect, this.clock))
  }

  /** Runs `effect` and returns its value; a failure fails the run with its cause. */
  async value<A, E>(effect: Effect.Effect<A, E, StoreServices>): Promise<A> {
    const exit = await this.run(effect)
    if (Exit.isFailure(exit)) throw new Error(`store call failed: ${Cause.pretty(exit.cause)}`)
    return exit.value
  }

  async dispose(): Promise<void> {
    await this.runtime?.dispose()
    this.runtime = undefined
  }
}
