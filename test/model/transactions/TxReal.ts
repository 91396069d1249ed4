import type { ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import { StoreSnapshot, WatchRepository } from "@connector-store/core"
import { MemoryDatabase, type MemoryPorts, portsOf } from "@connector-store/memory-adapter"
import { Cause, type Context, Effect, Exit } from "effect"
import { DOCUMENTS } from "../universe.js"
import { operationKeyOf, watchKeyOf } from "../WatchModel.js"
import { watchPicture } from "./TxModel.js"

/** How a transaction ended, as seen from outside. */
export type Ended = "commit" | "fail" | "die" | "interrupt"

/** The way an exit ended. */
export const endedOf = <A, E>(exit: Exit.Exit<A, E>): Ended =>
  Exit.isSuccess(exit)
    ? "commit"
    : Cause.isInterruptedOnly(exit.cause)
    ? "interrupt"
    : Cause.isFailure(exit.cause)
    ? "fail"
    : "die"

/** The system under test of a transaction model run: the memory adapter's ports over a fresh database. */
export class TxReal {
  private ports: Context.Context<MemoryPorts> = portsOf(new MemoryDatabase())

  /** Starts a run on an empty database. */
  fresh(): this {
    this.ports = portsOf(new MemoryDatabase())
    return this
  }

  run<A, E>(effect: Effect.Effect<A, E, MemoryPorts>): Promise<Exit.Exit<A, E>> {
    return Effect.runPromiseExit(Effect.provide(effect, this.ports))
  }

  /** Both tables as committed, comparable with `pictureOf`. */
  async picture() {
    const exit = await this.run(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))
    if (Exit.isFailure(exit)) throw new Error(`snapshot failed: ${Cause.pretty(exit.cause)}`)
    const watches = (exit.value["projection_watch"] ?? []) as ReadonlyArray<ProjectionWatch>
    const operations = (exit.value["operation"] ?? []) as ReadonlyArray<ConnectorOperation>
    return {
      watches: watchPicture(watches.map((row) => ({ key: watchKeyOf(row), ...row }))),
      operations: operations.map(operationKeyOf).sort()
    }
  }
}

/** One read of the whole watch table outside any transaction (a single read of the table). */
export const watchesOutside = Effect.map(
  Effect.flatMap(WatchRepository, (watches) => watches.listByDocuments(DOCUMENTS)),
  (rows) => watchPicture(rows.map((row) => ({ key: watchKeyOf(row), ...row })))
)
