import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"

/** The transaction boundary of a store: the port calls inside `withTransaction` all land or none do; nested calls join it. */
export class Transactor extends Context.Tag("@connector-store/core/Transactor")<Transactor, {
  readonly withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
}>() {}
