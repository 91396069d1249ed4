import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"

/**
 * The transaction boundary of a store. Every port call made inside
 * `withTransaction` sees and writes one consistent state: all of its writes
 * land, or none do (a failure or defect rolls back). Nested calls join the
 * outer transaction. Concurrent transactions on one row serialize on its
 * lock (`lockRead`).
 */
export class Transactor extends Context.Tag("@connector-store/core/Transactor")<Transactor, {
  readonly withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | PersistenceError, R>
}>() {}
