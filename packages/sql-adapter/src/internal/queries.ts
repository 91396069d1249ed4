import { PersistenceError } from "@connector-store/core"
import { Cause, Effect, Either, Exit, Option } from "effect"
import type { RawRow } from "./columns.js"

/** A statement as the client runs it: the rows it returns, or a driver error. */
export type RowQuery = Effect.Effect<ReadonlyArray<RawRow>, unknown>

/**
 * `statement`'s result turned by `then`, its failure a `PersistenceError`
 * for `operation`: what `Effect.map` then `PersistenceError.refail` mean
 * (the cause's first failure wrapped, a defect or an interruption passed
 * on, a throw of `then` a defect), in one continuation where those push two
 * and take a step more. Every statement of a store call goes through here.
 */
export const statementThen = <R, A, X>(
  operation: string,
  statement: Effect.Effect<R, unknown, X>,
  then: (result: R) => A
): Effect.Effect<A, PersistenceError, X> =>
  Effect.matchCauseEffect(statement, {
    onFailure: (cause) => {
      const failure = Cause.failureOrCause(cause)
      return Either.isLeft(failure)
        ? Exit.fail(new PersistenceError({ operation, cause: failure.left }))
        : Exit.failCause(failure.right)
    },
    onSuccess: (result) => Exit.succeed(then(result))
  })

/** Every row of `query`, decoded; a driver failure becomes a `PersistenceError` for `operation`. */
export const decodeAll = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.map(decode))

/** The first row of `query`, decoded, if any. */
export const decodeFirst = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.length === 0 ? Option.none() : Option.some(decode(rows[0]!)))

/** Whether a write's `RETURNING` gave any row: `false` means it matched none (a lost race, a conflict). */
export const returnedAny = (operation: string, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.length > 0)

/** `many` and `one` readers for one table's decoder. */
export const rowReaders = <A>(decode: (row: RawRow) => A) => ({
  many: (operation: string, query: RowQuery) => decodeAll(operation, decode, query),
  one: (operation: string, query: RowQuery) => decodeFirst(operation, decode, query)
})
