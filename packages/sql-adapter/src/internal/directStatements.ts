import { PersistenceError } from "@connector-store/core"
import { SqlError } from "@effect/sql/SqlError"
import type { Statement } from "@effect/sql/Statement"
import { classified } from "../SqlFailure.js"

/** A statement's text and parameters, as the driver takes them. */
export type Compiled = readonly [text: string, params: ReadonlyArray<unknown>]

/** A repository statement (built, or already text and parameters) compiled for the driver. */
export const compiled = (statement: Statement<unknown> | Compiled): Compiled =>
  Array.isArray(statement) ? statement as Compiled : (statement as Statement<unknown>).compile()

/**
 * A driver failure of a statement run outside the client, as the
 * repositories report it: a classified `PersistenceError` for `operation`,
 * its cause a `SqlError` as the client would have made it.
 */
export const directFailure = (operation: string, cause: unknown): PersistenceError =>
  classified(new PersistenceError({
    operation,
    cause: cause instanceof SqlError ? cause : new SqlError({ cause, message: "Failed to execute statement" })
  }))

/** The first of `found` decoded, or undefined when there is none. */
export const firstOf = <A, Row>(decode: (row: Row) => A, found: ReadonlyArray<Row>): A | undefined =>
  found.length === 0 ? undefined : decode(found[0]!)
