import type * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { Effect, type Fiber } from "effect"
import { statementSpan, traced } from "./tracing.js"

type Runtime = Fiber.RuntimeFiber<unknown, unknown>

type CompiledStatement = Statement.Statement<object> & {
  readonly spanAttributes: ReadonlyArray<readonly [string, unknown]>
  readonly transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
}

/**
 * Where a client's statements run instead of `@effect/sql`'s statement path
 * (`Statement.withConnection`, which opens a span and a scope and acquires
 * a connection for every statement): for each way of running one, what
 * runs it on `fiber`, or undefined for the stock path. A route never
 * depends on whether a tracer is installed.
 */
export interface StatementRoutes {
  /** Runs a statement for its rows (yielding the statement). */
  readonly execute: (fiber: Runtime) => Pick<Connection, "execute"> | undefined
  /** Runs a statement for the driver's raw result (`.raw`); the stock path when absent. */
  readonly executeRaw?: (fiber: Runtime) => Pick<Connection, "executeRaw"> | undefined
}

/**
 * Whether a statement on `fiber` must take the stock path: under a
 * `Statement` transformer (it must see the statement).
 */
const stockPathOn = (fiber: Runtime): boolean => fiber.getFiberRef(Statement.currentTransformer)._tag === "Some"

/**
 * `base` with the statements it makes (the template tag and `unsafe`) run
 * by `routes`, compiled as the stock path compiles them, with the same row
 * transform; `stockPathOn` and a route answering undefined keep the stock
 * path. With a tracer installed a statement is routed the same way, its
 * run in a span as the stock path opens one (`statementSpan`). Everything
 * else is `base`'s. Undefined when `base`'s statements are not of the shape
 * this relies on (their prototype's `commit` and `raw`, their
 * `spanAttributes`).
 */
export const routeStatements = (base: Client.SqlClient, routes: StatementRoutes): Client.SqlClient | undefined => {
  const sample = base.unsafe("SELECT 1") as unknown as { readonly spanAttributes?: unknown }
  const stock = Object.getPrototypeOf(sample) as object
  const stockCommit = (stock as { readonly commit?: unknown }).commit
  const stockRaw = Object.getOwnPropertyDescriptor(stock, "raw")?.get
  if (typeof stockCommit !== "function" || stockRaw === undefined || !Array.isArray(sample.spanAttributes)) return undefined
  const stockRun = stockCommit as (this: unknown) => Effect.Effect<unknown, SqlError>
  const { execute, executeRaw } = routes
  function commit(this: CompiledStatement) {
    return Effect.withFiberRuntime<ReadonlyArray<object>, SqlError>((fiber) => {
      const runner = stockPathOn(fiber) ? undefined : execute(fiber)
      if (runner === undefined) return stockRun.call(this) as Effect.Effect<ReadonlyArray<object>, SqlError>
      const [text, params] = this.compile()
      if (!traced(fiber)) return runner.execute(text, params, this.transformRows) as Effect.Effect<ReadonlyArray<object>, SqlError>
      // Routed again inside the span: a statement runs in the step it is routed in (a route may answer "run now").
      return statementSpan(
        Effect.suspend(() => execute(fiber)?.execute(text, params, this.transformRows) ?? stockRun.call(this)) as Effect.Effect<ReadonlyArray<object>, SqlError>,
        this.spanAttributes,
        "execute",
        text
      )
    })
  }
  const raw: PropertyDescriptor | undefined = executeRaw === undefined ? undefined : {
    get(this: CompiledStatement) {
      return Effect.withFiberRuntime<unknown, SqlError>((fiber) => {
        const runner = stockPathOn(fiber) ? undefined : executeRaw(fiber)
        if (runner === undefined) return stockRaw.call(this) as Effect.Effect<unknown, SqlError>
        const [text, params] = this.compile(true)
        if (!traced(fiber)) return runner.executeRaw(text, params)
        return statementSpan(
          Effect.suspend(() => executeRaw(fiber)?.executeRaw(text, params) ?? stockRaw.call(this) as Effect.Effect<unknown, SqlError>),
          this.spanAttributes,
          "executeRaw",
          text
        )
      })
    }
  }
  // Own properties on each statement: swapping its prototype instead makes
  // every statement about twice as slow to build and run in V8.
  const route = <S>(statement: S): S => {
    if (Object.getPrototypeOf(statement) === stock) {
      ;(statement as unknown as { commit: unknown }).commit = commit
      if (raw !== undefined) Object.defineProperty(statement, "raw", raw)
    }
    return statement
  }
  const client: Client.SqlClient = Object.assign(
    function sql(strings: unknown, ...args: Array<unknown>) {
      return route((base as unknown as (...a: Array<unknown>) => unknown)(strings, ...args))
    } as unknown as Client.SqlClient,
    base,
    { unsafe: (text: string, params?: ReadonlyArray<unknown>) => route(base.unsafe(text, params)) }
  )
  ;(client as unknown as { safe: unknown }).safe = client
  return client
}
