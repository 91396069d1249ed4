import { PersistenceError } from "@connector-store/core"
import { reportCorruptRows } from "@connector-store/core/adapter"
import type * as Statement from "@effect/sql/Statement"
import { Cause, Effect, Either, Exit, Option } from "effect"
import { decodeEach, type RawRow, type RowDecoder } from "./columns.js"
import { OWN_CONNECTION, ownTransactionOf } from "./ownConnections.js"
import { statementSpan, traced } from "./tracing.js"

/** A statement as the client runs it: the rows it returns, or a driver error. */
export type RowQuery = Effect.Effect<ReadonlyArray<RawRow>, unknown>

/** A store statement as `@effect/sql` builds it: compiled once it runs. */
type Compilable = { readonly compile: (withoutTransform?: boolean) => readonly [string, ReadonlyArray<unknown>] }

const isCompilable = (statement: unknown): statement is Compilable =>
  typeof (statement as Partial<Compilable>).compile === "function"

/**
 * `statement` run: inside a transaction of the store's own client, on its
 * connection at once (see `ownTransactionOf`), as rows or (`raw`) as the
 * driver's result; anywhere else on `@effect/sql`'s own path.
 */
const ran = <R, X>(statement: Effect.Effect<R, unknown, X>, raw: boolean): Effect.Effect<R, unknown, X> =>
  !isCompilable(statement) ? statement : Effect.withFiberRuntime((fiber) => {
    const connection = ownTransactionOf(fiber)
    if (connection === undefined) return raw ? (statement as unknown as { readonly raw: Effect.Effect<R, unknown, X> }).raw : statement
    const [text, params] = statement.compile()
    const run = (raw ? connection.executeRaw(text, params) : connection.execute(text, params, undefined)) as Effect.Effect<R, unknown>
    return traced(fiber) ? statementSpan(run, connection[OWN_CONNECTION], raw ? "executeRaw" : "execute", text) : run
  })

/**
 * `statement`'s result turned by `then`, its failure a `PersistenceError`
 * for `operation`: what `Effect.map` then `PersistenceError.refail` mean
 * (the cause's first failure wrapped, a defect or an interruption passed
 * on, a throw of `then` a defect), in one continuation where those push two
 * and take a step more. Every statement of a store call goes through here
 * (see `ran`); `raw` answers the driver's result instead of rows.
 */
export const statementThen = <R, A, X>(
  operation: string,
  statement: Effect.Effect<R, unknown, X>,
  then: (result: R) => A,
  raw = false
): Effect.Effect<A, PersistenceError, X> =>
  Effect.matchCauseEffect(ran(statement, raw), {
    onFailure: (cause) => {
      const failure = Cause.failureOrCause(cause)
      return Either.isLeft(failure)
        ? Exit.fail(new PersistenceError({ operation, cause: failure.left }))
        : Exit.failCause(failure.right)
    },
    onSuccess: (result) => Exit.succeed(then(result))
  })

/** `statement`'s raw driver result (a write's row count) turned by `then`, as `statementThen` runs it. */
export const rawThen = <A>(operation: string, statement: Statement.Statement<object>, then: (raw: unknown) => A) =>
  statementThen(operation, statement as unknown as Effect.Effect<unknown, unknown>, then, true)

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
