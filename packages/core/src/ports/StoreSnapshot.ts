import { Context, type Effect } from "effect"
import type { PersistenceError } from "../errors.js"

/** Every row of every table the store keeps, by table, in a stable order: for operators, and tests that prove nothing changed. */
export class StoreSnapshot extends Context.Tag("@connector-store/core/StoreSnapshot")<StoreSnapshot, {
  readonly snapshot: Effect.Effect<Readonly<Record<string, ReadonlyArray<unknown>>>, PersistenceError>
}>() {}
