import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"

/**
 * Every row of every table the store keeps, by table (seed names without the
 * prefix, e.g. `projection_watch`), in a stable order. For operators and for
 * tests that prove a refused call changed nothing.
 */
export class StoreSnapshot extends Context.Tag("@connector-store/core/StoreSnapshot")<StoreSnapshot, {
  readonly snapshot: Effect.Effect<Readonly<Record<string, ReadonlyArray<unknown>>>, PersistenceError>
}>() {}
