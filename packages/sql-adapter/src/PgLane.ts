import type { DirectRowsOf, DirectTransactionOf, LaneDatabaseApi } from "@connector-store/core/adapter"
import type * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { Statement } from "@effect/sql/Statement"
import { Effect } from "effect"
import type Pg from "pg"
import type { RawRow } from "./internal/columns.js"
import { directRows } from "./internal/directRows.js"
import { type Compiled, compiled, directFailure } from "./internal/directStatements.js"
import { withConnectionThen } from "./internal/transactionContext.js"
import type { TableNames } from "./Tables.js"

const ignore = (): void => undefined

/** Runs one statement: the pool (a client per statement) or a transaction's client. */
type Run = (text: string, params: ReadonlyArray<unknown>) => Promise<Pg.QueryResult>

/** What the lane needs of the store's Postgres client (see `PgConnection.laneParts`). */
export interface PgLaneParts {
  readonly pool: Pg.Pool
  /** The `@effect/sql` connection of a checked-out client, for effects joined to its transaction. */
  readonly connectionOf: (client: Pg.PoolClient) => Connection
}

/**
 * The project's Postgres client as a `LaneDatabaseApi`: the repositories'
 * own statements (`watchStatements`, `operationStatements`), compiled and
 * sent straight to `pg`, one Promise each. A statement outside a
 * transaction takes a pooled client for itself; a transaction checks one
 * out, `BEGIN`s on it, runs its rows there, and hands it back after
 * `COMMIT` or `ROLLBACK`, or discards it when one of those failed (it
 * could still hold an open transaction). Failures are classified
 * `PersistenceError`s named as the repositories name them; a `COMMIT` the
 * server answers with `ROLLBACK` fails too, as on the Effect path.
 */
export const makePgLane = (
  sql: Client.SqlClient,
  parts: PgLaneParts,
  tables: TableNames,
  repositories: LaneDatabaseApi["repositories"]
): LaneDatabaseApi => {
  const { pool } = parts

  const rowsOn = (run: Run): DirectRowsOf<true> => {
    const result = (name: string, statement: Statement<unknown> | Compiled): Promise<Pg.QueryResult> => {
      let sent: Promise<Pg.QueryResult>
      try {
        const [text, params] = compiled(statement)
        sent = run(text, params)
      } catch (cause) {
        return Promise.reject(directFailure(name, cause))
      }
      return sent.catch((cause: unknown) => {
        throw directFailure(name, cause)
      })
    }
    // pg answers every statement later: these rows always answer with a Promise.
    return directRows(sql, tables, {
      rows: (name, statement) => result(name, statement).then((answered) => answered.rows as ReadonlyArray<RawRow>),
      touchedAny: (name, statement) => result(name, statement).then((answered) => (answered.rowCount ?? 0) > 0),
      map: (answer, then) => (answer as Promise<never>).then(then),
      lockSlot: result
    }) as DirectRowsOf<true>
  }

  /** A checked-out client in a transaction; `release` hands it back, or discards it given an error. */
  const transactionOn = (client: Pg.PoolClient, release: (error?: unknown) => void): DirectTransactionOf<true> => {
    let ended = false
    const end = (text: "COMMIT" | "ROLLBACK"): Promise<Pg.QueryResult> => {
      ended = true
      return client.query(text)
    }
    return {
      rows: rowsOn((text, params) => client.query(text, params as Array<unknown>)),
      commit: () => {
        if (ended) return Promise.resolve()
        return end("COMMIT").then(
          (answered) => {
            if (answered.command !== "ROLLBACK") return release()
            release()
            throw directFailure("transaction", new Error("COMMIT rolled the transaction back: a statement in it had failed"))
          },
          (cause: unknown) => {
            release(cause)
            throw directFailure("transaction", cause)
          }
        )
      },
      rollback: () => {
        if (ended) return Promise.resolve()
        return end("ROLLBACK").then(() => release(), (cause: unknown) => release(cause))
      },
      // Called with interruption off (see the port), as withConnectionThen needs.
      joined: (effect) =>
        Effect.withFiberRuntime((fiber) => withConnectionThen(fiber.currentContext, parts.connectionOf(client), 0, effect, (exit) => exit))
    }
  }

  return {
    repositories,
    ...rowsOn((text, params) => pool.query(text, params as Array<unknown>)),
    free: () => true,
    begin: () =>
      new Promise<DirectTransactionOf<true>>((resolve, reject) => {
        pool.connect((cause, client, done) => {
          if (cause !== undefined && cause !== null || client === undefined) {
            reject(directFailure("transaction", cause ?? new Error("No client returned")))
            return
          }
          // The pool stops listening to a client it hands out: an error it
          // reports then (its backend gone) must be heard, or it is thrown.
          // The next statement on it fails, and so does the ROLLBACK after,
          // which discards it.
          client.on("error", ignore)
          const release = (error?: unknown) => {
            client.off("error", ignore)
            done(error === undefined ? undefined : error instanceof Error ? error : new Error(String(error)))
          }
          client.query("BEGIN").then(
            () => resolve(transactionOn(client, release)),
            (failed: unknown) => {
              release(failed)
              reject(directFailure("transaction", failed))
            }
          )
        })
      })
  }
}
