import { Effect, type Fiber } from "effect"
import { nativeTracer } from "@connector-store/core/adapter"

/**
 * Whether a tracer is installed on `fiber`. It only ever decides whether a
 * span is added around what runs, never what runs: Effect's own tracer
 * exports nowhere, so without one the span is skipped.
 */
export const traced = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean => fiber.currentTracer !== nativeTracer

/**
 * `run` (one statement, `text`) in a span as `@effect/sql` opens one around
 * each statement: `sql.execute`, kind `client`, with the client's span
 * attributes, `db.operation.name` (`execute`, `executeRaw`) and
 * `db.query.text` (the statement's text, never its parameters).
 */
export const statementSpan = <A, E>(
  run: Effect.Effect<A, E>,
  attributes: ReadonlyArray<readonly [string, unknown]>,
  operation: string,
  text: string
): Effect.Effect<A, E> =>
  Effect.useSpan("sql.execute", { kind: "client", captureStackTrace: false }, (span) => {
    for (const [key, value] of attributes) span.attribute(key, value)
    span.attribute("db.operation.name", operation)
    span.attribute("db.query.text", text)
    return run
  })

/**
 * `transaction` in a span as `@effect/sql` opens one around each
 * transaction: `sql.transaction`, kind `client`, with the client's span
 * attributes; its statements' spans are its children.
 */
export const transactionSpan = <A, E, R>(
  transaction: Effect.Effect<A, E, R>,
  attributes: ReadonlyArray<readonly [string, unknown]>
): Effect.Effect<A, E, R> =>
  Effect.withSpan(transaction, "sql.transaction", {
    kind: "client",
    captureStackTrace: false,
    attributes: Object.fromEntries(attributes)
  })
