import { PersistenceError } from "@connector-store/core"
import { reportCorruptRows } from "@connector-store/core/adapter"
import { Cause, Effect, Either, Exit, Option } from "effect"
import { decodeEach, type RawRow, type RowDecoder } from "./columns.js"

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

/**
 * Every row of `query`, decoded; a driver failure becomes a `PersistenceError` for `operation`.
 * A row that does not decode fails the read (a `CorruptRow` defect, which the store's
 * boundary turns into the call's `CorruptRow` failure): for reads a decision rests on.
 */
export const decodeAll = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.map(decode))

/**
 * Every row of `query` that decodes, in order; each row that does not is
 * skipped and reported (`reportCorruptRows`: a warning, a count, and the
 * caller's `collectCorruptRows`). For list reads and sweeps, so one corrupt
 * row never hides the healthy ones. One query; the rows are decoded after it.
 */
export const decodeHealthy = <A>(operation: string, decode: RowDecoder<A>, query: RowQuery) =>
  Effect.flatMap(statementThen(operation, query, (rows) => decodeEach(decode, rows)), ({ corrupt, decoded }) =>
    corrupt.length === 0 ? Exit.succeed(decoded) : Effect.as(reportCorruptRows(operation, corrupt), decoded))

/** The first row of `query`, decoded, if any; a row that does not decode fails the read, as in `decodeAll`. */
export const decodeFirst = <A>(operation: string, decode: (row: RawRow) => A, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.length === 0 ? Option.none() : Option.some(decode(rows[0]!)))

/** Whether a write's `RETURNING` gave any row: `false` means it matched none (a lost race, a conflict). */
export const returnedAny = (operation: string, query: RowQuery) =>
  statementThen(operation, query, (rows) => rows.length > 0)

/** `many`, `healthy` (skipping what does not decode) and `one` readers for one table's decoder. */
export const rowReaders = <A>(decode: RowDecoder<A>) => ({
  many: (operation: string, query: RowQuery) => decodeAll(operation, decode, query),
  healthy: (operation: string, query: RowQuery) => decodeHealthy(operation, decode, query),
  one: (operation: string, query: RowQuery) => decodeFirst(operation, decode, query)
})
